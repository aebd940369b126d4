"""Revisions: every code snapshot of the run, and the diff between any two of them.

The highlighted revision is diffed against the one before it, or against a revision marked
with ``m`` (any two chosen). Diffs come from git in a thread worker and are rendered by
DiffView (unified, or side by side when wide). The capture rules are shown above the list.
``t`` asks the screen (``ShowTranscriptAt``) for the transcript at the revision's time.
"""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from agent2rl_tui.record.capture import DEFAULT_RULES
from agent2rl_tui.record.revisions import Revision, diff
from agent2rl_tui.review.runview import RunView
from agent2rl_tui.ui.messages import DiffReady, ShowTranscriptAt
from agent2rl_tui.ui.widgets.diff_view import FILES, HUNKS, DiffView
from agent2rl_tui.ui.widgets.virtual_table import Column, VirtualTable
from agent2rl_tui.util.timeutil import human_duration

COLUMNS = [Column("rev", 5, right=True), Column("at", 8, right=True), Column("trigger", 10), Column("files", 5, right=True),
           Column("+/-", 11), Column("paths", 0)]


class RevisionsPane(Horizontal):
    BINDINGS = [
        Binding("m", "mark", "Mark base", id="rev-mark"),
        Binding("t", "transcript", "Transcript there", id="rev-transcript"),
        # The diff's own keys, also from the list, so browsing revisions needs no focus change.
        Binding("v", "diff('toggle_layout')", "Layout", id="rev-layout"),
        Binding("n", "diff('next_hunk')", "Next hunk", id="rev-next-hunk", group=HUNKS),
        Binding("p", "diff('previous_hunk')", "Prev hunk", id="rev-prev-hunk", group=HUNKS),
        Binding("right_square_bracket", "diff('next_file')", "Next file", key_display="]", id="rev-next-file",
                group=FILES),
        Binding("left_square_bracket", "diff('previous_file')", "Prev file", key_display="[",
                id="rev-prev-file", group=FILES),
    ]

    def __init__(self) -> None:
        super().__init__(id="revisions-pane")
        self.view: RunView | None = None
        self.revisions: list[Revision] = []
        self.diff_base: int | None = None  # the marked revision (m); not anchor, a Widget method
        # (base, seq) asked for explicitly (the diff since the previous submission): kept while
        # the cursor stays on seq, so a CursorMoved still queued from the first fill (handled
        # after select()) shows the same diff instead of the one against the previous revision.
        self.pending: tuple[int | None, int] | None = None
        self.shown: tuple[int | None, int] | None = None  # (old seq, new seq) of the diff asked for
        self.start = 0.0

    def compose(self) -> ComposeResult:
        with Vertical(id="revs-side"):
            yield Static(self._rules_text(), id="capture-rules")
            yield VirtualTable(COLUMNS, id="revs")
        yield DiffView(id="diff")

    @staticmethod
    def _rules_text() -> str:
        return "captured: the agent's files · not: " + ", ".join(
            f"{d}/" for d in DEFAULT_RULES.top_level_ignored) + ", caches, envs, weights, binaries, >1 MB"

    def update_view(self, view: RunView) -> None:
        first = not self.revisions
        self.view = view
        self.revisions = list(view.revisions)
        self.start = view.run.budget_start or 0.0
        table = self.query_one("#revs", VirtualTable)
        table.set_rows(len(self.revisions), self._cells,
                       cursor=len(self.revisions) - 1 if first and self.pending is None else None)

    def _cells(self, i: int) -> list[str]:
        rev = self.revisions[i]
        names = ", ".join(p["path"] for p in rev.paths[:3]) + (" …" if len(rev.paths) > 3 else "")
        return [str(rev.seq), human_duration(rev.at - self.start), rev.trigger, str(rev.files_changed),
                f"+{rev.added} -{rev.removed}", names]

    def revision(self, seq: int | None) -> Revision | None:
        if seq is None or not 1 <= seq <= len(self.revisions):
            return None
        rev = self.revisions[seq - 1]
        return rev if rev.seq == seq else next((r for r in self.revisions if r.seq == seq), None)

    def current_seq(self) -> int | None:
        table = self.query_one("#revs", VirtualTable)
        return self.revisions[table.cursor].seq if 0 <= table.cursor < len(self.revisions) else None

    def select(self, seq: int, base: int | None = None, explicit_base: bool = False) -> None:
        """Put the cursor on revision ``seq`` and show its diff (against ``base`` if given)."""
        self.pending = (base, seq) if explicit_base else None
        table = self.query_one("#revs", VirtualTable)
        row = next((i for i, r in enumerate(self.revisions) if r.seq == seq), None)
        if row is None:
            return
        if row == table.cursor:
            self.cursor_moved()
        else:
            table.move_to(row)

    @on(VirtualTable.CursorMoved, "#revs")
    def cursor_moved(self) -> None:
        seq = self.current_seq()  # where the cursor is now, not where the message says it was
        if seq is None:
            return
        if self.pending is not None and self.pending[1] == seq:
            self.show_diff(seq, self.pending[0], explicit=True)
        else:
            self.pending = None
            self.show_diff(seq, self.diff_base)

    def show_diff(self, seq: int, base: int | None, explicit: bool = False) -> None:
        new = self.revision(seq)
        if new is None or self.view is None:
            return
        if base is None and not explicit:
            old = self.revision(seq - 1)
        else:
            old = self.revision(base)
        key = (old.seq if old else None, new.seq)
        if key == self.shown:
            return  # already shown (or on its way)
        self.shown = key
        title = f"revision {old.seq if old else '(empty)'} → {new.seq}"
        self.load_diff(old, new, title, key)

    @work(thread=True, exclusive=True, group="diff", exit_on_error=False)
    def load_diff(self, old: Revision | None, new: Revision, title: str, key: tuple[int | None, int]) -> None:
        assert self.view is not None
        text = diff(self.view.path, old, new)
        self.post_message(DiffReady(text, title, key))

    @on(DiffReady)
    def diff_ready(self, message: DiffReady) -> None:
        if message.key == self.shown:  # a slower, superseded diff is dropped
            self.query_one("#diff", DiffView).set_diff(message.text, message.title)

    def action_diff(self, action: str) -> None:
        getattr(self.query_one("#diff", DiffView), f"action_{action}")()

    def action_mark(self) -> None:
        seq = self.current_seq()
        if seq is None:
            return
        self.diff_base = None if self.diff_base == seq else seq
        self.pending = None
        self.notify(f"diffs now against revision {seq}" if self.diff_base is not None else "diffs against the previous revision")

    def action_transcript(self) -> None:
        rev = self.revision(self.current_seq())
        if rev is not None:
            self.post_message(ShowTranscriptAt(rev.at))
