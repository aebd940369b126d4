"""The New run form validates in place, then starts a live run that the Run screen follows to its end.

The one Pilot story of the TUI that starts a real run (the rest, on synthetic run folders, are in
unit/test_tui.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.tui import SIZE, open_runs, plain, run_screen_ready, settle
from textual.widgets import Input, Static

from agent2rl_tui.review.index import summarize
from agent2rl_tui.ui.app import Agent2RLApp
from agent2rl_tui.ui.screens.new_run import NewRunScreen

pytestmark = pytest.mark.asyncio


@pytest.mark.slow
async def test_new_run_validates_in_place_then_starts_a_live_run(tmp_path: Path, tiny_model: Path,
                                                                 scripted_grading: None) -> None:
    """The run is graded by the scripted eval worker: the form and the screen that follows it are tested."""
    root = tmp_path / "runs"
    root.mkdir()
    app = Agent2RLApp(root=root)
    async with app.run_test(size=SIZE) as pilot:
        await open_runs(pilot)
        await pilot.press("n")
        await settle(pilot, lambda: isinstance(app.screen, NewRunScreen), what="New run")
        form: NewRunScreen = app.screen
        form.query_one("#model", Input).value = str(tiny_model)
        form.query_one("#budget", Input).value = "soon"
        await pilot.press("ctrl+s")
        error = form.query_one("#new-run-error", Static)
        assert "cannot read the duration" in plain(error)
        form.query_one("#budget", Input).value = "1m"
        form.query_one("#agent").value = "command"
        await pilot.press("ctrl+s")
        await settle(pilot, lambda: "needs --command" in plain(error), what="the pre-flight error")
        assert not any(root.iterdir())  # nothing half-made
        form.query_one("#command", Input).value = "sleep 2; echo done"
        await pilot.press("ctrl+s")
        await settle(pilot, lambda: run_screen_ready(app), timeout=30, what="the new run's screen")
        run_dir = app.screen.run_dir
        await settle(pilot, lambda: app.screen.view.status in ("running", "finished"), timeout=60,
                     what="the live run to start")
        await settle(pilot, lambda: app.screen.view.status == "finished", timeout=60, what="the run to finish")
        assert "ended" in plain(app.screen.query_one("#budget", Static))
    assert (summarize(run_dir).status, summarize(run_dir).baseline) == ("finished", 10.0)
