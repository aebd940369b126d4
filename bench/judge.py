"""Benchmark: judge throughput, and a full AlpacaEval grading split into generation and judging.

1. Judge calls per second against the local judge server (tests/judge_server.py, a real HTTP
   process on 127.0.0.1 answering at once), ranking mode, 805 AlpacaEval pairs, at
   concurrency 1, 4, 8 and 16, with an empty judgement cache; then the same 805 pairs again
   (every one from the cache).
2. The 805-item grading as the eval worker does it, with the tiny model on the transformers
   engine (CPU): rendering, generation (greedy, 512 new tokens), judging (concurrency 8).

Data: the AlpacaEval reference outputs from ../shared/data (prepared into a temporary cache).
A real judge's latency (an API: ~0.5-2 s a call) makes judging, not generation, the cost;
throughput then scales with concurrency until the API's rate limit.

Run: ``python bench/judge.py`` (a few minutes). Prints figures; asserts nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
REFERENCE = ROOT.parent / "shared" / "data" / "alpaca_eval" / "gpt4_1106_preview_outputs.json"

import local_server  # noqa: E402

from agent2rl_tui.grader.evaluators import evaluator_for  # noqa: E402
from agent2rl_tui.tasks.registry import load_task  # noqa: E402


def start_judge(tmp: Path) -> tuple[subprocess.Popen, str]:
    proc, port = local_server.start("judge_server.py", tmp)
    return proc, f"http://127.0.0.1:{port}/v1"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        os.environ["AGENT2RL_DATA"] = str(tmp / "data")
        from agent2rl_tui.tasks.data import prepare

        rows = tmp / "alpaca.json"  # the agent's rows are not graded; a few stand in for them
        rows.write_text(json.dumps([{"instruction": "Say hi.", "input": "", "output": "Hi."}] * 4))
        task = load_task("alpacaeval")
        prepare(task, [REFERENCE, rows])
        items = task.load_split("eval")
        proc, url = start_judge(tmp)
        try:
            print(f"judge calls against the local judge server, ranking mode, {len(items)} pairs")
            for concurrency in (1, 4, 8, 16):
                ev = evaluator_for(task, judge={"base_url": url, "model": "local-judge", "concurrency": concurrency},
                                   seed=concurrency)
                outputs = [f"answer {concurrency}-{i}: " + it["instruction"][::-1] for i, it in enumerate(items)]
                t0 = time.perf_counter()
                ev.judge_all(items, [""] * len(items), outputs)
                dt = time.perf_counter() - t0
                print(f"  concurrency {concurrency:2}: {ev.calls / dt:7.0f} calls/s ({dt:.2f} s)")
            t0 = time.perf_counter()
            ev = evaluator_for(task, judge={"base_url": url, "model": "local-judge", "concurrency": 16})
            ev.judge_all(items, [""] * len(items), outputs)
            dt = time.perf_counter() - t0
            print(f"  the same {len(items)} pairs again: {ev.details([])['winrate']['n_cached']} from the cache, "
                  f"{ev.calls} calls, {dt:.2f} s")

            from agent2rl_tui.grader.engines.hf import TransformersEngine
            from agent2rl_tui.tasks.tinymodel import build_tiny_model

            engine = TransformersEngine()
            engine.load(build_tiny_model(tmp / "tiny"))
            ev = evaluator_for(task, judge={"base_url": url, "model": "local-judge"})
            settings = task.settings_for(None)
            t0 = time.perf_counter()
            prompts = [engine.render(ev.prompt(item)) for item in items]
            t1 = time.perf_counter()
            outputs = engine.generate(prompts, settings)
            t2 = time.perf_counter()
            results = ev.judge_all(items, prompts, outputs)
            t3 = time.perf_counter()
            print(f"full grading, {len(items)} items, tiny model (transformers, CPU), judge concurrency 8:")
            print(f"  render {t1 - t0:.1f} s, generation {t2 - t1:.1f} s "
                  f"({sum(len(engine.tokenizer(o)['input_ids']) for o in outputs) / len(outputs):.0f} tokens/output), "
                  f"judging {t3 - t2:.1f} s; score {ev.score(results):.2f} ({ev.details(results)['winrate']['metric']})")
        finally:
            proc.kill()


if __name__ == "__main__":
    main()
