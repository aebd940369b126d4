"""Benchmark: what containment costs an agent (figures printed).

Times starting ``python -c pass`` bare and inside the agent's real sandbox (the bubblewrap
command a run builds, over a temporary run folder), and a small file-heavy job (write and read
back 2,000 files in the workspace) both ways: the sandbox costs milliseconds at start and
nothing measurable after.

Run: ``python bench/containment.py [REPEATS]``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agent2rl_tui.run import containment

FILE_JOB = ("import pathlib\n"
            "d = pathlib.Path('files'); d.mkdir(exist_ok=True)\n"
            "for i in range(2000): (d / f'{i}.txt').write_text('x' * 200)\n"
            "assert sum(len(p.read_text()) for p in d.iterdir()) == 400000\n")


def timed(argv: list[str], cwd: Path, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        subprocess.run(argv, cwd=cwd, check=True, capture_output=True)
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 20
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
        for label, body in (("start python -c pass", "pass"), ("2,000 small files", FILE_JOB)):
            bare = timed([sys.executable, "-c", body], ws, repeats)
            boxed = timed(made.wrap([sys.executable, "-c", body]), ws, repeats)
            mb, mc = statistics.median(bare), statistics.median(boxed)
            print(f"{label:22} bare {mb * 1000:7.1f} ms   contained {mc * 1000:7.1f} ms   "
                  f"(+{(mc - mb) * 1000:.1f} ms, median of {repeats})")


if __name__ == "__main__":
    main()
