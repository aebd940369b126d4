"""The transcript as a virtual table: rows are read from run.db a page at a time.

A transcript can hold 100,000 steps; only the pages on screen are fetched (200 rows each,
a handful kept), so opening, scrolling, filtering by kind and searching stay fast whatever
the size. Enter posts ``VirtualTable.Selected``; ``current()`` is the step under the cursor.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path

from rich.text import Text
from textual.binding import Binding

from agent2rl_tui.record.store import RunStore
from agent2rl_tui.record.transcripts import (
    StepRow,
    count_steps,
    page_steps,
    position_of,
    search_steps,
    steps_by_seq,
)
from agent2rl_tui.ui.widgets.virtual_table import Column, VirtualTable
from agent2rl_tui.util.timeutil import human_duration

PAGE = 200
PAGES_KEPT = 16
KIND_STYLE = {
    "message": "", "reasoning": "italic", "tool_call": "cyan", "tool_result": "blue", "error": "bold red",
    "usage": "dim", "result": "bold", "system": "dim", "raw": "dim yellow",
}
COLUMNS = [Column("#", 6, right=True), Column("at", 8, right=True), Column("kind", 11), Column("who", 14),
           Column("what", 0)]


class StepsView(VirtualTable):
    BINDINGS = [Binding("enter", "select", "Show step", id="step-show")]

    def __init__(self, run_dir: Path, *, start: float = 0.0, id: str | None = None) -> None:
        super().__init__(COLUMNS, id=id)
        self.store = RunStore.of_run(run_dir)
        self.start = start
        self.kinds: tuple[str, ...] | None = None
        self.search: list[int] | None = None  # matching seqs while a search is active
        self.pages: OrderedDict[int, list[StepRow]] = OrderedDict()
        self.reload()

    @property
    def count(self) -> int:
        return self.row_count

    def on_unmount(self) -> None:
        self.store.close()

    def reload(self) -> None:
        """Re-count (the transcript grows during a live run) and drop cached pages."""
        count = len(self.search) if self.search is not None else count_steps(self.store, self.kinds)
        self.pages.clear()
        self.set_rows(count, self._cells)

    def set_filter(self, kinds: tuple[str, ...] | None, query: str = "") -> None:
        self.kinds = kinds or None
        self.search = search_steps(self.store, query, self.kinds, limit=1_000_000) if query.strip() else None
        self.pages.clear()
        count = len(self.search) if self.search is not None else count_steps(self.store, self.kinds)
        self.set_rows(count, self._cells, cursor=0)

    def step_at(self, row: int) -> StepRow | None:
        if not 0 <= row < self.row_count:
            return None
        page = row // PAGE
        if page not in self.pages:
            if self.search is not None:
                rows = steps_by_seq(self.store, self.search[page * PAGE:(page + 1) * PAGE])
            else:
                rows = page_steps(self.store, page * PAGE, PAGE, self.kinds)
            self.pages[page] = rows
            while len(self.pages) > PAGES_KEPT:
                self.pages.popitem(last=False)
        rows = self.pages[page]
        i = row - page * PAGE
        return rows[i] if i < len(rows) else None

    def current(self) -> StepRow | None:
        return self.step_at(self.cursor)

    def jump_to_seq(self, seq: int) -> None:
        if self.search is not None:
            row = next((i for i, s in enumerate(self.search) if s >= seq), self.row_count - 1)
        else:
            row = position_of(self.store, seq, self.kinds)
        self.move_to(row)

    def _cells(self, row: int) -> list[str | Text]:
        step = self.step_at(row)
        if step is None:
            return []
        body = step.text or (json.dumps(step.args, ensure_ascii=False) if step.args else "")
        tokens = f"  [{step.tokens_in or 0}→{step.tokens_out or 0}]" if step.tokens_in or step.tokens_out else ""
        return [
            Text(str(step.seq), style="dim"), Text(human_duration(step.at - self.start), style="dim"),
            Text(step.kind, style=KIND_STYLE.get(step.kind, "")), Text(step.tool or step.role or "", style="bold"),
            Text.assemble(body.replace("\n", " ⏎ "), (tokens, "dim")),
        ]
