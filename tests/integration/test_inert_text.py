"""Agent text is shown inert everywhere (issue 25, class 5).

The agent writes its output, its transcript, its files' names and contents, the model paths
it submits (and so the errors quoting them); its model writes the outputs the Items screen
shows. None of it may reach the terminal raw (OSC 52 writes the clipboard, OSC 0 the title,
ESC c resets the terminal), start a row of its own, be read as Rich markup or forge a
heading or a score in report.md.

First the rule itself (util.inert) against every control and format character of Unicode
and against markdown as a real parser reads it; then a hostile agent in one real contained
run, read back through every CLI printer, report.md and the TUI's panes; then the screens a
real run of the tiny model cannot fill with hostile text (the Items screen's model outputs
and judgements, a structured transcript's tool calls, episodes, the Runs and Compare
screens), on a synthetic run folder; and a log made of one 1 GiB line.
"""

from __future__ import annotations

import codecs
import json
import re
import sys
import time
import unicodedata
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from rich.text import Text
from support.paths import FIXTURES
from support.runs import cli, scripted_env
from support.synthetic import add_logs, add_transcript, make_run
from textual.app import App, ComposeResult
from textual.widgets import DataTable, Markdown, Static

from agent2rl_tui.record.results import ItemRow
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.review.episodes_view import episode_rows
from agent2rl_tui.review.report import render_markdown
from agent2rl_tui.review.report_model import Report
from agent2rl_tui.run import containment
from agent2rl_tui.ui.app import Agent2RLApp
from agent2rl_tui.ui.format import literal, literal_line
from agent2rl_tui.ui.screens.compare import CompareScreen
from agent2rl_tui.ui.screens.items import ItemsScreen
from agent2rl_tui.ui.screens.run import RunScreen
from agent2rl_tui.ui.screens.runs import RunsScreen
from agent2rl_tui.ui.tailfile import decode_lines
from agent2rl_tui.ui.widgets.diff_view import DiffView
from agent2rl_tui.ui.widgets.episode_view import EpisodeView
from agent2rl_tui.ui.widgets.log_view import LogView
from agent2rl_tui.ui.widgets.steps_view import StepsView
from agent2rl_tui.ui.widgets.virtual_table import VirtualTable, inert_cell
from agent2rl_tui.util.inert import is_inert, md_code, md_escape, one_line, visible

HOSTILE = FIXTURES / "hostile_text.py"
CONTROL_CATEGORIES = {"Cc", "Cf", "Zl", "Zp", "Cs"}
SIZE = (160, 48)

OSC52, OSC0, RIS = "\x1b]52;c;SGVsbG8=\x07", "\x1b]0;pwned\x07", "\x1bc"
ATTACKS = [
    OSC52, OSC0, RIS, "\x1b[2J\x1b[31mred", "\x9b2J", "\x90q\x9c", "\x85next line", "a\u2028b\u2029c",
    "\u202eevil\u202c", "\u2066isolate\u2069", "\u200e\u200f\u061c", "zero\u200bwidth\ufeff",
    "tag\U000e0041\U000e007f", "bell\x07 back\x08 del\x7f nul\x00", "cr\rover", "line\nbreak", "tab\there",
]
"""Text that would drive a terminal, reorder what is read, or hide or break a line."""

MARKDOWN_ATTACKS = [
    "output/x\n| 9 | 1m | scored | 100.00 | **best 100** |\n# Best: 100",
    "# Best: 100", "## h2", "- item", "+ item", "* item", "1. first", "3) third", "> quote", "===", "---",
    "**bold** __bold__ *em* _em_ ~~gone~~", "[link](https://example.com) ![img](x.png) <https://x.y>",
    "<b>html</b><script>alert(1)</script>", "&#x1b;&#27;&amp;&lt;", "`code` ``two`` ```three```",
    "a | b | c", "back\\slash\\| and \\*", "    indented code", "\x1b]0;t\x07 \u202e", "",
    "see https://evil.example/x, www.evil.com and a@evil.com",
]
"""Markdown that would make a heading, a list, a row, emphasis, a link, HTML or a control."""


def raw_controls(text: str, allowed: str = "\n") -> list[str]:
    """The control and format characters in ``text`` (except ``allowed``): what must never
    reach a terminal raw."""
    return [c for c in text if c not in allowed and unicodedata.category(c) in CONTROL_CATEGORIES]


# -- the rule --------------------------------------------------------------------------------------


def test_every_control_and_format_character_is_shown_as_an_escape_that_reads_back() -> None:
    safe: list[str] = []
    for cp in range(sys.maxunicode + 1):
        c = chr(cp)
        if unicodedata.category(c) not in CONTROL_CATEGORIES:
            safe.append(c)
            continue
        shown = one_line(c)
        assert not raw_controls(shown, allowed=""), f"U+{cp:04X}"
        assert shown.startswith("\\") and codecs.decode(shown, "unicode_escape") == c, f"U+{cp:04X}"
        assert visible(c) == (c if c in "\n\t" else shown)
    # Everything else is shown as it is, letters, marks, symbols, spaces and private use; only
    # code points this interpreter's Unicode leaves unassigned may be escaped (a newer Unicode
    # made them format characters).
    escaped = [c for c in safe if not c.isprintable() and one_line(c) != c]
    assert {unicodedata.category(c) for c in escaped} <= {"Cn"}
    kept = "".join(c for c in safe if c not in set(escaped))
    assert one_line(kept) == kept and visible(kept) == kept


def test_text_with_nothing_to_escape_is_returned_as_is() -> None:
    for text in ("plain ascii", "émigré – 数学 – العربية – 🧪", "a\\x1b is a backslash, not an escape", "a\u00a0b"):
        assert one_line(text) == text and visible(text) == text and is_inert(text)
    line = "x" * 10_000
    assert one_line(line) is line and visible(line) is line  # the fast path: no copy
    assert visible("two\nlines\twith a tab") == "two\nlines\twith a tab"
    assert one_line("two\nlines\twith a tab\r") == "two\\nlines\\twith a tab\\r"


@pytest.mark.parametrize("attack", ATTACKS)
def test_attacks_are_inert_in_both_forms(attack: str) -> None:
    assert not raw_controls(one_line(attack), allowed="")
    assert not raw_controls(visible(attack), allowed="\n\t")
    assert "\n" not in one_line(attack)
    assert not is_inert(attack)


def test_agent_text_is_never_read_as_markup() -> None:
    for markup in ("[bold red]FORGED[/]", "[link=https://example.com]x[/link]", "[@click=app.quit]quit[/]"):
        for text in (literal(markup), literal_line(markup), inert_cell(markup), inert_cell(Text(markup))):
            assert text.plain == markup and not text.spans
    assert inert_cell("a\nb").plain == "a\\nb"
    assert inert_cell(Text("a\x1b[2Jb", style="red")).plain == "a\\x1b[2Jb"


def _md_parse(source: str) -> list:
    return MarkdownIt("gfm-like").parse(source)  # what Textual's Markdown reads: tables, bare URLs as links


def _inline_of(tokens: list, opener: str) -> list:
    return [tokens[i + 1] for i, t in enumerate(tokens) if t.type == opener]


@pytest.mark.parametrize("text", MARKDOWN_ATTACKS + ATTACKS)
def test_markdown_escaped_text_is_one_literal_cell_or_line(text: str) -> None:
    table = f"| a | b |\n|---|---|\n| escaped | {md_escape(text)} |\n| code | {md_code(text)} |\n"
    tokens = _md_parse(table)
    assert [t.type for t in tokens].count("tr_open") == 3  # the header and exactly two rows
    cells = _inline_of(tokens, "td_open")
    assert len(cells) == 4
    for cell in (cells[1], cells[3]):
        kinds = {child.type for child in cell.children}
        assert kinds <= {"text", "code_inline"}, kinds  # no emphasis, link, image, HTML, break
    assert "".join(child.content for child in cells[1].children).strip() == one_line(text).strip()  # cells: trimmed
    if text:
        assert [child.content for child in cells[3].children] == [one_line(text)]
    # As list prose, and at the start of a line: still one paragraph of the same text.
    for source in (f"- error: {md_escape(text)}\n", f"{md_escape(text)}\n"):
        tokens = _md_parse(source)
        assert not any(t.type in ("heading_open", "table_open", "blockquote_open", "code_block", "fence",
                                  "html_block", "hr") for t in tokens), source
        shown = "".join(c.content for t in tokens if t.type == "inline" for c in t.children)
        assert shown.strip() in (one_line(text).strip(), ("error: " + one_line(text)).strip())


def test_report_md_quotes_the_agents_fields_without_forging_anything(tmp_path: Path) -> None:
    """A report whose every agent-made field is hostile: one heading, one row per submission."""
    forged = MARKDOWN_ATTACKS[0]
    report = {
        "run_id": "r1", "task": "arith", "agent": "command", "driver": None, "base_model": "tiny`x",
        "prompt_profile": None, "status": "finished", "end_reason": "agent_exited", "agent_exit_code": 0,
        "budget_s": 60, "error": "boom\n# Error heading " + OSC0,
        "baseline": {"score": 10.0}, "best": None, "improvement": None,
        "containment": {"contained": False, "reason": "**NOT** [x](y)"},
        "contamination": {"items": [1], "hits": [{"path": "code/a\n| 1 | 2 | 3 | 4 |", "items": [1],
                                                   "revisions": [2], "in_final_workspace": True}],
                          "n": 13, "checkable_items": 1, "files_scanned": 1},
        "submissions": [{"submission_id": i, "elapsed_s": 1.0, "status": "rejected", "score": None,
                         "improvement": None, "eval_seconds": None, "revision": None, "model_path": path,
                         "is_base_copy": False} for i, path in enumerate((forged, OSC52 + "`x`|y"), start=1)],
        "metrics": {"n_submissions": 2}, "revisions": {"count": 0, "lines_added": 0, "lines_removed": 0,
                                                         "capture_rules": [], "left_out_at_end": {}},
        "transcript": {"steps": 0, "by_kind": {}, "tokens_in": 0, "tokens_out": 0, "cost_usd": None},
        "vitals": {}, "warnings": [{"at": "t", "source": "snapshots", "kind": "snapshot_failed",
                                    "message": "cannot read code/\x1b]0;x\x07\n## Forged"}],
    }
    md = render_markdown(Report.from_json(report))  # a report.json missing most keys
    assert not raw_controls(md)
    tokens = _md_parse(md)
    headings = ["".join(c.content for c in t.children) for t in _inline_of(tokens, "heading_open")]
    assert headings == ["Run r1", "Code revisions: 0 (+0 / -0 lines)", "Transcript: 0 steps (none)",
                        "Contamination check: 1 eval item(s) found", "Warnings (1)"]
    tables = [i for i, t in enumerate(tokens) if t.type == "table_open"]
    rows = [sum(1 for t in tokens[start:] [: [t.type for t in tokens[start:]].index("table_close")]
                if t.type == "tr_open") for start in tables]
    assert rows == [3, 2, 2]  # submissions (header + 2), metrics (header + 1), contamination (header + 1)
    model_cells = [c for c in _inline_of(tokens, "td_open") if any(x.type == "code_inline" for x in c.children)]
    assert [c.children[0].content for c in model_cells[:2]] == [one_line(forged), one_line(OSC52 + "`x`|y")]
    assert md.count("Best: 100") == 1 and not any(line.startswith(("# Best", "## Forged", "# Error"))
                                                   for line in md.splitlines())


# -- a hostile agent, one real contained run --------------------------------------------------------


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> tuple[Path, str]:
    """The hostile agent (tests/fixtures/hostile_text.py) in a real run, contained where it can be;
    and what `run start` printed while it followed the run."""
    root = tmp_path_factory.mktemp("hostile-runs")
    contain = [] if containment.probe() is None else ["--no-contain"]
    proc = cli("run", "start", "--task", "arith", "--agent", "command", "--command", '"$HOSTILE_PY" "$HOSTILE"',
               "--model", str(tiny_model), "--budget", "5m", "--grace", "2s", "--eval-limit", "3",
               "--read-only-path", str(HOSTILE), "--env", f"HOSTILE_PY={sys.executable}",
               "--env", f"HOSTILE={HOSTILE}", *contain, root=root, timeout=600,
               env=scripted_env())  # what the agent wrote is tested, not the model's answers
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = next(p for p in root.iterdir() if (p / "run.db").is_file())
    assert "hostile agent done" in (run / "logs" / "agent.log").read_text()
    return run, proc.stdout + proc.stderr


def _escaped(text: str) -> str:
    return one_line(text)


@pytest.mark.slow
def test_a_hostile_agents_text_is_inert_in_every_cli_printer_and_the_report(hostile_run: tuple[Path, str]) -> None:
    from fixtures.hostile_text import FILES, MARKUP, MODEL_PATHS  # the agent's own strings

    run, followed = hostile_run
    root = run.parent
    with RunStore.of_run(run) as store:
        subs = store.submissions(kind="agent")
    # The record keeps what the agent sent, exactly; both were refused.
    assert [(s.status, s.model_path) for s in subs] == [("rejected", p) for p in MODEL_PATHS]

    # The supervisor's log quotes the paths on its one line per record; `run start` followed it.
    supervisor_log = (run / "logs" / "supervisor.log").read_text()
    assert supervisor_log.count(_escaped(MODEL_PATHS[0])) == 1
    for text in (supervisor_log, followed):
        assert not raw_controls(text, allowed="\n\t")
        assert not any(line.startswith(("|", "#")) for line in text.splitlines()), text
    outputs = {}
    for name, args in {"show": ("run", "show", run.name), "steps": ("run", "steps", run.name),
                       "revisions": ("run", "revisions", run.name), "diff": ("run", "diff", run.name, "2"),
                       "cat": ("run", "cat", run.name, "2", next(iter(FILES))), "runs": ("runs",)}.items():
        proc = cli(*args, root=root)
        assert proc.returncode == 0, proc.stderr
        assert not raw_controls(proc.stdout + proc.stderr, allowed="\n\t"), (name, proc.stdout)
        outputs[name] = proc.stdout

    # run show: one line per submission, the path and the error each on their submission's line.
    show = outputs["show"].splitlines()
    sub_lines = [line for line in show if re.match(r"\s+(baseline|#\d+) +(scored|rejected)", line)]
    assert len(sub_lines) == 3
    assert _escaped(MODEL_PATHS[0]) in sub_lines[1] and _escaped(MODEL_PATHS[1]) in sub_lines[2]
    assert not any(line.lstrip().startswith(("|", "# Best")) for line in show)
    # run steps: the output as the agent printed it, escapes visible, markup literal.
    assert "hostile stdout \\x1b]52;c;SGVsbG8=\\x07\\x1b]0;pwned-title\\x07\\x1bc\\x1b[2J" in outputs["steps"]
    assert "[bold red]FORGED[/]" in outputs["steps"]
    # run revisions: every path of the revision on its one line.
    rev_line = next(line for line in outputs["revisions"].splitlines() if line.split()[:1] == ["2"])
    assert all(_escaped(name) in rev_line for name in FILES)
    assert len(outputs["revisions"].splitlines()) == 3  # the header and two revisions
    # run diff and run cat: file names and contents inert; --raw gives them exactly.
    assert "\\x1b]52;c;SGVsbG8=\\x07" in outputs["diff"] and "\\u202e" in outputs["diff"]
    assert outputs["cat"] == _escaped(FILES[next(iter(FILES))]).replace("\\n", "\n")
    raw_cat = cli("run", "cat", run.name, "2", next(iter(FILES)), "--raw", root=root)
    assert raw_cat.stdout == FILES[next(iter(FILES))]
    assert OSC52 in cli("run", "diff", run.name, "2", "--raw", root=root).stdout
    assert MARKUP not in outputs["runs"] and run.name in outputs["runs"]

    # report.md: the rejected paths each once, in their own row, as literal code; nothing forged.
    md = (run / "report" / "report.md").read_text()
    assert not raw_controls(md)
    tokens = _md_parse(md)
    headings = ["".join(c.content for c in t.children) for t in _inline_of(tokens, "heading_open")]
    assert headings[0] == f"Run {run.name}" and "Best: 100" not in headings
    first_table = tokens[[t.type for t in tokens].index("table_open"):]
    first_table = first_table[: [t.type for t in first_table].index("table_close")]
    assert [t.type for t in first_table].count("tr_open") == 3  # header, #1, #2
    models = [c.children[0].content for c in _inline_of(first_table, "td_open")
              if c.children and c.children[0].type == "code_inline"]
    assert models == [_escaped(p) for p in MODEL_PATHS]
    assert md.count("Best: 100") == 1
    assert "best **-**" in md


async def settle(pilot, predicate, timeout: float = 15.0, what: str = "the screen") -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.05)
        if predicate():
            return
    raise AssertionError(f"timed out waiting for {what}")


def screen_lines(app: App) -> list[str]:
    """The screen as the terminal gets it: every line's characters, styles aside."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def assert_screen_inert(app: App) -> list[str]:
    lines = screen_lines(app)
    assert not raw_controls("\n".join(lines)), [line for line in lines if raw_controls(line)]
    return lines


def plain(static: Static) -> str:
    content = static.content
    return content.plain if isinstance(content, Text) else str(content)


@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_hostile_agents_text_is_inert_in_the_tuis_panes(hostile_run: tuple[Path, str]) -> None:
    from fixtures.hostile_text import FILES, MARKUP, MODEL_PATHS

    run = hostile_run[0]
    app = Agent2RLApp(root=run.parent, open_run=run)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.ready, what="the Run screen")
        screen = app.screen

        # Scores: the baseline and the two refused submissions, one row each.
        subs = screen.query_one("#subs", VirtualTable)
        await settle(pilot, lambda: subs.row_count == 3, what="the submissions")
        rows = [subs.row_cells(i) for i in range(subs.row_count)]
        assert [r[0] for r in rows] == ["baseline", "1", "2"]
        assert _escaped(MODEL_PATHS[0]) in rows[1][-1] and _escaped(MODEL_PATHS[1]) in rows[2][-1]
        lines = assert_screen_inert(app)
        assert sum("rejected" in line for line in lines) == 2
        assert not any(line.lstrip("│ ").startswith(("| 9 |", "# Best")) for line in lines)
        await pilot.press("down")
        await settle(pilot, lambda: "submission 1: rejected" in plain(screen.query_one("#items-text", Static)))
        detail = plain(screen.query_one("#items-text", Static)).splitlines()
        # The error in full, for the person: each of its lines quoted, so none passes for one of ours.
        quoted = [line for line in detail if "| 9 |" in line or "Best: 100" in line]
        assert len(quoted) == 2 and all(line.startswith("  │ ") for line in quoted), detail
        assert_screen_inert(app)

        # Logs: the agent's lines with their escapes visible and their markup literal.
        await pilot.press("4")
        log = screen.query_one(LogView)
        await settle(pilot, lambda: any("hostile stdout" in log.row_text(y) for y in range(log.line_count)),
                     what="the agent log")
        shown = [log.row_text(y) for y in range(log.line_count) if "hostile std" in log.row_text(y)]
        assert len(shown) == 2 and all("\\x1b]52;c;SGVsbG8=\\x07" in s and MARKUP in s for s in shown)
        lines = assert_screen_inert(app)
        assert any("hostile stdout \\x1b]52;c;SGVsbG8=\\x07\\x1b]0;pwned-title\\x07" in line for line in lines)

        # Revisions: each revision one row, every path escaped; the diff's names and code too.
        await pilot.press("2")
        revs = screen.query_one("#revs", VirtualTable)
        await settle(pilot, lambda: revs.row_count == 2, what="the revisions")
        diff = screen.query_one(DiffView)
        await settle(pilot, lambda: len(diff.files) == len(FILES), what="the diff of revision 2")
        paths = revs.row_cells(1)[-1]
        assert sum(_escaped(name) in paths for name in FILES) >= 3  # the list names three, then "…"
        rows = [diff.row_text(y) for y in range(diff.line_count)]
        assert not raw_controls("\n".join(rows))
        assert sum(any(_escaped(name) in row for row in rows) for name in FILES) == len(FILES)
        assert any("\\x1b]52;c;SGVsbG8=\\x07" in row for row in rows)
        assert_screen_inert(app)

        # Transcript: the steps, and a step shown whole.
        await pilot.press("3")
        steps = screen.query_one(StepsView)
        await settle(pilot, lambda: steps.row_count == 5 and steps.step_at(1) is not None, what="the steps")
        assert any("\\x1b]52;c;" in steps.row_cells(i)[-1] for i in range(2))
        assert_screen_inert(app)
        steps.move_to(1)
        await pilot.press("enter")
        await settle(pilot, lambda: "hostile" in plain(screen.query_one("#step-text", Static)), what="the step")
        assert MARKUP in plain(screen.query_one("#step-text", Static))
        assert_screen_inert(app)

        # Report: markdown that forges nothing, drawn inert.
        await pilot.press("5")
        md = screen.query_one("#report-md", Markdown)
        await settle(pilot, lambda: "valid_submission_rate" in md.source, what="the report")
        assert not any(line.startswith("# Best") for line in md.source.splitlines())
        assert_screen_inert(app)


# -- what a real run of the tiny model cannot fill: a synthetic run folder ----------------------------


def hostile_synthetic_run(root: Path) -> Path:
    """A finished run whose model outputs, judgements, transcript, log and files are hostile."""
    run = make_run(root, "20261122T233320-arith-example", driver="[@click=app.quit]drv" + OSC0)
    item = {"index": 0, "prompt": "2+2=" + OSC52, "output": "#### 4" + RIS + "\n# Best: 100\n[bold]x[/bold]",
            "extracted": "4\u202e", "gold": "4\x9b2J", "correct": True}
    (run / "evals" / "1" / "results.jsonl").write_text(json.dumps(item) + "\n")
    judged = {"index": 0, "prompt": "p", "output": "model says " + OSC52, "gold": "ref " + RIS, "correct": False,
              "extra": {"judge_raw": "m\x1b[2J", "instruction": "do [@click=app.quit]x[/] " + OSC0,
                        "preference": 1.2, "model_shown_as": "m", "reference_generator": "gpt\x1b]0;t\x07"}}
    (run / "evals" / "2" / "results.jsonl").write_text(json.dumps(judged) + "\n")
    with RunStore.of_run(run) as store:
        store.add_submission(kind="agent", status="rejected", model_path=MARKDOWN_ATTACKS[0],
                             error="not_found: " + MARKDOWN_ATTACKS[0] + OSC0, error_code="not_found")
    add_transcript(run, [
        (json.dumps({"type": "assistant", "message": {"id": "m1", "content": [
            {"type": "tool_use", "id": "t1", "name": "Bash" + OSC0,
             "input": {"command": "echo " + OSC52 + "\n[bold]x[/bold] \u202e"}}]}}), 1_795_400_001.0),
        (json.dumps({"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "out " + RIS + "\x9b2J"}]}}), 1_795_400_002.0),
    ])
    add_logs(run)
    return run


@pytest.mark.asyncio
async def test_model_outputs_judgements_tool_calls_and_run_lists_are_inert(tmp_path: Path) -> None:
    hostile_synthetic_run(tmp_path)
    app = Agent2RLApp(root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        # Runs, and Compare (a DataTable, whose plain str cells Textual would read as markup).
        await settle(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.loaded, what="Runs")
        runs = app.screen.query_one("#runs", VirtualTable)
        assert runs.row_count == 1 and runs.row_cells(0)[4] == _escaped("[@click=app.quit]drv" + OSC0)
        assert_screen_inert(app)
        await pilot.press("c")
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen), what="Compare")
        table = app.screen.query_one("#compare", DataTable)
        assert table.get_row_at(0)[3].plain == _escaped("[@click=app.quit]drv" + OSC0)
        assert_screen_inert(app)
        await pilot.press("escape")

        # Scores: baseline, two scored, one refused: four rows, whatever the refused path holds.
        await settle(pilot, lambda: isinstance(app.screen, RunsScreen))
        await pilot.press("enter")
        await settle(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.ready, what="the Run screen")
        screen = app.screen
        subs = screen.query_one("#subs", VirtualTable)
        await settle(pilot, lambda: subs.row_count == 4, what="the submissions")
        assert subs.row_cells(3)[-1] == _escaped("not_found: " + MARKDOWN_ATTACKS[0] + OSC0)
        assert_screen_inert(app)

        # Items of submission 1: the model's output, extracted answer and gold, inert.
        await pilot.press("down")
        await pilot.press("i")
        await settle(pilot, lambda: isinstance(app.screen, ItemsScreen), what="the items of submission 1")
        items = app.screen
        await settle(pilot, lambda: "item 0" in plain(items.query_one("#item-text", Static)), what="the item")
        row = items.query_one("#items-table", VirtualTable).row_cells(0)
        assert row[4] == _escaped("4\u202e") and row[5] == _escaped("4\x9b2J")
        detail = plain(items.query_one("#item-text", Static))
        assert visible("#### 4" + RIS + "\n# Best: 100\n[bold]x[/bold]") in detail
        assert_screen_inert(app)
        await pilot.press("escape")

        # Items of submission 2: a judgement, both outputs and the judge's answer inert.
        await settle(pilot, lambda: isinstance(app.screen, RunScreen))
        await pilot.press("down")
        await pilot.press("i")
        await settle(pilot, lambda: isinstance(app.screen, ItemsScreen) and app.screen.judged, what="judgements")
        static = app.screen.query_one("#item-text", Static)
        texts = [r.plain for r in static.content.renderables if isinstance(r, Text)]
        assert visible("do [@click=app.quit]x[/] " + OSC0) in texts and visible("m\x1b[2J") in texts
        lines = assert_screen_inert(app)
        assert any("model says \\x1b]52;c;" in line for line in lines)
        await pilot.press("escape")

        # Transcript: a tool call's name and arguments, a tool's result.
        await settle(pilot, lambda: isinstance(app.screen, RunScreen))
        await pilot.press("3")
        steps = screen.query_one(StepsView)
        await settle(pilot, lambda: steps.row_count >= 2 and steps.step_at(0) is not None, what="the steps")
        cells = [steps.row_cells(i) for i in range(steps.row_count)]
        assert any(c[3] == _escaped("Bash" + OSC0) for c in cells), cells
        assert any(_escaped("out " + RIS + "\x9b2J") in c[-1] for c in cells)
        assert_screen_inert(app)
        await pilot.press("enter")
        await settle(pilot, lambda: "step " in plain(screen.query_one("#step-text", Static)), what="the step")
        detail = plain(screen.query_one("#step-text", Static))  # the arguments as JSON: ESC is \\u001b there
        assert "]52;c;SGVsbG8=" in detail and "\\u202e" in detail and "[bold]x[/bold]" in detail
        assert_screen_inert(app)


@pytest.mark.asyncio
async def test_a_run_folder_copied_from_elsewhere_is_shown_inert_from_its_name_down(tmp_path: Path) -> None:
    """`open PATH` reviews a folder made anywhere: its name and every field of its record are anyone's."""
    name = "20261122T233320-arith-ex" + OSC0
    make_run(tmp_path, name, task="arith" + RIS, agent="[@click=app.quit]a", driver="d\n| 9 |")
    app = Agent2RLApp(root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.loaded, what="Runs")
        cells = app.screen.query_one("#runs", VirtualTable).row_cells(0)
        assert cells[2:5] == [_escaped("arith" + RIS), "[@click=app.quit]a", "d\\n| 9 |"] and cells[-1] == _escaped(name)
        assert_screen_inert(app)
        await pilot.press("enter")
        await settle(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.ready, what="the Run screen")
        assert app.screen.title == _escaped(name)
        header = app.screen.query_one("#budget", Static).content
        assert "task " + _escaped("arith" + RIS) in "\n".join(r.plain for r in header.renderables)
        assert_screen_inert(app)


class _One(App[None]):
    def __init__(self, widget) -> None:  # noqa: ANN001
        super().__init__()
        self.widget = widget

    def compose(self) -> ComposeResult:
        yield self.widget


@pytest.mark.asyncio
async def test_an_episode_of_hostile_observations_and_actions_is_inert() -> None:
    turns = [{"action": "go " + OSC0, "observation": "room\x1b[2J\n" + RIS, "reward": 0,
              "completion": "think \u202e" + OSC52}]
    item = {"index": 0, "correct": False, "extra": {"game": "g\x1b]0;t\x07", "goal": "win [@click=app.quit]x[/]",
                                                    "end": "done", "turns": turns, "first_observation": "start\x9b2J"}}
    view = EpisodeView()
    async with _One(view).run_test(size=(100, 40)) as pilot:
        view.set_rows(episode_rows(ItemRow.from_dict(item)))
        await pilot.pause()
        text = view.text()
        assert not raw_controls(text)
        assert "go \\x1b]0;pwned\\x07" in text and "win [@click=app.quit]x[/]" in text
        assert_screen_inert(pilot.app)


def test_a_log_line_shows_its_escapes_and_never_hides_what_a_carriage_return_overwrote() -> None:
    lines = decode_lines(b"rm -rf data; cheat\rtraining step 5\r\nnext \x1b[31mred\x1b[0m\ttab " + OSC0.encode() + b"\n")
    assert lines[0].startswith("training step 5") and "\\r over: rm -rf data; cheat" in lines[0]
    assert "\\x1b[31mred\\x1b[0m" in lines[1] and lines[1].endswith("tab " + _escaped(OSC0)) and "\t" not in lines[1]
    assert not raw_controls("\n".join(lines), allowed="\n")


@pytest.mark.asyncio
async def test_a_log_of_one_1_gib_line_opens_at_once_cut_and_inert(tmp_path: Path) -> None:
    """A sparse file: 1 GiB of NUL bytes and no newline, then a hostile line."""
    path = tmp_path / "agent.log"
    with open(path, "wb") as f:
        f.truncate(1 << 30)
        f.seek(1 << 30)
        f.write(b"\nlast " + OSC52.encode() + b"\n")
    view = LogView(path)
    t0 = time.perf_counter()
    async with _One(view).run_test(size=(120, 30)) as pilot:
        await settle(pilot, lambda: view.line_count >= 2, what="the log")
        opened = time.perf_counter() - t0
        rows = [view.row_text(y) for y in range(view.line_count)]
        assert rows[-1] == "last " + _escaped(OSC52)
        assert all(len(r) <= 2000 for r in rows) and rows[0].startswith("\\x00\\x00")
        assert not raw_controls("\n".join(rows))
        assert_screen_inert(pilot.app)
    assert opened < 5.0  # about a tenth of that on an idle machine; it reads a few MB, not 1 GiB


def test_md_block_keeps_lines_and_cannot_be_closed_from_inside() -> None:
    from markdown_it import MarkdownIt

    from agent2rl_tui.util.inert import md_block

    hostile = "## Attempt 1\n````\n# Forged heading\n[link](http://x)\x1b[2J\n```"
    block = md_block(hostile)
    tokens = MarkdownIt().parse(block + "\nafter")
    fences = [t for t in tokens if t.type == "fence"]
    assert len(fences) == 1 and "# Forged heading" in fences[0].content and "\\x1b[2J" in fences[0].content
    assert not [t for t in tokens if t.type == "heading_open"]
