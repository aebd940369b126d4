"""One episode of an interactive task, turn by turn, drawing only the lines on screen.

An episode that ran to its step limit can hold fifty turns of long observations; a Rich
renderable of all of it would be laid out again on every move of the Items list. This is
a Line-API ``ScrollView``: ``set_rows`` takes the rows the record made of the episode
(review/episodes_view.py: what is shown, in what order, what is capped), they are word-wrapped
to the view's width as plain offsets (no styling), and a line becomes a ``Strip`` only when
it is drawn. ``n`` / ``p`` move between turns, highlighting the turn's action. The rows are
the model's and the environment's text: their control characters are shown as escapes
(``util.inert.visible``), never drawn raw.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len, get_character_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from agent2rl_tui.review.episodes_view import Row
from agent2rl_tui.util.inert import visible

TURNS = Binding.Group("Turn")
LABEL_WIDTH = 7
"""Cells of the label column (a field's name, a turn's number); text wraps beside it."""

_WORD = re.compile(r"\S+\s*|\s+")


def wrap_offsets(text: str, width: int) -> list[tuple[int, int]]:
    """Greedy word wrap of ``text`` to ``width`` cells: each line's ``(start, end)`` offsets.

    Newlines end lines (an empty paragraph is an empty line); a line never starts with the
    spaces it broke at (other than ASCII text, spaces after a word stay on its line and may
    run past the width, where the line is cropped); a word longer than a line is cut.
    """
    width = max(1, width)
    out: list[tuple[int, int]] = []
    base = 0
    for para in text.split("\n"):
        end = base + len(para)
        if para.isascii():  # one cell per character: breaks found with str.rfind
            start = 0
            while len(para) - start > width:
                cut = para.rfind(" ", start, start + width + 1)
                if cut <= start:  # no space within the line: cut the word
                    out.append((base + start, base + start + width))
                    start += width
                    continue
                out.append((base + start, base + cut))
                start = cut + 1
                while start < len(para) and para[start] == " ":
                    start += 1
            out.append((base + start, end))
            base = end + 1
            continue
        start, col = base, 0
        for m in _WORD.finditer(para):
            w_start, word = base + m.start(), m.group()
            bare = word.rstrip()
            size = cell_len(bare)
            if col and col + size > width:
                out.append((start, w_start))
                start, col = w_start, 0
            if size <= width:
                col += cell_len(word)
                continue
            cells = 0  # a word longer than a line: cut it at the width
            for i, ch in enumerate(bare):
                step = get_character_cell_size(ch)
                if cells and cells + step > width:
                    out.append((start, w_start + i))
                    start, cells = w_start + i, 0
                cells += step
            col = cells + len(word) - len(bare)
        out.append((start, end))
        base = end + 1
    return out


@dataclass(frozen=True)
class _Line:
    row: int  # index into the rows; -1: a blank line between blocks
    start: int
    end: int
    first: bool  # the row's first line (it carries the label)


class EpisodeView(ScrollView, can_focus=True):
    """The rows of an episode, wrapped to the width; n/p between turns."""

    DEFAULT_CSS = """
    EpisodeView {
        background: $surface;
        color: $foreground;
        overflow-x: hidden;
        scrollbar-gutter: stable;
        & > .episodeview--won { color: $text-success; text-style: bold; }
        & > .episodeview--lost { color: $text-error; text-style: bold; }
        & > .episodeview--label { color: $text-muted; }
        & > .episodeview--field { }
        & > .episodeview--observation { }
        & > .episodeview--action { color: $text-primary; text-style: bold; }
        & > .episodeview--action-current { background: $accent 40%; color: $text; text-style: bold; }
        & > .episodeview--completion { color: $text-warning; }
        & > .episodeview--reward { color: $text-muted; }
        & > .episodeview--reward-positive { color: $text-success; text-style: bold; }
        & > .episodeview--hidden { color: $text-muted; text-style: italic; }
    }
    """
    COMPONENT_CLASSES = {
        "episodeview--won", "episodeview--lost", "episodeview--label", "episodeview--field",
        "episodeview--observation", "episodeview--action", "episodeview--action-current",
        "episodeview--completion", "episodeview--reward", "episodeview--reward-positive",
        "episodeview--hidden",
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "next_turn", "Next turn", id="episode-next-turn", group=TURNS),
        Binding("p", "previous_turn", "Prev turn", id="episode-prev-turn", group=TURNS),
    ]

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._rows: list[Row] = []
        self._texts: list[str] = []  # each row's text as drawn, its note appended
        self._note_at: list[int] = []  # where each row's note starts in its text
        self._lines: list[_Line] = []
        self._turn_lines: list[int] = []  # the line of each turn's action, in order
        self._width = 0  # the width the lines were wrapped to
        self._styles: dict[str, Style] = {}
        self.current_turn: int | None = None
        """The turn (from 1) that n / p moved to and that is highlighted; None before."""

    # -- public ---------------------------------------------------------------------------

    def set_rows(self, rows: list[Row]) -> None:
        """Show an episode's rows, from its top."""
        self._rows = rows
        texts = [visible(r.text.expandtabs(4)) for r in rows]  # the model's text: inert, lines kept
        self._note_at = [len(t) for t in texts]
        self._texts = [t + (f"  {r.note}" if r.note else "") for t, r in zip(texts, rows, strict=True)]
        self.current_turn = None
        self._width = 0
        self._layout()
        if self.is_mounted:
            self.scroll_to(0, 0, animate=False, force=True)
            self.refresh()

    @property
    def line_count(self) -> int:
        return len(self._lines)

    @property
    def turn_count(self) -> int:
        return len(self._turn_lines)

    def row_text(self, y: int) -> str:
        """Line ``y`` as shown, label included, without trailing spaces."""
        line = self._lines[y]
        if line.row < 0:
            return ""
        row = self._rows[line.row]
        label = self._label(row, line.first)
        return (label + self._texts[line.row][line.start:line.end]).rstrip()

    def text(self) -> str:
        """Every line as shown (for tests and copying)."""
        return "\n".join(self.row_text(y) for y in range(len(self._lines)))

    # -- layout ---------------------------------------------------------------------------

    @staticmethod
    def _full_width(row: Row) -> bool:
        return row.kind in ("won", "lost")

    @staticmethod
    def _label(row: Row, first: bool) -> str:
        if EpisodeView._full_width(row):
            return ""
        if not first:
            return " " * LABEL_WIDTH
        if row.turn is not None:  # a turn's rows: right-aligned under its number
            return f"{row.label:>{LABEL_WIDTH - 2}}  "
        return f"{row.label:<{LABEL_WIDTH - 1}} "[:LABEL_WIDTH]

    def _layout(self) -> None:
        width = self.scrollable_content_region.width if self.is_mounted else 0
        if width <= 0:
            width = 80
        if width == self._width and self._lines:
            return
        self._width = width
        lines: list[_Line] = []
        turn_lines: list[int] = []
        for i, (row, text) in enumerate(zip(self._rows, self._texts, strict=True)):
            if row.kind == "action" or (row.kind == "observation" and row.turn is None):
                lines.append(_Line(-1, 0, 0, False))
            if row.kind == "action":
                turn_lines.append(len(lines))
            avail = width if self._full_width(row) else max(8, width - LABEL_WIDTH)
            for j, (start, end) in enumerate(wrap_offsets(text, avail)):
                lines.append(_Line(i, start, end, j == 0))
        self._lines, self._turn_lines = lines, turn_lines
        self.virtual_size = Size(width, len(lines))

    def on_resize(self, event: events.Resize) -> None:
        top = self._lines[round(self.scroll_y)] if self._lines and round(self.scroll_y) < len(self._lines) else None
        self._layout()
        if top is not None:  # keep the row that was at the top in view
            y = next((k for k, ln in enumerate(self._lines) if ln.row == top.row), 0)
            self.scroll_to(y=y, animate=False, force=True)
        self.refresh()

    # -- turns ----------------------------------------------------------------------------

    def _go_to_turn(self, turn: int) -> None:
        if not self._turn_lines:
            return
        self.current_turn = max(1, min(len(self._turn_lines), turn))
        self.scroll_to(y=self._turn_lines[self.current_turn - 1], animate=False, force=True)
        self.refresh()

    def action_next_turn(self) -> None:
        if self.current_turn is None:
            top = round(self.scroll_y)
            self._go_to_turn(next((k + 1 for k, y in enumerate(self._turn_lines) if y >= top), 1))
        else:
            self._go_to_turn(self.current_turn + 1)

    def action_previous_turn(self) -> None:
        self._go_to_turn((self.current_turn or 1) - 1)

    # -- drawing --------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            style = self._styles[name] = self.get_component_rich_style(f"episodeview--{name}")
        return style

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        index = round(self.scroll_y) + y
        if index >= len(self._lines) or self._lines[index].row < 0:
            return Strip.blank(width, base)
        line = self._lines[index]
        row = self._rows[line.row]
        text = self._texts[line.row]
        segments = [Segment(self._label(row, line.first), base + self._style("label"))]
        name: str = row.kind
        if row.kind == "action" and line.first and row.turn == self.current_turn:
            name = "action-current"
        style = base + self._style(name)
        note_at = self._note_at[line.row]
        if line.start < note_at:
            segments.append(Segment(text[line.start:min(line.end, note_at)], style))
        if line.end > note_at:
            note = "reward-positive" if row.note_good else "reward"
            segments.append(Segment(text[max(line.start, note_at):line.end], base + self._style(note)))
        return Strip(segments).crop_extend(0, width, base)
