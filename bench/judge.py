"""Benchmark: judge throughput, and a full AlpacaEval grading split into generation and judging.

1. Judge calls per second against the local judge server (tests/support/judge_server.py, a real HTTP
   process on 127.0.0.1 answering at once), ranking mode, 805 AlpacaEval pairs, at
   concurrency 1, 4, 8 and 16, with an empty judgement cache; then the same 805 pairs again
   (every one from the cache).
2. The 805-item grading as the eval worker does it, with the tiny model on the transformers
   engine (CPU): rendering, generation (greedy, 512 new tokens), judging (concurrency 8).

Data: the AlpacaEval reference outputs from ../shared/data (prepared into a temporary cache).
A real judge's latency (an API: ~0.5-2 s a call) makes judging, not generation, the cost;
throughput then scales with concurrency until the API's rate limit.

Run: ``python bench/judge.py [--quick]`` (a few minutes; ``--quick``: the first 16 pairs and
16 new tokens, the same steps, seconds). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
REFERENCE = ROOT.parent / "shared" / "data" / "alpaca_eval" / "gpt4_1106_preview_outputs.json"
CONCURRENCY = (1, 4, 8, 16)
QUICK_ITEMS, QUICK_NEW_TOKENS = 16, 16

from support import local_server  # noqa: E402

from agent2rl_tui.grader.evaluators import evaluator_for  # noqa: E402
from agent2rl_tui.tasks.registry import Task, load_task  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"the first {QUICK_ITEMS} pairs, {QUICK_NEW_TOKENS} new tokens: the same steps in seconds")
    return parser.parse_args()


def start_judge(tmp: Path) -> tuple[subprocess.Popen, str]:
    proc, port = local_server.start("judge_server.py", tmp)
    return proc, f"http://127.0.0.1:{port}/v1"


def prepared_task(tmp: Path) -> Task:
    """AlpacaEval prepared into a cache of our own: the 805 reference outputs are the eval split."""
    from agent2rl_tui.tasks.data import prepare

    os.environ["AGENT2RL_DATA"] = str(tmp / "data")
    rows = tmp / "alpaca.json"  # the agent's rows are not graded; a few stand in for them
    rows.write_text(json.dumps([{"instruction": "Say hi.", "input": "", "output": "Hi."}] * 4))
    task = load_task("alpacaeval")
    prepare(task, [REFERENCE, rows])
    return task


def judge_throughput(task: Task, items: list[dict[str, Any]], url: str) -> None:
    """Calls per second at each concurrency on fresh pairs, then the last pairs again (all cached)."""
    print(f"judge calls against the local judge server, ranking mode, {len(items)} pairs")
    warm = evaluator_for(task, judge={"base_url": url, "model": "local-judge"})
    warm.judge_all(items[:1], [""], ["warm-up"])  # the win-rate code's imports are not judge calls
    outputs: list[str] = []
    for concurrency in CONCURRENCY:
        ev = evaluator_for(task, judge={"base_url": url, "model": "local-judge", "concurrency": concurrency})
        outputs = [f"answer {concurrency}-{i}: " + it["instruction"][::-1] for i, it in enumerate(items)]
        t0 = time.perf_counter()
        ev.judge_all(items, [""] * len(items), outputs)
        dt = time.perf_counter() - t0
        print(f"  concurrency {concurrency:2}: {ev.calls / dt:7.0f} calls/s ({dt:.2f} s)")
    t0 = time.perf_counter()
    ev = evaluator_for(task, judge={"base_url": url, "model": "local-judge", "concurrency": CONCURRENCY[-1]})
    ev.judge_all(items, [""] * len(items), outputs)
    dt = time.perf_counter() - t0
    print(f"  the same {len(items)} pairs again: {ev.details([])['winrate']['n_cached']} from the cache, "
          f"{ev.calls} calls, {dt:.2f} s")


def full_grading(task: Task, items: list[dict[str, Any]], url: str, model_dir: Path, max_new_tokens: int | None) -> None:
    """As the eval worker grades: render, generate with the tiny model, judge; the time of each."""
    from agent2rl_tui.grader.engines.hf import TransformersEngine
    from agent2rl_tui.tasks.tinymodel import build_tiny_model

    engine = TransformersEngine()
    engine.load(build_tiny_model(model_dir))
    ev = evaluator_for(task, judge={"base_url": url, "model": "local-judge"})
    settings = task.settings_for(None)
    if max_new_tokens is not None:
        settings = dataclasses.replace(settings, max_new_tokens=max_new_tokens)
    t0 = time.perf_counter()
    prompts = [engine.render(ev.prompt(item)) for item in items]
    t1 = time.perf_counter()
    outputs = engine.generate(prompts, settings)
    t2 = time.perf_counter()
    results = ev.judge_all(items, prompts, outputs)
    t3 = time.perf_counter()
    tokens = sum(len(engine.tokenizer(o)["input_ids"]) for o in outputs) / len(outputs)
    print(f"full grading, {len(items)} items, tiny model (transformers, CPU, {settings.max_new_tokens} new tokens), "
          f"judge concurrency {ev.judge_settings.concurrency}:")
    print(f"  render {t1 - t0:.1f} s, generation {t2 - t1:.1f} s ({tokens:.0f} tokens/output), "
          f"judging {t3 - t2:.1f} s; score {ev.score(results):.2f} ({ev.details(results)['winrate']['metric']})")


def main() -> None:
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout's TERM still stops the judge server
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        task = prepared_task(tmp)
        items = task.load_split("eval")[: QUICK_ITEMS if args.quick else None]
        proc, url = start_judge(tmp)
        try:
            judge_throughput(task, items, url)
            full_grading(task, items, url, tmp / "tiny", QUICK_NEW_TOKENS if args.quick else None)
        finally:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
