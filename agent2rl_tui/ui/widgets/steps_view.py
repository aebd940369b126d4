"""The transcript as a virtual table: rows are read from run.db a page at a time, off the UI thread.

A transcript can hold 100,000 steps; only the pages on screen are fetched (200 rows each,
a handful kept), so opening, scrolling, filtering by kind and searching stay fast whatever
the size. Every read runs in a thread worker (``review.steplist``) that posts what it read
back (``StepsCounted``, ``StepsPage``); drawing only uses the pages already here and shows
a placeholder row until its page arrives. Enter posts ``VirtualTable.Selected``;
``current()`` is the step under the cursor (None until its page is here).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.binding import Binding
from textual.geometry import Size

from agent2rl_tui.record.transcripts import StepRow
from agent2rl_tui.review.steplist import Kinds, StepListing, list_steps, read_page
from agent2rl_tui.ui.format import literal_line
from agent2rl_tui.ui.messages import StepsCounted, StepsPage
from agent2rl_tui.ui.widgets.virtual_table import CELL_CHARS, Cell, Column, VirtualTable
from agent2rl_tui.util.inert import one_line
from agent2rl_tui.util.timeutil import human_duration

PAGE = 200
PAGES_KEPT = 16
KIND_STYLE = {
    "message": "", "reasoning": "italic", "tool_call": "cyan", "tool_result": "blue", "error": "bold red",
    "usage": "dim", "result": "bold", "system": "dim", "raw": "dim yellow",
}
COLUMNS = [Column("#", 6, right=True), Column("at", 8, right=True), Column("kind", 11), Column("who", 14),
           Column("what", 0)]
PLACEHOLDER: list[Cell] = ["", "", "", "", Text("…", style="dim")]


class StepsView(VirtualTable):
    BINDINGS = [Binding("enter", "select", "Show step", id="step-show")]

    def __init__(self, run_dir: Path, *, start: float = 0.0, id: str | None = None) -> None:
        super().__init__(COLUMNS, id=id)
        self.run_dir = Path(run_dir)
        self.start = start
        # What was asked for; the listing shown is the one before until the new one is read.
        self.kinds: Kinds = None
        self.search_text = ""
        self.near: float | None = None  # a jump asked for and not yet answered
        self.generation = 0  # bumped with each new filter or search
        self.listing: StepListing | None = None  # what is shown
        self.listed = -1  # the generation of the listing shown
        self.pages: OrderedDict[int, list[StepRow]] = OrderedDict()
        self.in_flight: set[int] = set()  # pages asked for and not yet here
        self.retried: set[int] = set()  # pages read again because they came back short

    @property
    def count(self) -> int:
        return self.row_count

    @property
    def searching(self) -> bool:
        return bool(self.search_text.strip())

    @property
    def totals(self) -> dict[str, Any] | None:
        """The whole transcript's totals, as of the last listing read (None before it)."""
        return self.listing.totals if self.listing is not None else None

    # -- asking -----------------------------------------------------------------------
    def reload(self) -> None:
        """Re-count (the transcript grows during a live run); full pages already here are kept."""
        self._ask()

    def set_filter(self, kinds: Kinds, query: str = "") -> None:
        self.kinds, self.search_text = kinds or None, query
        self.generation += 1
        self._ask()

    def jump_to_time(self, at: float) -> None:
        """The whole transcript, with the cursor on the last step at or before ``at``."""
        if self.kinds or self.searching:
            self.kinds, self.search_text = None, ""
            self.generation += 1
        self.near = at
        self._ask()

    def _ask(self) -> None:
        page = 0 if self.generation != self.listed else self.cursor // PAGE
        self.load_listing(self.generation, self.kinds, self.search_text, self.near, page)

    @work(thread=True, exclusive=True, group="steps-listing", exit_on_error=False)
    def load_listing(self, generation: int, kinds: Kinds, query: str, near: float | None, page: int) -> None:
        """The listing, then the page the cursor will be on (so it is drawn at once)."""
        listing = list_steps(self.run_dir, kinds, query, near)
        self.post_message(StepsCounted(generation, listing))
        if listing.row is not None:
            page = listing.row // PAGE
        self.post_message(StepsPage(generation, page, read_page(self.run_dir, page, PAGE, listing.kinds,
                                                                listing.search)))

    @work(thread=True, group="steps-page", exit_on_error=False)
    def load_page(self, generation: int, page: int, listing: StepListing) -> None:
        self.post_message(StepsPage(generation, page, read_page(self.run_dir, page, PAGE, listing.kinds,
                                                                listing.search)))

    # -- what was read ----------------------------------------------------------------
    @on(StepsCounted)
    def listing_read(self, message: StepsCounted) -> None:
        if message.generation != self.generation:
            return  # a newer filter or search was asked for since
        listing = message.listing
        fresh = message.generation != self.listed
        self._drop_pages(fresh, listing.count)
        cursor = None
        if listing.near is not None and listing.near == self.near:
            self.near = None
            cursor = listing.row
        if cursor is None and fresh:
            cursor = 0
        self.listing, self.listed = listing, message.generation
        self.set_rows(listing.count, self._cells, cursor=cursor)
        # Rows are cut to the width: never a sideways scrollbar (the table's width counted
        # with its vertical scrollbar would overflow by the scrollbar's two columns).
        self.virtual_size = Size(0, listing.count + 1)

    def _drop_pages(self, fresh: bool, count: int) -> None:
        """A new listing: no page holds; the same one grown: the last page was partial."""
        if fresh or count < self.row_count:
            self.pages.clear()
        elif count > self.row_count:
            for page in [p for p in self.pages if p >= self.row_count // PAGE]:
                del self.pages[page]
        if fresh or count != self.row_count:
            self.in_flight.clear()
            self.retried.clear()

    @on(StepsPage)
    def page_read(self, message: StepsPage) -> None:
        if message.generation != self.listed:
            return
        self.in_flight.discard(message.page)
        expected = min(PAGE, self.row_count - message.page * PAGE)
        if len(message.rows) < expected and message.page not in self.retried:
            self.retried.add(message.page)  # read before the transcript grew: read it again
            self.refresh()
            return
        self.pages[message.page] = message.rows
        while len(self.pages) > PAGES_KEPT:
            self.pages.popitem(last=False)
        self.refresh()

    # -- drawing ----------------------------------------------------------------------
    def step_at(self, row: int) -> StepRow | None:
        """Step ``row`` if its page is here; otherwise its page is asked for and None returned."""
        if not 0 <= row < self.row_count:
            return None
        page = row // PAGE
        rows = self.pages.get(page)
        if rows is None:
            self._want(page)
            return None
        i = row - page * PAGE
        return rows[i] if i < len(rows) else None

    def _want(self, page: int) -> None:
        if page in self.in_flight or self.listing is None:
            return
        self.in_flight.add(page)
        self.load_page(self.listed, page, self.listing)

    def current(self) -> StepRow | None:
        return self.step_at(self.cursor)

    def _cells(self, row: int) -> list[Cell]:
        step = self.step_at(row)
        if step is None:
            return PLACEHOLDER
        body = step.text or (json.dumps(step.args, ensure_ascii=False) if step.args else "")
        tokens = f"  [{step.tokens_in or 0}→{step.tokens_out or 0}]" if step.tokens_in or step.tokens_out else ""
        return [
            Text(str(step.seq), style="dim"), Text(human_duration(step.at - self.start), style="dim"),
            Text(step.kind, style=KIND_STYLE.get(step.kind, "")), literal_line(step.tool or step.role, style="bold"),
            Text.assemble(one_line(body[:CELL_CHARS].replace("\n", " ⏎ ")), (tokens, "dim")),
        ]
