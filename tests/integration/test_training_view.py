"""The example agent's real run in the TUI (issue 43, 1 and 3): its SFT loss and GRPO reward as curves,
the submissions marked, and the machine's CPU over the run, in the Run screen's Training pane."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.tui import plain, settle
from textual.widgets import Static

from agent2rl_tui.ui.app import Agent2RLApp
from agent2rl_tui.ui.panes.training import TrainingPane
from agent2rl_tui.ui.screens.run import RunScreen


@pytest.mark.asyncio
async def test_the_training_pane_draws_the_example_agents_curves_and_vitals(example_run: tuple[Path, str],
                                                                             tmp_path: Path) -> None:
    run_dir = tmp_path / example_run[0].name
    shutil.copytree(example_run[0], run_dir)
    app = Agent2RLApp(root=tmp_path, open_run=run_dir)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.ready, what="the Run screen")
        await pilot.press("7")
        pane = app.screen.query_one(TrainingPane)
        await settle(pilot, lambda: pane.curves is not None, what="the training logs to be read")
        assert {"loss", "reward"} <= set(pane.names) and pane.curves.skipped == 0
        title = plain(pane.query_one("#training-title", Static))
        assert title.startswith(f"{pane.names[0]} (1 of {len(pane.names)}: ") and "m: next" in title
        assert len(pane.submissions) == 2  # SFT's and GRPO's, marked on every curve
        assert pane.vitals is not None and pane.vitals.cpu_pct  # the machine over the run
        await pilot.press("m")
        assert plain(pane.query_one("#training-title", Static)).startswith(f"{pane.names[1]} (2 of ")
