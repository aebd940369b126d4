"""Engine selection everywhere; the transformers engine on CPU; vLLM only where it can run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent2rl_tui.grader.engines import CPU_VLLM_MIN_PARAMS, EngineError, choose_engine, visible_gpus, vllm_installed
from agent2rl_tui.grader.engines.hf import TransformersEngine
from agent2rl_tui.grader.engines.vllm_engine import portable_tokenizer_dir, tensor_parallel_size
from agent2rl_tui.tasks.modelfiles import architecture_key, count_parameters, load_tokenizer
from agent2rl_tui.tasks.registry import InferenceSettings

BIG, SMALL = CPU_VLLM_MIN_PARAMS, CPU_VLLM_MIN_PARAMS - 1


@pytest.mark.parametrize(
    ("requested", "vllm", "gpus", "cpu_build", "params", "expected"),
    [
        ("auto", True, 1, False, SMALL, "vllm"),  # a GPU: vLLM whatever the size
        ("auto", True, 0, False, BIG, "transformers"),  # the CUDA build cannot run without a GPU
        ("auto", True, 0, True, BIG, "vllm"),  # the CPU build, a model big enough to pay for the start
        ("auto", True, 0, True, SMALL, "transformers"),  # the tiny model: transformers is faster
        ("auto", True, 0, True, None, "transformers"),  # size unknown (.bin weights): the safe choice
        ("auto", False, 4, False, BIG, "transformers"),
        ("transformers", True, 8, False, BIG, "transformers"),
        ("vllm", True, 2, False, SMALL, "vllm"),
        ("vllm", True, 0, True, SMALL, "vllm"),  # asked for: the CPU build runs any size
    ],
)
def test_engine_choice(requested: str, vllm: bool, gpus: int, cpu_build: bool, params: int | None,
                       expected: str) -> None:
    name, why = choose_engine(requested, vllm_available=vllm, gpus=gpus, vllm_cpu=cpu_build, params=params)
    assert name == expected and why  # the reason is recorded with the score
    if requested == "auto" and gpus == 0 and cpu_build:
        assert ("M parameters" in why) == (params is not None)


@pytest.mark.parametrize(
    ("vllm", "gpus", "message"),
    [(False, 1, "not installed"), (True, 0, "needs a CUDA GPU")],
)
def test_asking_for_vllm_where_it_cannot_run_is_an_error(vllm: bool, gpus: int, message: str) -> None:
    with pytest.raises(EngineError, match=message):
        choose_engine("vllm", vllm_available=vllm, gpus=gpus, vllm_cpu=False)
    with pytest.raises(EngineError, match="unknown engine"):
        choose_engine("tensorrt", vllm_available=vllm, gpus=gpus)


def test_the_tiny_model_is_counted_from_its_safetensors_header(tiny_model: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    assert count_parameters(tiny_model) == sum(p.numel() for p in model.parameters())
    model.save_pretrained(tmp_path / "sharded", max_shard_size="100KB")
    assert count_parameters(tmp_path / "sharded") == count_parameters(tiny_model)
    assert choose_engine("auto", vllm_available=True, gpus=0, vllm_cpu=True,
                         params=count_parameters(tiny_model))[0] == "transformers"


def test_architecture_key_tells_a_new_checkpoint_from_a_new_architecture(tiny_model: Path, tmp_path: Path) -> None:
    from agent2rl_tui.tasks.tinymodel import build_tiny_model

    other_weights = build_tiny_model(tmp_path / "weights1", weights_seed=1)
    longer = build_tiny_model(tmp_path / "long", max_positions=2048)
    resaved = tmp_path / "resaved"
    shutil.copytree(tiny_model, resaved)
    cfg = json.loads((resaved / "config.json").read_text())
    cfg.update(transformers_version="9.9.9", dtype="bfloat16")  # what a save by other versions changes
    (resaved / "config.json").write_text(json.dumps(cfg))
    key = architecture_key(tiny_model)
    assert architecture_key(other_weights) == key == architecture_key(resaved)  # weights swap in place
    assert architecture_key(trl_style_copy(tiny_model, tmp_path / "trl")) == key  # a tokenizer re-saved by TRL
    assert architecture_key(longer) != key  # another context length: a fresh engine
    assert architecture_key(build_tiny_model(tmp_path / "seed1", seed=1)) != key  # another tokenizer
    tok_cfg = json.loads((resaved / "tokenizer_config.json").read_text())
    tok_cfg["eos_token"] = "<|endoftext|>"
    (resaved / "tokenizer_config.json").write_text(json.dumps(tok_cfg))
    assert architecture_key(resaved) != key  # another end of turn: a fresh engine


def trl_style_copy(tiny_model: Path, dst: Path) -> Path:
    """The tiny model with the list-valued extra_special_tokens that TRL + transformers 5 write."""
    shutil.copytree(tiny_model, dst)
    cfg_path = dst / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["extra_special_tokens"] = cfg.pop("additional_special_tokens")
    cfg["tokenizer_class"] = "TokenizersBackend"
    cfg_path.write_text(json.dumps(cfg))
    return dst


def test_tensor_parallel_size_is_checked_before_vllm_starts(tiny_model: Path) -> None:
    heads = json.loads((tiny_model / "config.json").read_text())["num_attention_heads"]
    assert tensor_parallel_size(tiny_model, 1, 8) == 1  # the default: one GPU, whatever is visible
    with pytest.raises(EngineError, match="needs 2 GPUs; 1 visible"):
        tensor_parallel_size(tiny_model, 2, 1)
    odd = next(n for n in range(2, 64) if heads % n)
    with pytest.raises(EngineError, match=f"{heads} attention heads"):
        tensor_parallel_size(tiny_model, odd, 64)


def test_the_tasks_max_model_len_is_capped_at_the_models_context(tiny_model: Path) -> None:
    from agent2rl_tui.grader.engines.vllm_engine import capped_model_len

    own = json.loads((tiny_model / "config.json").read_text())["max_position_embeddings"]
    assert own == 4096 and capped_model_len(tiny_model, 32768) == own  # gsm8k's 32,768 on the tiny model
    assert capped_model_len(tiny_model, 128) == 128 and capped_model_len(tiny_model, None) is None


def test_list_valued_extra_special_tokens_are_tolerated(tiny_model: Path, tmp_path: Path) -> None:
    model = trl_style_copy(tiny_model, tmp_path / "trl")
    tok = load_tokenizer(model)
    assert tok.convert_tokens_to_ids("<|im_start|>") != tok.unk_token_id
    fixed = portable_tokenizer_dir(model)
    assert fixed != model
    cfg = json.loads((fixed / "tokenizer_config.json").read_text())
    assert cfg["additional_special_tokens"] == ["<|im_start|>"] and "extra_special_tokens" not in cfg
    assert cfg["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert portable_tokenizer_dir(tiny_model) == tiny_model  # nothing to fix: no copy


def test_transformers_engine_chat_and_completion_prompts(tiny_model: Path) -> None:
    engine = TransformersEngine()
    engine.load(tiny_model)
    chat = engine.render([{"role": "user", "content": "1+2="}])
    assert chat.endswith("<|im_start|>assistant\n")
    settings = InferenceSettings(max_new_tokens=4, batch_size=2)
    batched = engine.generate([chat, chat + "x", chat], settings)
    one_by_one = [engine.generate([p], InferenceSettings(max_new_tokens=4, batch_size=1))[0]
                  for p in (chat, chat + "x", chat)]
    assert batched == one_by_one  # left padding changes nothing under greedy decoding
    plain = engine.generate(["def f():"], InferenceSettings(max_new_tokens=4, chat=False, stop=("\n",)))
    assert "\n" not in plain[0]


WARM_WORKER = """
import sys
from pathlib import Path
from agent2rl_tui.grader.worker import skip_unused_optional_imports
skip_unused_optional_imports()
from agent2rl_tui.grader.engines.hf import TransformersEngine
from agent2rl_tui.tasks.registry import InferenceSettings
engine = TransformersEngine()
engine.load(Path(sys.argv[1]))
answer = engine.generate([engine.render([{"role": "user", "content": "1+2="}])], InferenceSettings(max_new_tokens=4))
print("sklearn" in sys.modules, "scipy" in sys.modules, len(answer))
import sklearn.linear_model  # AlpacaEval's length-controlled win rate, later in the same worker
print("sklearn" in sys.modules)
"""


def test_a_warm_worker_generates_without_loading_scikit_learn_or_scipy(tiny_model: Path) -> None:
    """The worker's start skips transformers' imports of scikit-learn and scipy (about 1.3 CPU-s),
    which only assisted decoding and detection losses use: generation works without them, and
    AlpacaEval's win rate can still import scikit-learn afterwards. If transformers stops
    importing them, the worker's skip can go."""
    proc = subprocess.run([sys.executable, "-c", WARM_WORKER, str(tiny_model)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["False", "False", "1", "True"], proc.stdout


def test_no_gpu_means_transformers_here_for_the_tiny_model(tiny_model: Path) -> None:
    if visible_gpus() == 0:
        assert choose_engine("auto", vllm_available=vllm_installed(), gpus=0, vllm_cpu=True,
                             params=count_parameters(tiny_model))[0] == "transformers"


needs_vllm = pytest.mark.skipif(visible_gpus() == 0, reason="no CUDA GPU: vLLM on a GPU needs one")


@pytest.mark.gpu
@needs_vllm
def test_vllm_on_a_gpu_sleeps_between_evaluations_and_wakes_with_new_weights(tiny_model: Path, tmp_path: Path) -> None:
    from agent2rl_tui.grader.engines.vllm_engine import VLLMEngine
    from agent2rl_tui.tasks.registry import EngineSettings
    from agent2rl_tui.tasks.tinymodel import build_tiny_model

    other = build_tiny_model(tmp_path / "weights1", weights_seed=1)
    settings = InferenceSettings(max_new_tokens=6, batch_size=8)
    prompts = [f"{a}+{a}=" for a in range(8)]
    engine_settings = EngineSettings(engine="vllm", gpu_memory_utilization=0.2, dtype="float32")
    fresh = VLLMEngine(engine_settings, visible_gpus())
    fresh.load(other)
    expected = fresh.generate(prompts, settings)
    fresh.close()
    warm = VLLMEngine(engine_settings, visible_gpus())
    warm.load(tiny_model)
    note = warm.sleep()
    assert warm.asleep and "GiB of GPU memory given back" in note
    timings = warm.reload(other)
    assert not warm.asleep and {"wake_weights", "reload", "wake_kv_cache"} <= set(timings)
    assert warm.generate(prompts, settings) == expected
    warm.close()
