"""Engine selection everywhere; the transformers engine on CPU; vLLM only where it can run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent2rl_tui.grader.engines import EngineError, choose_engine, visible_gpus, vllm_installed
from agent2rl_tui.grader.engines.hf import TransformersEngine
from agent2rl_tui.grader.engines.vllm_engine import portable_tokenizer_dir, tensor_parallel_size
from agent2rl_tui.tasks.modelfiles import load_tokenizer
from agent2rl_tui.tasks.registry import InferenceSettings


@pytest.mark.parametrize(
    ("requested", "vllm", "gpus", "expected"),
    [
        ("auto", True, 1, "vllm"),
        ("auto", True, 0, "transformers"),
        ("auto", False, 4, "transformers"),
        ("transformers", True, 8, "transformers"),
        ("vllm", True, 2, "vllm"),
    ],
)
def test_engine_choice(requested: str, vllm: bool, gpus: int, expected: str) -> None:
    assert choose_engine(requested, vllm_available=vllm, gpus=gpus)[0] == expected


@pytest.mark.parametrize(
    ("vllm", "gpus", "message"),
    [(False, 1, "not installed"), (True, 0, "needs a CUDA GPU")],
)
def test_asking_for_vllm_where_it_cannot_run_is_an_error(vllm: bool, gpus: int, message: str) -> None:
    with pytest.raises(EngineError, match=message):
        choose_engine("vllm", vllm_available=vllm, gpus=gpus)
    with pytest.raises(EngineError, match="unknown engine"):
        choose_engine("tensorrt", vllm_available=vllm, gpus=gpus)


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


def test_no_gpu_means_transformers_here() -> None:
    if visible_gpus() == 0:
        assert choose_engine("auto", vllm_available=vllm_installed(), gpus=0)[0] == "transformers"


needs_vllm = pytest.mark.skipif(not vllm_installed() or visible_gpus() == 0, reason="needs vLLM and a CUDA GPU")


@pytest.mark.gpu
@needs_vllm
def test_vllm_engine_generates_like_transformers(tiny_model: Path, tmp_path: Path) -> None:
    from agent2rl_tui.grader.engines.vllm_engine import VLLMEngine
    from agent2rl_tui.tasks.registry import EngineSettings

    model = trl_style_copy(tiny_model, tmp_path / "trl")
    settings = InferenceSettings(max_new_tokens=6, batch_size=8)
    hf = TransformersEngine()
    hf.load(model)
    prompts = [hf.render([{"role": "user", "content": f"{a}+{a}="}]) for a in range(8)]
    expected = hf.generate(prompts, settings)
    vl = VLLMEngine(EngineSettings(engine="vllm", gpu_memory_utilization=0.2, enforce_eager=True,
                                   dtype="float32"), visible_gpus())
    vl.load(model)
    assert vl.render([{"role": "user", "content": "0+0="}]) == prompts[0]
    assert vl.generate(prompts, settings) == expected
    vl.close()
