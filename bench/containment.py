"""Benchmark: what containment costs an agent (figures printed).

Times starting ``python -c pass`` bare and inside the agent's real sandbox (the bubblewrap
command a run builds, over a temporary run folder), and a small file-heavy job (write and read
back 2,000 files in the workspace) both ways: the sandbox costs milliseconds at start and
nothing measurable after. Where containment is unavailable it says why and measures nothing.

Run: ``python bench/containment.py [REPEATS] [--quick]`` (default 20 repeats; ``--quick``: 3
repeats of a 200-file job, the same steps in seconds).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agent2rl_tui.run import containment

REPEATS, FILES = 20, 2000
QUICK_REPEATS, QUICK_FILES = 3, 200


def file_job(files: int) -> str:
    """A program that writes ``files`` small files in the workspace and reads them back."""
    return ("import pathlib\n"
            "d = pathlib.Path('files'); d.mkdir(exist_ok=True)\n"
            f"for i in range({files}): (d / f'{{i}}.txt').write_text('x' * 200)\n"
            f"assert sum(len(p.read_text()) for p in d.iterdir()) == {files * 200}\n")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repeats", nargs="?", type=int, help=f"runs of each (default {REPEATS}; --quick {QUICK_REPEATS})")
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_REPEATS} repeats, {QUICK_FILES} files: the same steps in seconds")
    return parser.parse_args()


def timed(argv: list[str], cwd: Path, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        subprocess.run(argv, cwd=cwd, check=True, capture_output=True)
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    args = parse_args()
    repeats = args.repeats or (QUICK_REPEATS if args.quick else REPEATS)
    files = QUICK_FILES if args.quick else FILES
    why_not = containment.probe()
    if why_not:
        print(f"containment unavailable here: {why_not}")
        return
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "runs" / "r"
        ws = run / "workspace"
        for sub in ("data", "models", "code"):
            (ws / sub).mkdir(parents=True)
        made = containment.build(run_dir=run, workspace=ws, runs_root=run.parent, data_cache=Path(tmp) / "cache",
                                 env=dict(os.environ))
        print(f"sandbox: {len(made.prefix)} arguments, hidden: {', '.join(made.hidden)}")
        for label, body in (("start python -c pass", "pass"), (f"{files:,} small files", file_job(files))):
            bare = timed([sys.executable, "-c", body], ws, repeats)
            boxed = timed(made.wrap([sys.executable, "-c", body]), ws, repeats)
            mb, mc = statistics.median(bare), statistics.median(boxed)
            print(f"{label:22} bare {mb * 1000:7.1f} ms   contained {mc * 1000:7.1f} ms   "
                  f"(+{(mc - mb) * 1000:.1f} ms, median of {repeats})")


if __name__ == "__main__":
    main()
