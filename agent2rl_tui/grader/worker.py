"""The eval worker: one process per evaluation, so a crash or hang harms nothing else.

The grader starts a worker ahead of need; it pays its heavy imports (torch,
transformers) while idle, then reads one job as a JSON line on stdin, evaluates, writes
``evals/<n>/results.jsonl`` (one line per item) and ``evals/<n>/summary.json``, and exits.
The grader reads the summary; a worker that dies or runs past its timeout leaves none,
and the grader records the submission as failed.

Run as ``python -m agent2rl_tui.grader.worker``.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent2rl_tui.grader.evaluators.base import BaseEvaluator
    from agent2rl_tui.tasks.registry import Task


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
    tmp.replace(path)


def evaluate(job: dict[str, Any], started: float, ready: float) -> dict[str, Any]:
    """Run one evaluation job and return its summary (also written to summary.json)."""
    from agent2rl_tui.grader.engines import make_engine
    from agent2rl_tui.tasks.modelfiles import weights_hash
    from agent2rl_tui.tasks.registry import load_task

    out_dir = Path(job["out_dir"])
    out_dir.mkdir(parents=True, exist_ok=True)
    model_path = Path(job["model_path"])
    task = load_task(job["task_folder"])
    settings = task.inference
    interactive = task.level == 3
    evaluator = None if interactive else evaluator_for(task)
    items = task.load_split("eval")
    if job.get("limit"):
        items = items[: int(job["limit"])]
    examples = task.load_split("train")[: settings.fewshot] if settings.fewshot and not interactive else []
    played: dict[str, Any] = {}
    timings = {"worker_start": ready - started}

    with ThreadPoolExecutor(max_workers=1) as pool:
        hashing = pool.submit(weights_hash, model_path)
        t0 = time.perf_counter()
        engine, why = make_engine(task.engine)
        print(f"engine {engine.name} ({why})", file=sys.stderr, flush=True)
        engine.load(model_path)
        t1 = time.perf_counter()
        if evaluator is None:  # Level 3: generation and judging are one loop over the games
            from agent2rl_tui.grader.evaluators.episodes import play_task

            results, played = play_task(task, engine, items, settings)
            score = float(played["score"])
            t2 = t3 = time.perf_counter()
        else:
            asked = [evaluator.prompt(item, settings, examples) for item in items]
            prompts = [p if isinstance(p, str) else engine.render(p) for p in asked]
            outputs = engine.generate(prompts, settings)
            t2 = time.perf_counter()
            results = evaluator.judge_all(items, prompts, outputs)
            score = evaluator.score(results)
            t3 = time.perf_counter()
        digest = hashing.result()
    engine.close()
    timings.update(load=t1 - t0, generate=t2 - t1, score=t3 - t2)

    with (out_dir / "results.jsonl").open("w", encoding="utf-8") as fh:
        for r in results:
            fh.write(json.dumps(r.to_dict(), ensure_ascii=False) + "\n")
    return {
        "ok": True,
        "submission_id": job["submission_id"],
        "score": score,
        "n_items": len(results),
        "n_correct": sum(r.correct for r in results),
        "weights_hash": digest,
        "engine": engine.name,
        "settings": {"evaluator": task.evaluator, "engine_choice": why, **settings.to_dict(),
                     "engine_settings": task.engine.to_dict(),
                     **({"env": task.raw.get("env", {}), "episodes": played} if played else {})},
        "timings": timings,
    }


def evaluator_for(task: Task) -> BaseEvaluator:
    """The task's evaluator, with the options its [grader] section sets."""
    from agent2rl_tui.grader.evaluators import get_evaluator

    grader = task.raw.get("grader", {})
    if task.evaluator == "humaneval":
        from agent2rl_tui.grader.evaluators.humaneval import HumanEvalEvaluator

        return HumanEvalEvaluator(timeout_s=float(grader.get("sandbox_timeout_s", 5)),
                                  memory_mb=int(grader.get("sandbox_memory_mb", 1024)),
                                  mode=grader.get("sandbox_mode"))
    return get_evaluator(task.evaluator)


def die_with_parent() -> None:
    """SIGKILL this worker when the grader dies, however it dies (Linux; set here rather than
    in a ``preexec_fn``, which forces the slow fork path and is not thread-safe)."""
    import ctypes
    import os
    import signal

    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the grader died before the line above
        os._exit(1)


def main() -> int:
    started = time.time()
    die_with_parent()
    # Pay the heavy imports before the job arrives: this is what "warm" means here. The
    # model classes and generation code are most of it (~1.5 s of the ~3 s on a CPU box).
    import torch  # noqa: F401
    from transformers import (  # noqa: F401
        AutoModelForCausalLM,
        AutoTokenizer,
        GenerationMixin,
        modeling_utils,  # noqa: F401
    )

    from agent2rl_tui.grader import evaluators  # noqa: F401
    from agent2rl_tui.grader.engines import hf  # noqa: F401

    ready = time.time()
    line = sys.stdin.readline()
    received = time.time()
    if not line.strip():
        return 0  # the grader closed our stdin: shut down without a job
    job = json.loads(line)
    out_dir = Path(job["out_dir"])
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        summary = evaluate(job, started, ready)
        summary["timings"]["job_to_summary"] = time.time() - received
    except Exception as exc:  # noqa: BLE001 - any failure becomes a recorded error
        traceback.print_exc()
        summary = {
            "ok": False,
            "submission_id": job.get("submission_id"),
            "error": f"{type(exc).__name__}: {exc}",
        }
    write_json_atomic(out_dir / "summary.json", summary)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    code = main()
    # Skip interpreter teardown: with torch loaded it takes about a second, and the grader
    # waits for this process to exit. Everything we wrote is closed already.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
