"""A table that draws only the rows on screen (the Line API), for lists of any length.

Textual's DataTable builds every row up front (about a second for 10,000 rows); a run can
have thousands of revisions, a thousand submissions, a hundred thousand transcript steps.
Here the caller gives a row count and a function that returns row ``i``'s cells, and only
visible rows are ever asked for. Fixed-width columns, a pinned header line, a row cursor;
moving it posts ``CursorMoved``, enter (or a click) posts ``Selected``.

Cells are shown literally, on one line: a ``str`` cell is never parsed as markup, and every
cell's control characters and newlines are drawn as escapes (``util.inert.one_line``), so no
cell, whatever the agent wrote into it, can move the cursor, drive the terminal or start a
row of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.events import Click
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from agent2rl_tui.util.inert import one_line

Cell = str | Text
CELL_CHARS = 4096
"""A cell's text is cut to this before it is escaped and drawn (a column is narrower)."""


def inert_cell(cell: Cell) -> Text:
    """A cell as drawn: a ``Text`` whose plain text is one line with nothing to escape."""
    if isinstance(cell, Text):
        plain = cell.plain
        if len(plain) <= CELL_CHARS and (plain.isprintable() or one_line(plain) == plain):
            return cell.copy()
        return Text(one_line(plain[:CELL_CHARS]), style=cell.style)  # its spans: not worth keeping
    return Text(one_line(str(cell)[:CELL_CHARS]))


@dataclass(frozen=True)
class Column:
    label: str
    width: int  # 0: take the remaining width
    right: bool = False


@dataclass
class _TableMessage(Message):
    """A message from a table; ``control`` lets ``@on(..., "#id")`` pick the table."""

    table: VirtualTable

    @property
    def control(self) -> VirtualTable:
        return self.table


class VirtualTable(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    VirtualTable { height: 1fr; }
    VirtualTable > .virtualtable--header { text-style: bold; background: $panel; }
    VirtualTable > .virtualtable--cursor { background: $accent 50%; }
    VirtualTable:focus > .virtualtable--cursor { background: $accent; color: $text; }
    """
    COMPONENT_CLASSES = {"virtualtable--header", "virtualtable--cursor"}
    BINDINGS = [
        Binding("up", "move(-1)", "Up", show=False),
        Binding("down", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
        Binding("enter", "select", "Select", show=False),
    ]
    cursor: reactive[int] = reactive(0, always_update=True)

    @dataclass
    class CursorMoved(_TableMessage):
        row: int

    @dataclass
    class Selected(_TableMessage):
        row: int

    @dataclass
    class HeaderSelected(_TableMessage):
        column: int

    def __init__(self, columns: Sequence[Column], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.columns = list(columns)
        self.row_count = 0
        self._get_row: Callable[[int], Sequence[Cell]] = lambda i: ()

    # -- data -------------------------------------------------------------------------
    def set_rows(self, count: int, get_row: Callable[[int], Sequence[Cell]], cursor: int | None = None) -> None:
        """Show ``count`` rows; row i's cells come from ``get_row(i)`` when it is drawn."""
        self.row_count = count
        self._get_row = get_row
        self.virtual_size = Size(self.size.width or 80, count + 1)
        before = self.cursor
        target = before if cursor is None else cursor
        self.set_reactive(VirtualTable.cursor, max(0, min(target, count - 1)))
        self._scroll_to_cursor()
        self.refresh()
        if count and (cursor is not None or self.cursor != before):
            self.post_message(self.CursorMoved(self, self.cursor))

    def row_cells(self, row: int) -> list[str]:
        """Row ``row``'s cells as plain text (what a reader sees, untruncated)."""
        return [one_line(c.plain if isinstance(c, Text) else str(c)) for c in self._get_row(row)]

    def move_to(self, row: int) -> None:
        if self.row_count:
            self.cursor = max(0, min(self.row_count - 1, row))

    # -- drawing ----------------------------------------------------------------------
    def _widths(self, width: int) -> list[int]:
        fixed = sum(c.width for c in self.columns if c.width) + len(self.columns)
        flex = [c for c in self.columns if not c.width]
        rest = max(8, width - fixed) // max(1, len(flex))
        return [c.width or rest for c in self.columns]

    def _line(self, cells: Sequence[Cell], width: int) -> Text:
        line = Text(no_wrap=True, overflow="ellipsis")
        for col, w, cell in zip(self.columns, self._widths(width), cells):
            text = inert_cell(cell)
            text.truncate(w, overflow="ellipsis")
            if col.right:
                text.pad_left(w - text.cell_len)
            else:
                text.pad_right(w - text.cell_len)
            line.append_text(text)
            line.append(" ")
        return line

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y == 0:
            text = self._line([c.label for c in self.columns], width)
            style: Style | None = self.get_component_rich_style("virtualtable--header")
        else:
            row = self.scroll_offset.y + y - 1
            if row >= self.row_count:
                return Strip.blank(width, self.rich_style)
            text = self._line(self._get_row(row), width)
            style = self.get_component_rich_style("virtualtable--cursor") if row == self.cursor else None
        strip = Strip(text.render(self.app.console)).extend_cell_length(width).crop(0, width)
        return strip.apply_style(style) if style else strip

    # -- the cursor -------------------------------------------------------------------
    def _scroll_to_cursor(self) -> None:
        visible = max(1, self.size.height - 1)
        top = self.scroll_offset.y
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + visible:
            self.scroll_to(y=self.cursor - visible + 1, animate=False)

    def watch_cursor(self, row: int) -> None:
        self._scroll_to_cursor()
        self.refresh()
        if self.row_count:
            self.post_message(self.CursorMoved(self, row))

    def action_move(self, delta: int) -> None:
        self.move_to(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self.move_to(self.cursor + direction * max(1, self.size.height - 2))

    def action_first(self) -> None:
        self.move_to(0)

    def action_last(self) -> None:
        self.move_to(self.row_count - 1)

    def action_select(self) -> None:
        if self.row_count:
            self.post_message(self.Selected(self, self.cursor))

    def on_click(self, event: Click) -> None:
        if event.y == 0:
            x = 0
            for i, w in enumerate(self._widths(self.size.width)):
                if event.x < x + w + 1:
                    self.post_message(self.HeaderSelected(self, i))
                    return
                x += w + 1
            return
        row = self.scroll_offset.y + event.y - 1
        if 0 <= row < self.row_count:
            self.move_to(row)
            self.action_select()
