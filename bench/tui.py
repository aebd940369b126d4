"""Benchmark: the TUI on big records (figures printed, nothing asserted).

Synthetic run folders are built through the project's own store (tests/synthetic.py):
1,000 runs; and one run with 5,000 revisions, 1,000 submissions, a 20,000-step transcript
and a 1 GB agent log. Then, headless: time to first paint of Runs (rows on screen), of
the big Run, of a diff of a 2,000-line change, and the process's peak memory.
Goals: 1 s, 0.5 s, 0.2 s, 300 MB.

Run: ``python bench/tui.py`` (builds the folders in /tmp once; a few minutes the first time).
"""

from __future__ import annotations

import asyncio
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from synthetic import T0, add_logs, add_revisions, add_transcript, claude_lines, make_run  # noqa: E402

from agent2rl_tui.ui.app import Agent2RLApp  # noqa: E402

BASE = Path(os.environ.get("BENCH_DIR", "/tmp/agent2rl-bench-tui"))
MANY, BIG = BASE / "many", BASE / "big"
BIG_RUN = "20261122T233320-arith-claude-code"


def build() -> None:
    if not (MANY / ".done").exists():
        MANY.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        for i in range(1000):
            make_run(MANY, f"2026{i:04d}T000000-arith-agent{i % 7}", agent=f"agent{i % 7}", t0=T0 - i * 3600,
                     scores=(10.0 + i % 50, 20.0 + i % 60), n_items=10)
        (MANY / ".done").write_text("")
        print(f"built 1,000 runs in {time.perf_counter() - t:.1f} s")
    if not (BIG / ".done").exists():
        BIG.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        run = make_run(BIG, BIG_RUN, agent="claude-code", budget_s=12 * 3600,
                       scores=tuple(float(i % 100) for i in range(1000)), n_items=50)
        revs = [{f"code/mod{i % 50}.py": f"VALUE = {i}\n" * (1 + i % 5)} for i in range(4999)]
        revs.append({"code/big.py": "".join(f"line_{j} = {j} * 2\n" for j in range(2000))})
        revs.append({"code/big.py": "".join(f"line_{j} = {j} * 3  # rewritten\n" for j in range(2000))})
        add_revisions(run, revs, step_s=8.0)
        add_transcript(run, claude_lines(20_000))
        add_logs(run)
        block = ("2026-11-22T23:33:20.000Z [stderr] some training output line with numbers 0.12345\n" * 12_000)
        with (run / "logs" / "agent.log").open("a") as fh:
            for _ in range(1024 * 1024 * 1024 // len(block)):
                fh.write(block)
        (BIG / ".done").write_text("")
        print(f"built the big run in {time.perf_counter() - t:.1f} s")


async def until(pilot, predicate, timeout: float = 60.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError
        await pilot.pause(0.005)


async def measure() -> None:
    from agent2rl_tui.ui.screens.run import RunScreen
    from agent2rl_tui.ui.screens.runs import RunsScreen
    from agent2rl_tui.ui.widgets.diff_view import DiffView

    t = time.perf_counter()
    app = Agent2RLApp(root=MANY, clock=lambda: T0 + 600)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.loaded)
        await pilot.pause(0)
        first = time.perf_counter() - t
        await until(pilot, lambda: app.screen.complete)
        await pilot.pause(0)
        print(f"Runs, 1,000 runs: first paint with rows {first:.3f} s; all 1,000 listed {time.perf_counter() - t:.3f} s")
        rows = app.screen.query_one("#runs").row_count
        assert rows == 1000

    t = time.perf_counter()
    app = Agent2RLApp(root=BIG, open_run=BIG / BIG_RUN, clock=lambda: T0 + 600)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunScreen)  # pushed once read, then composed
                    and any(t.row_count == 1001 for t in app.screen.query("#subs")))
        await pilot.pause(0)
        print(f"Run, 5,000 revisions / 1,000 submissions / 1 GB log: first paint {time.perf_counter() - t:.3f} s")
        t = time.perf_counter()
        await pilot.press("4")
        log = app.screen.query_one("#log")
        await until(pilot, lambda: log.line_count > 0)
        await pilot.pause(0)
        print(f"  Logs tab on the 1 GB agent log: {time.perf_counter() - t:.3f} s")
        t = time.perf_counter()
        await pilot.press("2")
        pane = app.screen.query_one("RevisionsPane")
        await until(pilot, lambda: len(pane.revisions) == 5001)
        await pilot.pause(0)
        print(f"  Revisions tab with 5,001 revisions: {time.perf_counter() - t:.3f} s")
        diff = app.screen.query_one(DiffView)
        pane.select(100)
        await until(pilot, lambda: diff.diff_title.endswith("→ 100"))
        t = time.perf_counter()
        pane.select(5001)
        # side by side at this width: 2,000 rows, each a removed line beside its rewrite
        await until(pilot, lambda: diff.diff_title.endswith("→ 5001") and diff.line_count >= 2000)
        await pilot.pause(0)
        print(f"  diff of a 2,000-line change (git diff + first paint): {time.perf_counter() - t:.3f} s "
              f"({diff.line_count} rows)")
        t = time.perf_counter()
        await pilot.press("3")
        steps = app.screen.query_one("#steps")
        await until(pilot, lambda: steps.count == 20_000)
        await pilot.pause(0)
        await pilot.press("end")
        await pilot.pause(0)
        print(f"  Transcript tab, 20,000 steps, to its end: {time.perf_counter() - t:.3f} s")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory (max RSS of this process): {peak:.0f} MB")


if __name__ == "__main__":
    build()
    asyncio.run(measure())
