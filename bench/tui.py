"""Benchmark: the TUI on big records (figures printed, nothing asserted).

Synthetic run folders are built through the project's own store (tests/support/synthetic.py):
1,000 runs; and one run with 5,000 revisions, 1,000 submissions, a 20,000-step transcript
and a 1 GB agent log. Then, headless: time to first paint of Runs (rows on screen), of
the big Run, of a diff of a 2,000-line change, and the process's peak memory.
Goals: 1 s, 0.5 s, 0.2 s, 300 MB.

Run: ``python bench/tui.py [--quick]`` (builds the folders in /tmp once, ``$BENCH_DIR`` to put them
elsewhere; a few minutes the first time). ``--quick``: 50 runs, and a big run of 200 revisions,
50 submissions, 1,000 steps, an 8 MB log and a 200-line change, built in a temporary folder and
removed: the same steps in seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.synthetic import T0, add_logs, add_revisions, add_transcript, claude_lines, make_run  # noqa: E402

from agent2rl_tui.ui.app import Agent2RLApp  # noqa: E402

BIG_RUN = "20261122T233320-arith-claude-code"


@dataclass(frozen=True)
class Sizes:
    """The records' sizes: the full run's, or --quick's (the same steps, smaller)."""

    runs: int = 1000
    revisions: int = 5000
    """Small edits, then the big file twice: the last diff is its rewrite."""
    submissions: int = 1000
    steps: int = 20_000
    log_bytes: int = 1024 * 1024 * 1024
    change_lines: int = 2000


QUICK = Sizes(runs=50, revisions=200, submissions=50, steps=1000, log_bytes=8 * 1024 * 1024, change_lines=200)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small records in a temporary folder: the same steps in seconds")
    return parser.parse_args()


def build_many(many: Path, sizes: Sizes) -> None:
    if (many / ".done").exists():
        return
    many.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    for i in range(sizes.runs):
        make_run(many, f"2026{i:04d}T000000-arith-agent{i % 7}", agent=f"agent{i % 7}", t0=T0 - i * 3600,
                 scores=(10.0 + i % 50, 20.0 + i % 60), n_items=10)
    (many / ".done").write_text("")
    print(f"built {sizes.runs:,} runs in {time.perf_counter() - t:.1f} s")


def build_big(big: Path, sizes: Sizes) -> None:
    if (big / ".done").exists():
        return
    big.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    run = make_run(big, BIG_RUN, agent="claude-code", budget_s=12 * 3600,
                   scores=tuple(float(i % 100) for i in range(sizes.submissions)), n_items=50)
    revs = [{f"code/mod{i % 50}.py": f"VALUE = {i}\n" * (1 + i % 5)} for i in range(sizes.revisions - 1)]
    revs.append({"code/big.py": "".join(f"line_{j} = {j} * 2\n" for j in range(sizes.change_lines))})
    revs.append({"code/big.py": "".join(f"line_{j} = {j} * 3  # rewritten\n" for j in range(sizes.change_lines))})
    add_revisions(run, revs, step_s=8.0)
    add_transcript(run, claude_lines(sizes.steps))
    add_logs(run)
    block = ("2026-11-22T23:33:20.000Z [stderr] some training output line with numbers 0.12345\n" * 12_000)
    with (run / "logs" / "agent.log").open("a") as fh:
        for _ in range(max(1, sizes.log_bytes // len(block))):
            fh.write(block)
    (big / ".done").write_text("")
    print(f"built the big run in {time.perf_counter() - t:.1f} s")


async def until(pilot, predicate, timeout: float = 60.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError
        await pilot.pause(0.005)


async def measure_runs(many: Path, sizes: Sizes) -> None:
    """The Runs screen over ``sizes.runs`` runs: first rows, then all of them listed."""
    from agent2rl_tui.ui.screens.runs import RunsScreen

    t = time.perf_counter()
    app = Agent2RLApp(root=many, clock=lambda: T0 + 600)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.loaded)
        await pilot.pause(0)
        first = time.perf_counter() - t
        await until(pilot, lambda: app.screen.complete)
        await pilot.pause(0)
        print(f"Runs, {sizes.runs:,} runs: first paint with rows {first:.3f} s; all {sizes.runs:,} listed "
              f"{time.perf_counter() - t:.3f} s")
        rows = app.screen.query_one("#runs").row_count
        assert rows == sizes.runs, rows


async def measure_big(big: Path, sizes: Sizes) -> None:
    """The big run's screen, then its Logs, Revisions (and the big diff) and Transcript tabs."""
    from agent2rl_tui.ui.screens.run import RunScreen
    from agent2rl_tui.ui.widgets.diff_view import DiffView

    revisions = sizes.revisions + 1  # revisions - 1 small edits, then the big file's two versions
    t = time.perf_counter()
    app = Agent2RLApp(root=big, open_run=big / BIG_RUN, clock=lambda: T0 + 600)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunScreen)  # pushed once read, then composed
                    and any(t.row_count == sizes.submissions + 1 for t in app.screen.query("#subs")))
        await pilot.pause(0)
        print(f"Run, {sizes.revisions:,} revisions / {sizes.submissions:,} submissions / "
              f"{sizes.log_bytes / 2**30:.2f} GB log: first paint {time.perf_counter() - t:.3f} s")
        t = time.perf_counter()
        await pilot.press("4")
        log = app.screen.query_one("#log")
        await until(pilot, lambda: log.line_count > 0)
        await pilot.pause(0)
        print(f"  Logs tab on the {sizes.log_bytes / 2**30:.2f} GB agent log: {time.perf_counter() - t:.3f} s")
        t = time.perf_counter()
        await pilot.press("2")
        pane = app.screen.query_one("RevisionsPane")
        await until(pilot, lambda: len(pane.revisions) == revisions)
        await pilot.pause(0)
        print(f"  Revisions tab with {revisions:,} revisions: {time.perf_counter() - t:.3f} s")
        diff = app.screen.query_one(DiffView)
        pane.select(100)
        await until(pilot, lambda: diff.diff_title.endswith("→ 100"))
        t = time.perf_counter()
        pane.select(revisions)
        # side by side at this width: one row per line, each a removed line beside its rewrite
        await until(pilot, lambda: diff.diff_title.endswith(f"→ {revisions}") and diff.line_count >= sizes.change_lines)
        await pilot.pause(0)
        print(f"  diff of a {sizes.change_lines:,}-line change (git diff + first paint): {time.perf_counter() - t:.3f} s "
              f"({diff.line_count} rows)")
        t = time.perf_counter()
        await pilot.press("3")
        steps = app.screen.query_one("#steps")
        await until(pilot, lambda: steps.count == sizes.steps)
        await pilot.pause(0)
        await pilot.press("end")
        await pilot.pause(0)
        print(f"  Transcript tab, {sizes.steps:,} steps, to its end: {time.perf_counter() - t:.3f} s")


async def measure(many: Path, big: Path, sizes: Sizes) -> None:
    await measure_runs(many, sizes)
    await measure_big(big, sizes)


def run(base: Path, sizes: Sizes) -> None:
    many, big = base / "many", base / "big"
    build_many(many, sizes)
    build_big(big, sizes)
    asyncio.run(measure(many, big, sizes))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory (max RSS of this process): {peak:.0f} MB")


if __name__ == "__main__":
    if parse_args().quick:
        with tempfile.TemporaryDirectory(prefix="bench-tui-") as tmp:
            run(Path(tmp), QUICK)
    else:
        run(Path(os.environ.get("BENCH_DIR", "/tmp/agent2rl-bench-tui")), Sizes())
