"""Snapshot tests of the main screens (pytest-textual-snapshot), on fixed synthetic runs.

The runs are written through the project's own store with fixed times, into a fixed folder,
and the app gets a frozen clock, so a screen is the same on every machine. After a deliberate
change of the UI, review the new pictures and accept them with ``pytest --snapshot-update``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.synthetic import T0, add_logs, make_run, standard_run

from agent2rl_tui.ui.app import Agent2RLApp

ROOT = Path("/tmp/agent2rl-tui-snapshots")
SIZE = (140, 40)


@pytest.fixture(scope="module")
def snapshot_root() -> Path:
    shutil.rmtree(ROOT, ignore_errors=True)
    ROOT.mkdir(parents=True)
    standard_run(ROOT)
    failed = make_run(ROOT, "20261122T203320-arith-command", status="failed", agent="command", driver=None,
                      t0=T0 - 3 * 3600, scores=(), baseline=3.0)
    add_logs(failed, T0 - 3 * 3600)
    make_run(ROOT, "20261122T223320-arith-claude-code", status="lost", agent="claude-code",
             driver="claude-sonnet-4-5", t0=T0 - 3600, scores=(10.0, 5.0, 25.0), heartbeat=T0 - 3000)
    return ROOT


def app_for(root: Path, open_run: str | None = None) -> Agent2RLApp:
    return Agent2RLApp(root=root, open_run=root / open_run if open_run else None, clock=lambda: T0 + 400,
                       refresh_s=3600)


def test_runs_screen(snap_compare, snapshot_root: Path) -> None:
    assert snap_compare(app_for(snapshot_root), terminal_size=SIZE, press=["_", "_"])


def test_run_screen_scores(snap_compare, snapshot_root: Path) -> None:
    assert snap_compare(app_for(snapshot_root, "20261122T233320-arith-example"), terminal_size=SIZE,
                        run_before=run_screen_up, press=["_", "down", "down", "_"])


def test_run_screen_revisions(snap_compare, snapshot_root: Path) -> None:
    assert snap_compare(app_for(snapshot_root, "20261122T233320-arith-example"), terminal_size=SIZE,
                        run_before=run_screen_up, press=["2", "_", "_"])


async def until(pilot, ready, what: str) -> None:  # noqa: ANN001
    """Pause until ``ready()``: the panes read the record in workers, which a busy machine slows."""
    for _ in range(600):
        await pilot.pause(0.05)
        if ready():
            return
    raise AssertionError(f"waited 30 s for {what}")


async def run_screen_up(pilot) -> None:  # noqa: ANN001
    """Until the Run screen is up: a key pressed before it is lost (a busy machine slows it)."""
    from agent2rl_tui.ui.screens.run import RunScreen

    await until(pilot, lambda: isinstance(pilot.app.screen, RunScreen) and pilot.app.screen.ready, "the Run screen")


async def open_a_step(pilot) -> None:  # noqa: ANN001
    """The Transcript pane (3), its second step opened whole (down, enter), every worker done."""
    from textual.widgets import Static, TabbedContent

    from agent2rl_tui.ui.widgets.steps_view import StepsView

    await run_screen_up(pilot)  # a key pressed before the screen is mounted is lost
    await pilot.press("3")
    await until(pilot, lambda: pilot.app.screen.query_one(TabbedContent).active == "transcript", "the Transcript pane")
    await until(pilot, lambda: bool(pilot.app.screen.query(StepsView)) and
                pilot.app.screen.query_one(StepsView).listed >= 0 and pilot.app.screen.query_one(StepsView).row_count > 1,
                "the transcript's steps")
    # The pane focuses its list once shown: keys pressed before that go to the pane left behind.
    await until(pilot, lambda: pilot.app.screen.query_one(StepsView).has_focus, "the steps list to take the focus")
    await pilot.press("down", "enter")
    await until(pilot, lambda: "enter on a step" not in str(pilot.app.screen.query_one("#step-text", Static).render()),
                "the step's text")
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def test_run_screen_transcript(snap_compare, snapshot_root: Path) -> None:
    assert snap_compare(app_for(snapshot_root, "20261122T233320-arith-example"), terminal_size=SIZE,
                        run_before=open_a_step)


def test_new_run_screen(snap_compare, snapshot_root: Path) -> None:
    assert snap_compare(app_for(snapshot_root), terminal_size=SIZE, press=["_", "n", "_"])
