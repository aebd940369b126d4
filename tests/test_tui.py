"""Pilot tests: keys through every screen and pane, on run folders made by the real pipeline.

The review root holds a copy of the example agent's run (made once per session through the
CLI) and a second copy whose supervisor is gone, so the same screens are tested on a
finished run and on a lost one, offline, with no supervisor anywhere.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from rich.console import Group
from rich.text import Text
from textual.widgets import DataTable, Input, Markdown, Static, TabbedContent

from agent2rl_tui.core.runs import summarize
from agent2rl_tui.core.store import RunStore
from agent2rl_tui.ui.app import Agent2RLApp
from agent2rl_tui.ui.screens.compare import CompareScreen
from agent2rl_tui.ui.screens.new_run import NewRunScreen
from agent2rl_tui.ui.screens.run import RunScreen
from agent2rl_tui.ui.screens.runs import RunsScreen
from agent2rl_tui.ui.widgets.diff_view import DiffView
from agent2rl_tui.ui.widgets.log_view import LogView
from agent2rl_tui.ui.panes.revisions import RevisionsPane
from agent2rl_tui.ui.widgets.steps_view import StepsView
from agent2rl_tui.ui.widgets.virtual_table import VirtualTable

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]
SIZE = (160, 48)


async def settle(pilot, predicate, timeout: float = 10.0, what: str = "the screen") -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.05)
        if predicate():
            return
    raise AssertionError(f"timed out waiting for {what}")


async def type_text(pilot, text: str) -> None:  # noqa: ANN001
    await pilot.press(*["space" if c == " " else c for c in text])


def plain(static: Static) -> str:
    """The text a Static shows (its content: a str, a rich Text or a Group of them)."""
    content = static.content
    if isinstance(content, Group):
        return "\n".join(r.plain if isinstance(r, Text) else str(r) for r in content.renderables)
    return content.plain if isinstance(content, Text) else str(content)


def table_rows(table: DataTable | VirtualTable) -> list[list[str]]:
    if isinstance(table, VirtualTable):
        return [table.row_cells(i) for i in range(table.row_count)]
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def open_runs(pilot) -> RunsScreen:  # noqa: ANN001
    await settle(pilot, lambda: isinstance(pilot.app.screen, RunsScreen) and pilot.app.screen.loaded,
                 what="the runs to load")
    return pilot.app.screen


async def test_runs_screen_lists_filters_sorts_marks_and_compares(review_root: Path) -> None:
    app = Agent2RLApp(root=review_root)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_runs(pilot)
        table = screen.query_one("#runs", VirtualTable)
        rows = table_rows(table)
        assert len(rows) == 2
        assert sorted(r[1] for r in rows) == ["finished", "lost"]
        assert all(r[2] == "arith" and r[3] == "example" and r[4] == "scripted" for r in rows)
        assert all(r[9] == "2" for r in rows)  # submissions
        # Typing on the table filters.
        await pilot.press("l", "o", "s", "t")
        await settle(pilot, lambda: table.row_count == 1, what="the filter")
        assert table_rows(table)[0][1] == "lost"
        assert isinstance(app.focused, Input)
        await pilot.press("escape")
        await settle(pilot, lambda: table.row_count == 2, what="the filter to clear")
        # Sorting: o moves to the next column, O reverses.
        before = screen.sort_column
        await pilot.press("o")
        assert screen.sort_column != before
        reverse = screen.sort_reverse
        await pilot.press("O")
        assert screen.sort_reverse is not reverse
        # Marking and comparing.
        table.focus()
        await pilot.press("home", "space")
        assert len(screen.marked) == 1
        await pilot.press("space")
        assert len(screen.marked) == 2
        await pilot.press("c")
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen), what="Compare")
        compare = table_rows(app.screen.query_one("#compare", DataTable))
        assert len(compare) == 1
        task, agent, driver, n, finished, best, improvement, subs = compare[0]
        assert (task, agent, driver, n, finished) == ("arith", "example", "scripted", "2", "1")
        assert best.endswith("± 0.00") and subs == "2.0"
        await pilot.press("escape")
        await settle(pilot, lambda: isinstance(app.screen, RunsScreen), what="back to Runs")


async def test_run_screen_panes_and_jumps(review_root: Path) -> None:
    app = Agent2RLApp(root=review_root)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_runs(pilot)
        table = screen.query_one("#runs", VirtualTable)
        finished_row = next(i for i, r in enumerate(table_rows(table)) if r[1] == "finished")
        table.move_to(finished_row)
        await pilot.press("enter")
        await settle(pilot, lambda: isinstance(app.screen, RunScreen), what="the Run screen")
        run: RunScreen = app.screen
        view = run.view
        assert view is not None and view.status == "finished"
        header = plain(run.query_one("#budget", Static))
        assert "best" in header and f"{view.best.score:.2f}" in header and "ended" in header

        # Scores: the baseline and both submissions, the items they solved.
        subs = run.query_one("#subs", VirtualTable)
        await settle(pilot, lambda: subs.row_count == 3, what="the submissions")
        assert [r[0] for r in table_rows(subs)] == ["baseline", "1", "2"]
        assert table_rows(subs)[1][-1] == "output/v1"
        await pilot.press("down")
        items = plain(run.query_one("#items-text", Static))
        assert "submission 1: scored" in items and "vs baseline: solved" in items
        await pilot.press("down")
        items = plain(run.query_one("#items-text", Static))
        assert "vs previous submission #1" in items

        # r: the revision submission 2 was made from.
        await pilot.press("r")
        await settle(pilot, lambda: run.query_one(TabbedContent).active == "revisions", what="Revisions")
        diff = run.query_one(DiffView)
        await settle(pilot, lambda: diff.line_count > 0, what="the diff")
        assert run.query_one(RevisionsPane).current_seq() == view.submissions[1].revision_seq
        text = "\n".join(diff.row_text(y) for y in range(diff.line_count))
        assert "train_config.json" in text and "grpo" in text

        # d from Scores: the diff since the previous submission.
        await pilot.press("1")
        await pilot.press("d")
        await settle(pilot, lambda: "revision" in (diff.diff_title or "") and "→" in diff.diff_title,
                     what="the submission diff")
        assert diff.diff_title == f"revision {view.submissions[0].revision_seq} → {view.submissions[1].revision_seq}"

        # m marks a base; another revision is then diffed against it.
        await pilot.press("2", "home", "m", "end")
        await settle(pilot, lambda: diff.diff_title.startswith("revision 1 →"), what="diff against the mark")
        await pilot.press("v")  # layout toggle works from the keyboard
        assert diff.is_side_by_side

        # Transcript: filter by kind, search, details, jump from a submission.
        await pilot.press("3")
        steps = run.query_one(StepsView)
        await settle(pilot, lambda: steps.count > 0, what="the transcript")
        total = steps.count
        await pilot.press("k")
        assert 0 < steps.count < total  # messages only
        await pilot.press("slash")
        assert isinstance(app.focused, Input)
        await type_text(pilot, "submission v2")
        await pilot.press("enter")
        await settle(pilot, lambda: steps.count >= 1, what="search results")
        await pilot.press("enter")
        detail = plain(run.query_one("#step-text", Static))
        assert "submission v2" in detail
        await pilot.press("1", "end", "t")
        await settle(pilot, lambda: run.query_one(TabbedContent).active == "transcript", what="jump to transcript")
        at = view.submissions[-1].received_at
        step = steps.current()
        assert step is not None and step.at <= at + 1

        # Logs: agent by default, then grader and supervisor.
        await pilot.press("4")
        log = run.query_one(LogView)
        await settle(pilot, lambda: log.line_count > 0, what="the agent log")
        assert any("submission v2" in log.row_text(y) for y in range(log.line_count))
        await pilot.press("g")
        await settle(pilot, lambda: log.path.name == "grader.log" and log.line_count > 0, what="the grader log")
        await pilot.press("u")
        await settle(pilot, lambda: log.path.name == "supervisor.log", what="the supervisor log")

        # Report.
        await pilot.press("5")
        md = run.query_one("#report-md", Markdown)
        await settle(pilot, lambda: "valid_submission_rate" in md.source, what="the report")
        assert f"# Run {view.run['id']}" in md.source and "## Code revisions" in md.source
        assert "## The agent's prompt" in md.source and "You are an ML engineer" in md.source
        # Stopping a finished run says so instead of asking.
        await pilot.press("s")
        assert isinstance(app.screen, RunScreen)
        await pilot.press("escape")
        await settle(pilot, lambda: isinstance(app.screen, RunsScreen), what="back to Runs")


async def test_a_lost_run_is_shown_lost_and_can_be_closed(review_root: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    lost_src = next(p for p in review_root.iterdir() if p.name.endswith("-lost"))
    shutil.copytree(lost_src, root / lost_src.name)
    app = Agent2RLApp(root=root)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_runs(pilot)
        assert table_rows(screen.query_one("#runs", VirtualTable))[0][1] == "lost"
        await pilot.press("enter")
        await settle(pilot, lambda: isinstance(app.screen, RunScreen), what="the Run screen")
        assert "lost" in plain(app.screen.query_one("#budget", Static))
        await pilot.press("escape", "s")
        await pilot.press("y")
        await settle(pilot, lambda: summarize(root / lost_src.name).status == "lost"
                     and (root / lost_src.name / "report" / "report.json").exists(), what="the reconcile")
    with RunStore.of_run(root / lost_src.name) as store:
        assert store.run()["status"] == "lost"  # written now, not only inferred
    report = json.loads((root / lost_src.name / "report" / "report.json").read_text())
    assert report["status"] == "lost"


async def test_keys_help_and_command_palette(review_root: Path) -> None:
    app = Agent2RLApp(root=review_root)
    async with app.run_test(size=SIZE) as pilot:
        await open_runs(pilot)
        await pilot.press("question_mark")
        await settle(pilot, lambda: bool(app.screen.query("HelpPanel")), what="the keys panel")
        await pilot.press("question_mark")
        await settle(pilot, lambda: not app.screen.query("HelpPanel"), what="the keys panel to close")
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for action in ("New run", "Stop", "Mark", "Compare", "Sort", "Filter", "Open"):
            assert action in titles
        await pilot.press("ctrl+p")
        await settle(pilot, lambda: app.screen.__class__.__name__ == "CommandPalette", what="the palette")
        await type_text(pilot, "New run")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await settle(pilot, lambda: isinstance(app.screen, NewRunScreen), what="New run from the palette")


async def test_new_run_validates_in_place_then_starts_a_live_run(tmp_path: Path, tiny_model: Path) -> None:
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
        await settle(pilot, lambda: isinstance(app.screen, RunScreen), timeout=30, what="the new run's screen")
        run_dir = app.screen.run_dir
        await settle(pilot, lambda: app.screen.view.status in ("running", "finished"), timeout=60,
                     what="the live run to start")
        await settle(pilot, lambda: app.screen.view.status == "finished", timeout=60, what="the run to finish")
        assert "ended" in plain(app.screen.query_one("#budget", Static))
    assert summarize(run_dir).status == "finished"


async def test_open_a_single_run_folder(review_root: Path) -> None:
    run_dir = next(p for p in review_root.iterdir() if not p.name.endswith("-lost"))
    app = Agent2RLApp(root=review_root, open_run=run_dir)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, lambda: isinstance(app.screen, RunScreen), what="the Run screen")
        assert app.screen.run_dir == run_dir.resolve()
        await pilot.press("escape")
        await settle(pilot, lambda: isinstance(app.screen, RunsScreen), what="Runs")

