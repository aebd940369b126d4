"""Pilot tests: keys through every screen and pane, on run folders written by the project's own code.

The review root (conftest) holds a run shaped as the example agent's, built by
``synthetic.example_agent_run`` through the store, the revision store, the transcript
recorder and the report, without training anything, and a second copy whose supervisor is
gone, so the same screens are tested on a finished run and on a lost one, offline, with no
supervisor anywhere. Rows are picked by what they hold (a run by its id, a submission by its
number), never by their place. The New run story that starts a live run is in
integration/test_tui_live_run.py.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from support.synthetic import T0, add_revisions, add_transcript, claude_lines, make_run
from support.tui import (
    SIZE,
    footer_keys,
    open_runs,
    palette_titles,
    plain,
    review_runs,
    row_of,
    run_screen_ready,
    settle,
    table_rows,
    type_text,
)
from textual.binding import Binding
from textual.widgets import DataTable, Input, Markdown, Static, TabbedContent

from agent2rl_tui.record.store import RunStore
from agent2rl_tui.review.index import LOST_AFTER_S, summarize
from agent2rl_tui.ui.app import Agent2RLApp
from agent2rl_tui.ui.panes.logs import LogsPane
from agent2rl_tui.ui.panes.revisions import RevisionsPane
from agent2rl_tui.ui.panes.scores import ScoresPane
from agent2rl_tui.ui.panes.transcript import TranscriptPane
from agent2rl_tui.ui.screens.compare import CompareScreen
from agent2rl_tui.ui.screens.confirm import ConfirmScreen
from agent2rl_tui.ui.screens.items import ItemsScreen
from agent2rl_tui.ui.screens.new_run import NewRunScreen
from agent2rl_tui.ui.screens.run import RunScreen
from agent2rl_tui.ui.screens.runs import RunsScreen
from agent2rl_tui.ui.widgets.budget import BudgetHeader
from agent2rl_tui.ui.widgets.diff_view import SIDE_BY_SIDE_MIN_WIDTH, DiffView
from agent2rl_tui.ui.widgets.log_view import LogView
from agent2rl_tui.ui.widgets.steps_view import StepsView
from agent2rl_tui.ui.widgets.virtual_table import VirtualTable
from agent2rl_tui.util.timeutil import human_duration

pytestmark = pytest.mark.asyncio
async def test_runs_screen_lists_filters_sorts_marks_and_compares(review_root: Path) -> None:
    finished_id, lost_id = review_runs(review_root)
    app = Agent2RLApp(root=review_root)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_runs(pilot)
        table = screen.query_one("#runs", VirtualTable)
        rows = table_rows(table)
        assert len(rows) == 2
        assert sorted((r[-1], r[1]) for r in rows) == [(finished_id, "finished"), (lost_id, "lost")]
        assert all(r[2] == "arith" and r[3] == "example" and r[4] == "scripted" for r in rows)
        assert all(r[9] == "2" for r in rows)  # submissions
        # One rule for keys (issue 41, 7): on the table letters are actions and / opens the
        # filter; a letter that is no action filters nothing and says to press /.
        await pilot.press("l")
        await settle(pilot, lambda: any("press / to filter" in n.message for n in app._notifications),
                     what="the hint to press /")
        assert screen.filter_text == "" and app.focused is table and table.row_count == 2
        # In the filter every letter is text, action keys (o, s, r, n, c, g) included.
        await pilot.press("slash", "l", "o", "s", "t")
        await settle(pilot, lambda: table.row_count == 1, what="the filter")
        assert screen.filter_text == "lost"
        assert [(r[-1], r[1]) for r in table_rows(table)] == [(lost_id, "lost")]
        assert isinstance(app.focused, Input)
        await pilot.press("escape")
        await settle(pilot, lambda: table.row_count == 2, what="the filter to clear")
        assert screen.filter_text == "" and app.focused is table
        for word, rows in (("arith", 2), ("finished", 1), ("stopped", 0), ("codex", 0), ("gsm", 0),
                           ("running", 0), ("none", 0), ("reload", 0)):
            await pilot.press("slash")
            await type_text(pilot, word)
            assert isinstance(app.screen, RunsScreen), f"typing {word!r} left Runs"
            assert screen.filter_text == word and len(screen.shown) == rows
            await pilot.press("escape")
            assert screen.filter_text == "" and table.row_count == 2
        # enter opens the highlighted run (issue 41, 7); back on Runs the filter is still on, and the
        # table has the focus, where keys act again.
        await pilot.press("slash")
        await type_text(pilot, "lost")
        await pilot.press("enter")
        await settle(pilot, lambda: run_screen_ready(app), what="the filtered run to open")
        assert app.screen.view.run.id == lost_id
        await pilot.press("escape")
        await settle(pilot, lambda: app.screen is screen, what="back to Runs")
        assert app.focused is table and table.row_count == 1
        await pilot.press("escape")
        assert table.row_count == 2
        # Sorting: o moves to the next column, O reverses; the rows really move.
        screen.sort_column, screen.sort_reverse = "id", False
        screen.populate()
        ids = [r[-1] for r in table_rows(table)]
        assert ids == [finished_id, lost_id]
        await pilot.press("O")
        assert screen.sort_reverse is True
        assert [r[-1] for r in table_rows(table)] == ids[::-1]
        await pilot.press("o")  # id -> the first sortable column: status, still descending
        assert screen.sort_column == "status"
        assert [r[1] for r in table_rows(table)] == ["lost", "finished"]
        await pilot.press("O")
        assert [r[1] for r in table_rows(table)] == ["finished", "lost"]
        await pilot.press("o")
        assert screen.sort_column == "task"
        # Marking and comparing: space marks the highlighted run and moves on to the next row.
        table.focus()
        table.move_to(row_of(table, finished_id))
        await pilot.press("space")
        assert screen.marked == {finished_id}
        assert table.cursor == min(row_of(table, finished_id) + 1, table.row_count - 1)
        table.move_to(row_of(table, lost_id))
        await pilot.press("space")
        assert screen.marked == {finished_id, lost_id}
        await pilot.press("c")
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen), what="Compare")
        compare = table_rows(app.screen.query_one("#compare", DataTable))
        assert len(compare) == 1
        task, profile, agent, driver, base, mode, n, valid, best, improvement, ci, best3, subs, *usage = compare[0]
        assert (task, profile, agent, driver, mode, n, valid) == ("arith", "default", "example", "scripted",
                                                                  "mode free", "2", "2 of 2 valid")
        assert base.startswith("tiny-llama (weights ")  # the base model told apart by its weights
        assert len(usage) == 3  # tokens / run, cost / run, and where they come from (review.run_usage)
        assert best.endswith("± 0.00") and subs == "2.0"
        assert ci == "too few runs for an interval" and best3 == "-"  # two runs: no interval, no best of 3
        # Graded on the same items, the two runs are paired best against best: the same model, no difference.
        paired = app.screen.query_one("#paired", Static)
        await settle(pilot, lambda: "paired on the same eval items" in plain(paired), what="the paired comparison")
        assert "+0.00 points [+0.00, +0.00] within noise (100 items, McNemar p = 1.0000)" in plain(paired)
        await pilot.press("escape")
        await settle(pilot, lambda: isinstance(app.screen, RunsScreen), what="back to Runs")


async def test_compare_says_when_a_run_folder_cannot_be_read(review_root: Path, tmp_path: Path) -> None:
    finished_id, lost_id = review_runs(review_root)
    runs = [summarize(review_root / finished_id), summarize(review_root / lost_id)]
    copy = tmp_path / lost_id
    shutil.copytree(review_root / lost_id, copy)
    runs[1] = summarize(copy)
    (copy / "run.db").unlink()  # listed, then gone: a run folder moved or half copied
    app = Agent2RLApp(root=review_root)
    async with app.run_test(size=SIZE) as pilot:
        await open_runs(pilot)
        app.push_screen(CompareScreen(runs))
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen), what="Compare")
        await settle(pilot, lambda: any("could not" in str(n.message) for n in app._notifications),
                     what="the failed read said")
        said = [str(n.message) for n in app._notifications]
        assert any("could not read the runs' submissions" in m and "run.db" in m for m in said), said
        await pilot.press("escape")  # the screen still answers
        await settle(pilot, lambda: isinstance(app.screen, RunsScreen), what="back to Runs")


async def test_run_screen_panes_and_jumps(review_root: Path) -> None:
    finished_id, _ = review_runs(review_root)
    app = Agent2RLApp(root=review_root)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_runs(pilot)
        table = screen.query_one("#runs", VirtualTable)
        table.move_to(row_of(table, finished_id))
        await pilot.press("enter")
        await settle(pilot, lambda: run_screen_ready(app), what="the Run screen")
        run: RunScreen = app.screen
        view = run.view
        assert view is not None and view.status == "finished" and view.run.id == finished_id
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
        # With how far the change is from noise: the report's paired comparison, the same numbers.
        paired = json.loads((view.path / "report" / "report.json").read_text())["submissions"][1]["significance"]
        for key in ("vs_previous_best", "vs_baseline"):
            c = paired[key]
            assert f"{c['diff']:+.2f} points [{c['ci95'][0]:+.2f}, {c['ci95'][1]:+.2f}] {c['label']}" in items

        # i: every item of submission 2, from its own evals/2/results.jsonl.
        def results(sub_id: int) -> list[dict]:
            path = view.path / "evals" / str(sub_id) / "results.jsonl"
            return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

        mine, before = results(2), {i["index"]: i["correct"] for i in results(1)}
        await pilot.press("i")
        await settle(pilot, lambda: isinstance(app.screen, ItemsScreen), what="the items of submission 2")
        items_screen = app.screen
        itable = items_screen.query_one("#items-table", VirtualTable)
        rows = table_rows(itable)
        assert len(rows) == len(mine) > 0
        for row, item in zip(rows, mine):
            index, ok, vs_prev, _vs_base, extracted, gold, _prompt = row
            assert index == str(item["index"]) and ok == ("✓" if item["correct"] else "✗")
            assert extracted == str(item["extracted"]) and gold == str(item["gold"])
            was = before[item["index"]]
            assert vs_prev == ("solved" if item["correct"] and not was else "broke" if was and not item["correct"]
                               else "")
        assert f"{sum(i['correct'] for i in mine)} of {len(mine)} items correct" in plain(
            items_screen.query_one("#items-title", Static))
        await pilot.press("end")
        detail = plain(items_screen.query_one("#item-text", Static))
        assert f"item {mine[-1]['index']}" in detail and str(mine[-1]["prompt"]) in detail
        await pilot.press("f")  # wrong ones only
        assert [r[0] for r in table_rows(itable)] == [str(i["index"]) for i in mine if not i["correct"]]
        await pilot.press("f", "f")  # changed since submission 1
        assert [r[0] for r in table_rows(itable)] == [str(i["index"]) for i in mine
                                                      if bool(i["correct"]) != bool(before[i["index"]])]
        await pilot.press("escape")
        await settle(pilot, lambda: app.screen is run, what="back to the Run screen")

        # r: the revision submission 2 was made from.
        await pilot.press("r")
        await settle(pilot, lambda: run.query_one(TabbedContent).active == "revisions", what="Revisions")
        diff = run.query_one(DiffView)
        await settle(pilot, lambda: diff.line_count > 0, what="the diff")
        assert run.query_one(RevisionsPane).current_seq() == view.submissions[1].revision_seq
        text = "\n".join(diff.row_text(y) for y in range(diff.line_count))
        assert "code/grpo.py" in text and "code/reward.py" in text  # the GRPO stage's new code

        # d from Scores: the diff since the previous submission.
        await pilot.press("1")
        await pilot.press("d")
        await settle(pilot, lambda: "revision" in (diff.diff_title or "") and "→" in diff.diff_title,
                     what="the submission diff")
        assert diff.diff_title == f"revision {view.submissions[0].revision_seq} → {view.submissions[1].revision_seq}"

        # m marks a base; another revision is then diffed against it.
        await pilot.press("2", "home", "m", "end")
        await settle(pilot, lambda: diff.diff_title.startswith("revision 1 →"), what="diff against the mark")
        # 160 columns: the diff beside the revision list is wide enough for side by side.
        assert diff.side_by_side is None and diff.size.width >= SIDE_BY_SIDE_MIN_WIDTH
        assert diff.is_side_by_side
        changed = [y for y in range(diff.line_count) if "exact_match_reward" in diff.row_text(y)]  # code lines
        assert changed and all(len(diff.row_text(y).split("│")) == 2 for y in changed)
        await pilot.press("v")  # layout toggle works from the keyboard
        assert not diff.is_side_by_side
        assert all("│" not in diff.row_text(y) for y in range(diff.line_count))
        await pilot.press("v")
        assert diff.is_side_by_side
        # A narrower terminal: the diff falls back to unified by itself.
        diff.side_by_side = None
        await pilot.resize_terminal(120, 48)
        await settle(pilot, lambda: not diff.is_side_by_side, what="unified when narrow")
        assert diff.size.width < SIDE_BY_SIDE_MIN_WIDTH
        assert all("│" not in diff.row_text(y) for y in range(diff.line_count))
        await pilot.resize_terminal(*SIZE)
        await settle(pilot, lambda: diff.is_side_by_side, what="side by side again")

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
        # escape first clears the search (the footer says so), and the Run screen stays.
        await settle(pilot, lambda: footer_keys(run).get("escape") == "Clear search", what="Clear search shown")
        searched = steps.count
        await pilot.press("escape")
        assert isinstance(app.screen, RunScreen) and run.query_one(TranscriptPane).query_text == ""
        await settle(pilot, lambda: steps.count > searched, what="the search to clear")
        await settle(pilot, lambda: footer_keys(run).get("escape") == "Runs", what="escape back to Runs shown")
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
        assert f"# Run {view.run.id}" in md.source and "## Code revisions" in md.source
        assert "## The agent's prompt" in md.source and "You are an ML engineer" in md.source
        # Containment and the contamination check, as a reviewer must see them.
        # arith's items are too short to look for (issue 43, 4): not checked, never "clean (0 ... checked)".
        assert "- containment: " in md.source and "- contamination check: not checked (no checkable" in md.source
        # Iterations: the route, one row per submission, the highlighted one's findings, a jump to its diff.
        await pilot.press("6")
        iters = run.query_one("#iters", VirtualTable)
        await settle(pilot, lambda: iters.row_count == 2, what="the iterations")
        assert plain(run.query_one("#route", Static)) == "route: SFT → GRPO"
        await pilot.press("end")
        detail = plain(run.query_one("#iter-detail", Static))
        assert "iteration 2: submission 2, GRPO, success" in detail and "lr = 0.0005   (code/grpo.py:" in detail
        await pilot.press("d")
        await settle(pilot, lambda: run.query_one(TabbedContent).active == "revisions", what="the diff of iteration 2")
        await pilot.press("6")
        # Stopping a finished run says so instead of asking.
        await pilot.press("s")
        assert isinstance(app.screen, RunScreen)
        await pilot.press("escape")
        await settle(pilot, lambda: isinstance(app.screen, RunsScreen), what="back to Runs")


async def test_the_runs_list_flags_runs_not_contained_or_contaminated(tmp_path: Path) -> None:
    """A reviewer sees at a glance which runs were not contained and which may have seen eval items."""
    contained = {"contained": True, "reason": "bubblewrap (/usr/bin/bwrap)"}
    cases = {"clean": (contained, False), "uncontained": ({"contained": False, "reason": "--no-contain"}, False),
             "leaky": (contained, True)}
    for name, (containment, contaminated) in cases.items():
        run = make_run(tmp_path, name)
        with RunStore.of_run(run) as store:
            store.event("supervisor", "containment", "…", containment)
            store.event("supervisor", "contamination", "…", {"contaminated": contaminated})
    app = Agent2RLApp(root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_runs(pilot)
        flags = {r[-1]: r[-2] for r in table_rows(screen.query_one("#runs", VirtualTable))}
    assert flags == {"clean": "", "uncontained": "not contained", "leaky": "contaminated?"}


def report_status(run_dir: Path) -> str | None:
    """The status report.json holds (None while it is missing or half written)."""
    try:
        return json.loads((run_dir / "report" / "report.json").read_text())["status"]
    except (OSError, ValueError, KeyError):
        return None


async def test_a_lost_run_is_shown_lost_and_can_be_closed(review_root: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    lost_src = next(p for p in review_root.iterdir() if p.name.endswith("-lost"))
    shutil.copytree(lost_src, root / lost_src.name)
    app = Agent2RLApp(root=root)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_runs(pilot)
        table = screen.query_one("#runs", VirtualTable)
        row = row_of(table, lost_src.name)
        assert table_rows(table)[row][1] == "lost"
        table.move_to(row)
        await pilot.press("enter")
        await settle(pilot, lambda: run_screen_ready(app), what="the Run screen")
        assert "lost" in plain(app.screen.query_one("#budget", Static))
        await pilot.press("escape", "s")
        await pilot.press("y")
        # The copy holds the finished run's report.json: wait for the one the reconcile writes.
        await settle(pilot, lambda: summarize(root / lost_src.name).status == "lost"
                     and report_status(root / lost_src.name) == "lost", what="the reconcile")
    with RunStore.of_run(root / lost_src.name) as store:
        assert store.run().status == "lost"  # written now, not only inferred
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


async def test_open_a_single_run_folder(review_root: Path) -> None:
    run_dir = next(p for p in review_root.iterdir() if not p.name.endswith("-lost"))
    app = Agent2RLApp(root=review_root, open_run=run_dir)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, lambda: run_screen_ready(app), what="the Run screen")
        assert app.screen.run_dir == run_dir.resolve()
        await pilot.press("escape")
        await settle(pilot, lambda: isinstance(app.screen, RunsScreen), what="Runs")


async def test_a_folder_that_cannot_be_read_leaves_the_runs_screen_and_says_why(tmp_path: Path) -> None:
    broken = tmp_path / "20261122T233321-arith-broken"
    broken.mkdir()
    (broken / "run.db").write_bytes(b"this is not a database" * 100)
    app = Agent2RLApp(root=tmp_path, open_run=broken)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, lambda: isinstance(app.screen, RunsScreen) and bool(app._notifications),
                     what="Runs with a notice")
        notices = [n.message for n in app._notifications]
        assert any(f"cannot open {broken}" in m for m in notices), notices



async def test_every_action_key_is_in_the_footer_and_the_palette_once(review_root: Path) -> None:
    # Every binding of our screens and panes is shown, or is another key for a shown action.
    for cls in (RunsScreen, RunScreen, ScoresPane, RevisionsPane, TranscriptPane, LogsPane, ItemsScreen,
                DiffView, LogView, CompareScreen, NewRunScreen, ConfirmScreen):
        bindings = [b for b in cls.BINDINGS if isinstance(b, Binding)]
        shown = {b.action for b in bindings if b.show}
        assert all(b.action in shown for b in bindings if b.description), cls.__name__

    app = Agent2RLApp(root=review_root)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_runs(pilot)
        await settle(pilot, lambda: "enter" in footer_keys(screen), what="the footer")
        keys = footer_keys(screen)
        for key, label in (("enter", "Open"), ("n", "New run"), ("s", "Stop"), ("space", "Mark"), ("c", "Compare"),
                           ("o", "Sort"), ("O", "Sort"), ("slash", "Filter"), ("ctrl+r", "Refresh"),
                           ("question_mark", "Keys"), ("q", "Quit")):
            assert keys.get(key) == label, (key, keys)
        assert "escape" not in keys  # nothing to clear yet
        await pilot.press("slash")
        await type_text(pilot, "lo")
        await settle(pilot, lambda: footer_keys(screen).get("escape") == "Clear filter", what="Clear filter shown")
        await pilot.press("escape")
        await settle(pilot, lambda: "escape" not in footer_keys(screen), what="Clear filter hidden again")
        titles = palette_titles(app)
        assert len(titles) == len(set(titles)), titles
        for title in ("Reverse sort", "Refresh", "Quit", "Keys"):
            assert title in titles

        table = screen.query_one("#runs", VirtualTable)
        table.move_to(row_of(table, review_runs(review_root)[0]))
        await pilot.press("enter")
        await settle(pilot, lambda: run_screen_ready(app), what="the Run screen")
        run: RunScreen = app.screen
        expected = {
            "scores": {"1": "Panes", "5": "Panes", "escape": "Runs", "s": "Stop run", "r": "Its revision",
                       "d": "Diff since previous", "t": "Transcript there", "i": "All items"},
            "revisions": {"m": "Mark base", "v": "Layout", "n": "Hunk", "p": "Hunk", "right_square_bracket": "File",
                          "left_square_bracket": "File", "escape": "Runs"},
            "transcript": {"k": "Kind filter", "slash": "Search", "escape": "Runs", "enter": "Show step"},
            "logs": {"a": "Agent log", "g": "Grader log", "u": "Supervisor log", "f": "Follow"},
            "report": {"escape": "Runs", "s": "Stop run"},
        }
        for i, (tab, want) in enumerate(expected.items(), start=1):
            await pilot.press(str(i))
            await settle(pilot, lambda: all(footer_keys(run).get(k) == v for k, v in want.items()),
                         what=f"the footer of {tab}: {want}, not {footer_keys(run)}")
            titles = palette_titles(app)
            assert len(titles) == len(set(titles)), (tab, titles)
        # The diff's own keys, with the diff focused.
        await pilot.press("2")
        run.query_one(DiffView).focus()
        want = {"n": "Hunk", "p": "Hunk", "right_square_bracket": "File", "left_square_bracket": "File",
                "v": "Layout"}
        await settle(pilot, lambda: isinstance(app.focused, DiffView)
                     and {k: footer_keys(run).get(k) for k in want} == want, what="the diff's keys")
        # Escape on the Transcript pane with no search goes back to Runs.
        await pilot.press("3")
        await settle(pilot, lambda: isinstance(app.focused, StepsView), what="the transcript")
        await pilot.press("escape")
        await settle(pilot, lambda: isinstance(app.screen, RunsScreen), what="back to Runs from the Transcript")


async def test_run_screen_notices_the_run_became_lost(tmp_path: Path) -> None:
    """No one writes when a supervisor dies: the Run screen must see the heartbeat age out."""
    start = time.time()
    run_dir = make_run(tmp_path, "20261122T233321-arith-live", status="running", t0=start - 60, budget_s=600,
                       heartbeat=start + 600)  # beating, until the screen is up
    app = Agent2RLApp(root=tmp_path, open_run=run_dir)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, lambda: run_screen_ready(app) and "left" in plain(app.screen.query_one("#budget")),
                     what="the Run screen with its budget")
        run: RunScreen = app.screen
        header = run.query_one("#budget", Static)
        assert run.view.status == "running"
        # The supervisor's last beat: from here no one writes, and the beat ages out by itself.
        with RunStore.of_run(run_dir) as store:
            store.update_run(heartbeat_at=time.time() - LOST_AFTER_S + 3)
        await settle(pilot, lambda: run.view.status == "lost", what="the run to be seen lost")
        await settle(pilot, lambda: plain(header).startswith("lost"), what="the header to say lost")
        assert "ended" in plain(header) and "left" not in plain(header)
        frozen = plain(header)
        await pilot.pause(1.5)
        assert plain(header) == frozen  # the budget stopped ticking
    assert summarize(run_dir).status == "lost"  # the same verdict as the Runs screen's


@pytest.mark.parametrize("row_keys, seq, previous", [(("end", "up"), 4, 2), (("end",), 6, 4)])
async def test_diff_since_previous_submission_before_revisions_was_ever_opened(
        tmp_path: Path, row_keys: tuple[str, ...], seq: int, previous: int) -> None:
    """Submissions made from revisions 2, 4 and 6 (the last): d shows 2 → 4 and 4 → 6."""
    run_dir = make_run(tmp_path, "20261122T233320-arith-example", scores=(44.0, 69.0, 80.0))
    add_revisions(run_dir, [{"code/a.py": f"X = {i}\n"} for i in range(6)])  # revision k holds X = k-1
    with RunStore.of_run(run_dir) as store:
        store.update_submission(2, revision_seq=4)
        store.update_submission(3, revision_seq=6)
    app = Agent2RLApp(root=tmp_path, open_run=run_dir)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, lambda: run_screen_ready(app), what="the Run screen")
        run: RunScreen = app.screen
        subs = run.query_one("#subs", VirtualTable)
        await settle(pilot, lambda: subs.row_count == 4, what="the submissions")
        await pilot.press(*row_keys, "d")
        diff = run.query_one(DiffView)
        await settle(pilot, lambda: diff.line_count > 1, what="the diff")
        await pilot.pause(1.0)  # anything still queued from the first fill has been handled
        assert diff.diff_title == f"revision {previous} → {seq}"
        assert run.query_one(RevisionsPane).current_seq() == seq
        text = "\n".join(diff.row_text(y) for y in range(diff.line_count))
        assert f"X = {previous - 1}" in text and f"X = {seq - 1}" in text
        assert f"X = {seq - 2}" not in text  # not the diff against the revision before


async def test_a_lost_runs_record_can_be_closed_from_its_run_screen(review_root: Path, tmp_path: Path) -> None:
    lost_src = next(p for p in review_root.iterdir() if p.name.endswith("-lost"))
    run_dir = tmp_path / lost_src.name
    shutil.copytree(lost_src, run_dir)
    app = Agent2RLApp(root=tmp_path, open_run=run_dir)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, lambda: run_screen_ready(app), what="the Run screen")
        run: RunScreen = app.screen
        assert run.view.status == "lost" and run.view.run.ended_at is None
        header = plain(run.query_one(BudgetHeader))
        assert "without closing the run: s closes its record" in header, header  # what happened, what to do
        used = run.view.budget(time.time()).elapsed_s
        assert used == run.view.budget(time.time() + 3600).elapsed_s  # its clock stopped at the last heartbeat
        assert summarize(run_dir).budget_used_s == pytest.approx(min(used, run.view.run.budget_s))  # as in the list
        await pilot.press("s")
        await settle(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        assert "Close the record of lost run" in app.screen.question
        await pilot.press("y")
        await settle(pilot, lambda: app.screen is run and run.view.run.ended_at is not None
                     and report_status(run_dir) == "lost", what="the record to be closed and its report written")
        assert run.view.status == "lost"
        await pilot.press("s")  # closed now: nothing left to stop
        await pilot.pause(0.2)
        assert app.screen is run
    with RunStore.of_run(run_dir) as store:
        assert store.run().status == "lost"
    assert json.loads((run_dir / "report" / "report.json").read_text())["status"] == "lost"


async def test_the_transcript_pane_shows_the_agent_clis_own_sessions_inert(tmp_path: Path) -> None:
    """``o`` in the Transcript pane: the session files the CLI kept in the run's home, newest
    first, its text shown inert (an escape sequence as escapes), a database named, not dumped,
    and a link the agent made to a file outside never followed."""
    import os

    run_dir = make_run(tmp_path, "20261122T233320-arith-claude")
    projects = run_dir / "agent-home" / ".claude" / "projects" / "-workspace"
    projects.mkdir(parents=True)
    older = projects / "a1.jsonl"
    older.write_text('{"type":"user","message":{"content":"first session"}}\n')
    os.utime(older, (T0, T0))
    (projects / "b2.jsonl").write_text('{"type":"assistant","message":{"content":"I ran \x1b]52;c;cGFzdGU=\x07 the SFT"}}\n')
    (projects / "state.db").write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    secret = tmp_path / "outside.txt"
    secret.write_text("THE GRADERS ANSWERS")
    (projects / "link.jsonl").symlink_to(secret)
    with RunStore.of_run(run_dir) as store:
        store.event("supervisor", "agent_home", "agent home", {"sessions": ["~/.claude/projects"]})
    app = Agent2RLApp(root=tmp_path, open_run=run_dir)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, lambda: run_screen_ready(app), what="the Run screen")
        run: RunScreen = app.screen
        await pilot.press("3")
        await settle(pilot, lambda: run.query_one(TabbedContent).active == "transcript", what="the Transcript pane")
        await pilot.press("o")
        detail = plain(run.query_one("#step-text", Static))
    assert "agent-home/.claude/projects/-workspace/b2.jsonl" in detail and "first session" in detail
    assert detail.index("b2.jsonl") < detail.index("a1.jsonl")  # the newest first
    assert "\x1b" not in detail and "\\x1b]52" in detail  # the clipboard escape shown, not sent
    assert "state.db" in detail and "SQLite database" in detail
    assert "THE GRADERS ANSWERS" not in detail


async def test_the_transcript_pane_says_when_the_agent_kept_no_sessions(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "20261122T233320-arith-example")
    app = Agent2RLApp(root=tmp_path, open_run=run_dir)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, lambda: run_screen_ready(app), what="the Run screen")
        run: RunScreen = app.screen
        await pilot.press("3")
        await pilot.press("o")
        assert "kept no session files" in plain(run.query_one("#step-text", Static))


async def test_the_transcript_counts_from_the_budgets_start_as_the_scores_do(tmp_path: Path) -> None:
    """Issue 41 (7): a Run screen opened before the budget started put the transcript's times on
    another clock (from the run's creation) than the Scores pane's: 35 s against 27 s."""
    from agent2rl_tui.review.runview import load_run_view

    run_dir = make_run(tmp_path, "20261122T120000-arith-example")
    add_transcript(run_dir, claude_lines(6))
    with RunStore.of_run(run_dir) as store:
        store.update_run(budget_start=None)  # opened while the baseline was being scored
    app = Agent2RLApp(root=tmp_path, open_run=run_dir)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, lambda: run_screen_ready(app), what="the Run screen")
        run: RunScreen = app.screen
        await pilot.press("3")
        steps = run.query_one(StepsView)
        await settle(pilot, lambda: steps.count > 0 and steps.step_at(0) is not None, what="the transcript")
        with RunStore.of_run(run_dir) as store:
            store.update_run(budget_start=T0)  # the budget starts
        run.apply_view(load_run_view(run_dir))
        await settle(pilot, lambda: steps.step_at(0) is not None, what="the transcript again")
        first = steps.step_at(0)
        assert steps.start == T0
        assert steps._cells(0)[1].plain == human_duration(first.at - T0)  # the Scores pane's clock
