"""Benchmark: DiffView on a 2,000-line rewrite and LogView on a 1 GB log, in a headless app.

Prints, for the diff, the time of ``set_diff`` alone, of ``set_diff`` plus rendering the
first screen through ``render_line``, and of ``set_diff`` until the app has painted (a
``pilot.pause()``), cold (the Pygments lexer is loaded then) and warm; for the log, the
time to mount a ``LogView`` on a 1 GB file until it has painted, how far from the end its
first loaded line is, and the time to load one older chunk; then the peak RSS.
Targets: diff < 0.2 s, log < 0.5 s, peak RSS well under 300 MB. The 1 GB file is written
to the temp folder and deleted afterwards (it is in the page cache when opened: the read of
its last 256 KB from a cold disk adds one seek). Run: ``python bench/ui_widgets.py [--quick]``
(``--quick``: a 200-line rewrite and a 16 MB log, the same steps in seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import subprocess
import tempfile
import time
from pathlib import Path

from textual.app import App, ComposeResult
from textual.widgets import Footer

from agent2rl_tui.ui.widgets import DiffView, LogView

LOG_BYTES, DIFF_LINES = 1024 * 1024 * 1024, 2000
QUICK_LOG_BYTES, QUICK_DIFF_LINES = 16 * 1024 * 1024, 200
SIZE = (160, 50)


class BenchApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Footer()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"a {QUICK_DIFF_LINES}-line rewrite, a 16 MB log: the same steps in seconds")
    return parser.parse_args()


def rewrite_diff(folder: Path, n: int = DIFF_LINES) -> str:
    old, new = folder / "train_old.py", folder / "train.py"
    old.write_text("".join(f"def f_{i}(x):  # step {i}\n    return x * {i} + 'a'\n"
                           for i in range(n // 2)))
    new.write_text("".join(f"def g_{i}(y):  # phase {i}\n    return y ** {i} - 'b'\n"
                           for i in range(n // 2)))
    return subprocess.run(["git", "diff", "--no-index", str(old), str(new)],
                          capture_output=True, text=True).stdout


def write_log(path: Path, size: int) -> None:
    line = "2025-01-01T00:00:00.000Z [trainer] step {:07d} loss=0.4321 lr=1e-5 " + "." * 30 + "\n"
    block = "".join(line.format(i) for i in range(1024 * 1024 // len(line.format(0)))).encode()
    with open(path, "wb") as f:
        written = 0
        while written < size:
            f.write(block)
            written += len(block)
        f.write(b"the very last line\n")


async def bench_diff(diff: str) -> None:
    app = BenchApp()
    async with app.run_test(size=SIZE) as pilot:
        view = DiffView()
        await app.mount(view, before=0)
        view.focus()
        await pilot.pause()
        for layout, label in ((False, "unified, cold"), (False, "unified"), (True, "side by side")):
            view.side_by_side = layout
            await pilot.pause()
            t0 = time.perf_counter()
            view.set_diff(diff)
            t1 = time.perf_counter()
            for y in range(view.size.height):
                view.render_line(y)
            t2 = time.perf_counter()
            await pilot.pause()
            t3 = time.perf_counter()
            print(f"diff ({view.line_count} rows, {label}): set_diff {1000 * (t1 - t0):.1f} ms, "
                  f"+ first screen {1000 * (t2 - t0):.1f} ms, "
                  f"until painted {1000 * (t3 - t0):.1f} ms")


async def bench_log(path: Path) -> None:
    app = BenchApp()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        t0 = time.perf_counter()
        view = LogView(path)
        await app.mount(view, before=0)
        await pilot.pause()
        t1 = time.perf_counter()
        size = path.stat().st_size
        print(f"log ({size / 2**30:.2f} GB): open until painted {1000 * (t1 - t0):.1f} ms, "
              f"{view.line_count} lines loaded, first loaded line "
              f"{(size - view.first_loaded_offset) / 1024:.0f} KB from the end, "
              f"last line {view.row_text(view.line_count - 1)!r}")
        t2 = time.perf_counter()
        view.scroll_to(y=0, animate=False)
        loaded = view.line_count
        while view.line_count == loaded and time.perf_counter() - t2 < 5:
            await pilot.pause(0.01)
        print(f"log: one older chunk ({view.line_count - loaded} lines) loaded in "
              f"{1000 * (time.perf_counter() - t2):.1f} ms")


def main() -> None:
    quick = parse_args().quick
    size = QUICK_LOG_BYTES if quick else LOG_BYTES
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        diff = rewrite_diff(folder, QUICK_DIFF_LINES if quick else DIFF_LINES)
        asyncio.run(bench_diff(diff))
        log = folder / "big.log"
        t0 = time.perf_counter()
        write_log(log, size)
        print(f"(writing the {size / 2**30:.2f} GB log took {time.perf_counter() - t0:.1f} s)")
        try:
            asyncio.run(bench_log(log))
        finally:
            log.unlink()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: {peak:.0f} MB")


if __name__ == "__main__":
    main()
