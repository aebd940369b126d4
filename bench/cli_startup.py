"""Benchmark: how fast the command line starts (figures printed, nothing asserted).

``agent2rl-tui --help`` and ``agent2rl-tui runs`` (on a root of 20 synthetic finished runs), each
run as a fresh process, as a user runs it: wall time and CPU time (user + system, from the
process's rusage: it does not grow with the machine's load as wall time does), the median
and the best of the repetitions, and the number of modules the command loaded. The goal is
0.3 s of wall time on an idle machine; ``python -c pass`` gives the interpreter's own start.

Run: ``python bench/cli_startup.py [--quick]`` (``--quick``: 3 repetitions instead of 20, 3 runs
in the root instead of 20: the same steps in a few seconds).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.synthetic import make_run  # noqa: E402

COUNT = ("import sys\nfrom agent2rl_tui.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
         "print(len(sys.modules), file=sys.stderr)\n")


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one fresh process running ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def modules(args: list[str]) -> int:
    out = subprocess.run([sys.executable, "-c", COUNT, *args], check=True, capture_output=True, text=True)
    return int(out.stderr.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repetitions and 3 runs: the same steps, quickly")
    quick = parser.parse_args().quick
    reps, n_runs = (3, 3) if quick else (20, 20)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i in range(n_runs):
            make_run(root, f"20261122T2333{i:02d}-arith-example")
        cases = {"python -c pass": ([sys.executable, "-c", "pass"], None),
                 "agent2rl-tui --help": ([sys.executable, "-m", "agent2rl_tui.cli", "--help"], ["--help"]),
                 f"agent2rl-tui runs ({n_runs} runs)": ([sys.executable, "-m", "agent2rl_tui.cli", "--root", str(root),
                                                         "runs"], ["--root", str(root), "runs"])}
        print(f"{reps} repetitions each, fresh processes, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
        for label, (argv, args) in cases.items():
            timed(argv)  # the page cache and .pyc files warm
            walls, cpus = zip(*(timed(argv) for _ in range(reps)), strict=True)
            loaded = f", {modules(args)} modules" if args is not None else ""
            print(f"{label}: wall median {statistics.median(walls):.3f} s (best {min(walls):.3f}), "
                  f"CPU median {statistics.median(cpus):.3f} s (best {min(cpus):.3f}){loaded}")


if __name__ == "__main__":
    main()
