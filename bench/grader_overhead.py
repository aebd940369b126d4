"""Benchmark: per-submission grader overhead on CPU, and batched vs one-at-a-time generation.

Overhead = the agent's submit-to-scored wall time minus the eval worker's pure generation
time, for the tiny model on the arith eval split (100 items), through the real grader
subprocess and eval workers. Two cases: submissions spaced out (the pre-started spare
worker has finished its imports) and back to back (the spare is still importing).
Then the transformers engine in-process: items/s with batch 100 vs batch 1.

Run: ``python bench/grader_overhead.py [--quick]`` (about a minute; ``--quick``: 20 items, two
submissions a case, 1 s apart, the same steps in seconds). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.runs import LiveGrader, make_prepared_run  # noqa: E402

from agent2rl_tui.grader.engines.hf import TransformersEngine  # noqa: E402
from agent2rl_tui.grader.evaluators import evaluator_for  # noqa: E402
from agent2rl_tui.tasks.registry import load_task  # noqa: E402
from agent2rl_tui.tasks.tinymodel import build_tiny_model  # noqa: E402

BATCHES = (100, 16, 1)


@dataclasses.dataclass(frozen=True)
class Sizes:
    """The full run's, or --quick's (the same steps, smaller)."""

    items: int | None = None
    """Eval items per submission and in-process (None: the whole eval split, 100)."""
    submissions: int = 5
    gap_s: float = 8.0
    """Between spaced submissions: the spare worker has finished its imports."""


QUICK = Sizes(items=20, submissions=2, gap_s=1.0)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 items, 2 submissions a case: the same steps in seconds")
    return parser.parse_args()


def submit_series(grader: LiveGrader, path: str, n: int, gap_s: float) -> list[dict[str, float]]:
    out = []
    for _ in range(n):
        time.sleep(gap_s)
        t0 = time.perf_counter()
        body = grader.client.submit(path).json()
        wall = time.perf_counter() - t0
        summary = json.loads((grader.run_dir / "evals" / str(body["submission_id"]) / "summary.json").read_text())
        t = summary["timings"]
        out.append({"wall": wall, "generate": t["generate"], "load": t["load"], "score": t["score"],
                    "overhead": wall - t["generate"]})
    return out


def show(label: str, rows: list[dict[str, float]]) -> None:
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(f"{label:28} n={len(rows)}  submit->scored {med['wall']*1000:7.0f} ms  generate {med['generate']*1000:6.0f} ms"
          f"  load {med['load']*1000:5.0f} ms  overhead {med['overhead']*1000:7.0f} ms (median)")


def through_the_grader(tmp: Path, model: Path, sizes: Sizes) -> None:
    """Submissions to a real grader: submit-to-scored time against the worker's generation time."""
    run_dir = make_prepared_run(tmp / "runs", model, eval_limit=sizes.items)
    t0 = time.perf_counter()
    grader = LiveGrader(run_dir)
    try:
        print(f"grader up with baseline scored in {time.perf_counter() - t0:.2f} s (cold worker, includes imports)")
        shutil.copytree(model, run_dir / "workspace" / "output" / "m")
        show("spaced (warm spare worker)", submit_series(grader, "output/m", sizes.submissions, gap_s=sizes.gap_s))
        show("back to back", submit_series(grader, "output/m", sizes.submissions, gap_s=0.0))
    finally:
        grader.close()


def in_process(model: Path, sizes: Sizes) -> None:
    """The transformers engine alone: items/s at each batch size, on the prompts the worker asks."""
    task = load_task("arith")
    items = task.load_split("eval")[: sizes.items]
    ev = evaluator_for(task)
    engine = TransformersEngine()
    engine.load(model)
    asked = [ev.prompt(it) for it in items]  # as the eval worker asks them
    prompts = [p if isinstance(p, str) else engine.render(p) for p in asked]
    for batch in BATCHES:
        settings = dataclasses.replace(task.inference, batch_size=batch)
        engine.generate(prompts[:4], settings)  # warm-up
        t = time.perf_counter()
        engine.generate(prompts, settings)
        dt = time.perf_counter() - t
        print(f"transformers engine, batch {batch:3}: {len(prompts) / dt:8.1f} items/s ({dt*1000:.0f} ms for {len(prompts)})")


def main() -> None:
    sizes = QUICK if parse_args().quick else Sizes()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout's TERM still stops the grader
    tmp = Path(tempfile.mkdtemp(prefix="bench-grader-"))
    try:
        model = build_tiny_model(tmp / "tiny-llama")
        through_the_grader(tmp, model, sizes)
        in_process(model, sizes)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
