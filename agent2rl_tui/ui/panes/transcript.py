"""Transcript: the agent's normalized steps, filtered by kind, searched, with full details.

Rows come from run.db a page at a time (StepsView, in thread workers), so a transcript of
any length opens at once. ``k`` cycles the kind filter, ``/`` searches (words, prefixes, in
text, tool names and tool arguments), enter shows the whole step below, ``o`` shows below the
agent CLI's own session files kept in the run folder (``agent-home/``: Claude Code's projects,
Codex's rollouts, ...), inert and capped. The line above the
list is redrawn when a listing arrives (``StepsCounted``); a step asked for before its page
was read is shown when the page arrives (``StepsPage``).
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.text import Text
from textual import on
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Input, Static

from agent2rl_tui.record.transcripts import StepRow
from agent2rl_tui.review.run_usage import usage_line
from agent2rl_tui.review.runview import RunView
from agent2rl_tui.ui.format import literal, literal_line
from agent2rl_tui.ui.messages import StepsCounted, StepsPage
from agent2rl_tui.ui.widgets.steps_view import StepsView

KIND_FILTERS: list[tuple[str, tuple[str, ...] | None]] = [
    ("all", None),
    ("messages", ("message",)),
    ("reasoning", ("reasoning",)),
    ("tool calls", ("tool_call",)),
    ("tool calls + results", ("tool_call", "tool_result")),
    ("errors", ("error",)),
    ("raw / stderr", ("raw",)),
]


class TranscriptPane(Vertical):
    BINDINGS = [
        Binding("k", "next_kind", "Kind filter", id="kind"),
        Binding("slash", "search", "Search", key_display="/", id="search"),
        Binding("o", "own_sessions", "CLI sessions", id="own-sessions"),
        # Active (and shown) only while there is a search to clear or the search box has
        # focus; otherwise escape falls through to the screen's (back to Runs).
        Binding("escape", "clear_search", "Clear search", id="clear-search"),
    ]

    def __init__(self, run_dir: Path, start: float) -> None:
        super().__init__(id="transcript-pane")
        self.run_dir = run_dir
        self.start = start
        self.kind_index = 0
        self.query_text = ""
        self.detail_row: int | None = None  # a step to show whole once its page is read

    def compose(self) -> ComposeResult:
        with Horizontal(id="transcript-bar"):
            yield Input(placeholder="/ search the transcript", id="search")
            yield Static("", id="transcript-filter")
        yield StepsView(self.run_dir, start=self.start, id="steps")
        with VerticalScroll(id="step-detail"):
            yield Static("enter on a step shows it whole here", id="step-text")

    def on_mount(self) -> None:
        self._show_filter()

    def update_view(self, view: RunView) -> None:
        steps = self.query_one(StepsView)
        # A run opened before its budget started: the times count from the budget's start once it
        # has one, as the Scores pane's do (one clock for the whole screen).
        steps.start = self.start = view.run.budget_start or view.run.created_at
        if not steps.searching:
            steps.reload()

    @on(StepsCounted)
    def listing_read(self) -> None:
        self._show_filter()

    @on(StepsPage)
    def page_read(self) -> None:
        if self.detail_row is not None:
            self._show_step(self.detail_row)

    def _show_filter(self) -> None:
        label = KIND_FILTERS[self.kind_index][0]
        steps = self.query_one(StepsView)
        totals = steps.totals
        if totals is None:
            self.query_one("#transcript-filter", Static).update(f"kind: {label} · reading the transcript…")
            return
        usage = steps.listing.usage if steps.listing is not None else None
        self.query_one("#transcript-filter", Static).update(
            f"kind: {label} · {steps.count} shown of {totals['steps']}"
            + (f" · {usage_line(usage)}" if usage is not None else ""))

    def _apply(self) -> None:
        """Ask for the listing of the filter and search; the line above follows when it is read."""
        self.query_one(StepsView).set_filter(KIND_FILTERS[self.kind_index][1], self.query_text)

    def action_next_kind(self) -> None:
        self.kind_index = (self.kind_index + 1) % len(KIND_FILTERS)
        self._apply()

    def action_search(self) -> None:
        self.query_one("#search", Input).focus()

    def _search_active(self) -> bool:
        box = self.query_one("#search", Input)
        return bool(self.query_text or box.value) or self.screen.focused is box

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "clear_search":
            return self._search_active()
        return True

    def action_clear_search(self) -> None:
        if not self._search_active():
            raise SkipAction()
        self.query_one("#search", Input).value = ""
        if self.query_text:
            self.query_text = ""
            self._apply()
        self.query_one(StepsView).focus()
        self.screen.refresh_bindings()

    @on(Input.Changed, "#search")
    def search_typed(self) -> None:
        self.screen.refresh_bindings()

    @on(Input.Submitted, "#search")
    def searched(self, event: Input.Submitted) -> None:
        self.query_text = event.value
        self._apply()
        self.query_one(StepsView).focus()
        self.screen.refresh_bindings()

    @on(StepsView.Selected, "#steps")
    def show_step(self, message: StepsView.Selected) -> None:
        self._show_step(message.row)

    def _show_step(self, row: int) -> None:
        s: StepRow | None = self.query_one(StepsView).step_at(row)
        self.detail_row = row if s is None else None
        if s is None:
            return
        parts = [literal_line(f"step {s.seq} · {s.kind} · {s.tool or s.role or ''} · line {s.line}", style="bold")]
        if s.tokens_in or s.tokens_out or s.cost_usd:
            parts.append(Text(f"tokens {s.tokens_in or 0} in, {s.tokens_out or 0} out"
                              + (f", ${s.cost_usd:.4f}" if s.cost_usd else ""), style="dim"))
        if s.args:
            parts.append(literal(json.dumps(s.args, indent=2, ensure_ascii=False)))
        if s.text:
            parts.append(literal(s.text))
        if s.size and s.size > len(s.text):
            parts.append(Text(f"[{s.size - len(s.text):,} more characters not kept]", style="dim"))
        self.query_one("#step-text", Static).update(Text("\n").join(parts))

    def action_own_sessions(self) -> None:
        """The agent CLI's own session files, below the list: a second account of the run."""
        from agent2rl_tui.record.sessions import MAX_SHOWN_BYTES, session_texts
        from agent2rl_tui.record.store import RunStore, StoreError

        try:
            with RunStore.of_run(self.run_dir) as store:
                files = session_texts(self.run_dir, store)
        except (OSError, StoreError) as exc:
            self.query_one("#step-text", Static).update(literal_line(f"the record cannot be read: {exc}"))
            return
        if not files:
            self.query_one("#step-text", Static).update(
                "the agent kept no session files of its own in this run (its CLI keeps none, or it is no CLI)")
            return
        parts = [Text(f"the agent CLI's own session files, newest first ({len(files)} shown):", style="bold")]
        for f in files:
            parts.append(literal_line(f"{f.path} · {f.size:,} bytes", style="bold"))
            if f.binary:
                parts.append(Text("a SQLite database: open it with sqlite3" if f.sqlite else "not text", style="dim"))
                continue
            parts.append(literal(f.text))
            if f.size > MAX_SHOWN_BYTES:
                parts.append(Text(f"[{f.size - MAX_SHOWN_BYTES:,} more bytes in the file]", style="dim"))
        self.detail_row = None
        self.query_one("#step-text", Static).update(Text("\n").join(parts))

    def jump_to_time(self, at: float) -> None:
        """The whole transcript (filter and search cleared), at the last step at or before ``at``."""
        if self.query_text or self.kind_index:
            self.kind_index, self.query_text = 0, ""
            self.query_one("#search", Input).value = ""
            self.screen.refresh_bindings()
        steps = self.query_one(StepsView)
        steps.jump_to_time(at)
        steps.focus()
