"""A `git diff` viewer: unified or side by side, syntax-highlighted, drawing only visible rows.

Revisions of an agent's workspace produce diffs of thousands of lines (a rewritten training
script, a regenerated config). Building a Rich renderable for the whole diff would cost
seconds, so this is a Line-API ``ScrollView``: ``set_diff`` only parses the text into
``DiffLine`` records (a few ms for 4,000 lines); a row is styled, and its code highlighted
with Pygments, when it is first drawn, then cached. Parsing is the record's
(review/diffs.py); this module only draws.

Colours come from component classes resolved against the app theme (``$success`` /
``$error`` tints for added / removed lines), so the view reads on dark and light themes; the
syntax colours follow the theme's darkness (monokai / default Pygments styles).

Everything in a diff is the agent's (file names, code, the function names in hunk headers):
each line is made inert when the diff is set (``util.inert.one_line``: control characters,
bidi overrides and the newlines a quoted file name may hold are shown as escapes).

Layouts: unified (old and new line-number gutters) or side by side (a run of removed lines
paired row by row with the run of added lines that follows it). ``side_by_side = None``
picks side by side when the view itself (not the terminal: on the Revisions pane it sits
beside the list) is at least ``SIDE_BY_SIDE_MIN_WIDTH`` cells wide, each half then being
at least 51 cells, gutter included.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from functools import lru_cache
from typing import Any, ClassVar

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.styles import get_style_by_name
from pygments.token import Token
from pygments.util import ClassNotFound
from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from agent2rl_tui.review.diffs import DiffFile, DiffLine, LineKind, Row, pair_rows, parse_diff
from agent2rl_tui.util.inert import one_line

FULL_WIDTH: frozenset[LineKind] = frozenset({"file", "meta", "hunk", "empty"})
"""Line kinds drawn across the whole width, side by side too."""
SIDE_BY_SIDE_MIN_WIDTH = 104
HUNKS = Binding.Group("Hunk")
FILES = Binding.Group("File")

# Common suffixes resolved by alias: the first get_lexer_for_filename call compiles ~900
# file-name patterns (about 60 ms), which would delay the first paint.
_ALIASES = {
    ".py": "python", ".pyi": "python", ".sh": "bash", ".bash": "bash", ".md": "markdown",
    ".json": "json", ".jsonl": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml",
    ".cfg": "ini", ".ini": "ini", ".rs": "rust", ".js": "javascript", ".ts": "typescript",
    ".c": "c", ".h": "c", ".cpp": "cpp", ".cc": "cpp", ".hpp": "cpp", ".cu": "cuda",
    ".go": "go", ".java": "java", ".html": "html", ".css": "css", ".sql": "sql",
    ".txt": "", ".log": "", ".csv": "",
}


@lru_cache(maxsize=512)
def _lexer_for(filename: str) -> Lexer | None:
    """A Pygments lexer guessed from the file name; None for plain text."""
    suffix = "." + filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
    try:
        alias = _ALIASES.get(suffix)
        if alias == "":
            return None
        if alias is not None:
            lexer = get_lexer_by_name(alias, stripnl=False, ensurenl=False)
        else:
            lexer = get_lexer_for_filename(filename, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None
    return None if lexer.name == "Text only" else lexer


@lru_cache(maxsize=4096)
def _token_style(style_name: str, token_type: Any) -> Style | None:
    """Foreground (and bold/italic) of a token; None where it is the style's plain text."""
    pstyle = get_style_by_name(style_name)
    spec = pstyle.style_for_token(token_type)
    base = pstyle.style_for_token(Token)
    color = spec["color"] if spec["color"] and spec["color"] != base["color"] else None
    if not (color or spec["bold"] or spec["italic"]):
        return None
    return Style(color=f"#{color}" if color else None, bold=spec["bold"] or None,
                 italic=spec["italic"] or None)


class DiffView(ScrollView, can_focus=True):
    """A unified diff, unified or side by side; n/p between hunks, ]/[ between files."""

    DEFAULT_CSS = """
    DiffView {
        background: $surface;
        color: $foreground;
        & > .diffview--file { background: $primary 30%; color: $text; text-style: bold; }
        & > .diffview--meta { color: $text-muted; }
        & > .diffview--hunk { background: $secondary 12%; color: $text-secondary; }
        & > .diffview--hunk-current { background: $secondary 35%; color: $text; text-style: bold; }
        & > .diffview--context { }
        & > .diffview--added { background: $success 14%; }
        & > .diffview--removed { background: $error 14%; }
        & > .diffview--gutter { color: $text-muted; }
        & > .diffview--added-gutter { background: $success 28%; color: $text-muted; }
        & > .diffview--removed-gutter { background: $error 28%; color: $text-muted; }
        & > .diffview--blank { background: $foreground 4%; }
        & > .diffview--separator { color: $text-muted; }
    }
    """
    COMPONENT_CLASSES = {
        "diffview--file", "diffview--meta", "diffview--hunk", "diffview--hunk-current",
        "diffview--context", "diffview--added", "diffview--removed", "diffview--gutter",
        "diffview--added-gutter", "diffview--removed-gutter", "diffview--blank",
        "diffview--separator",
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("v", "toggle_layout", "Layout", id="diff-layout",
                tooltip="Switch between unified and side-by-side"),
        Binding("n", "next_hunk", "Next hunk", id="diff-next-hunk", group=HUNKS),
        Binding("p", "previous_hunk", "Prev hunk", id="diff-prev-hunk", group=HUNKS),
        Binding("]", "next_file", "Next file", id="diff-next-file", group=FILES),
        Binding("[", "previous_file", "Prev file", id="diff-prev-file", group=FILES),
    ]

    side_by_side: reactive[bool | None] = reactive(None, init=False)
    """True / False forces a layout; None: side by side when the view is wide enough."""

    def __init__(
        self, *, name: str | None = None, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.diff_title = ""
        """The title given to ``set_diff`` (also shown as the border title)."""
        self._lines: list[DiffLine] = []
        self._files: list[DiffFile] = []
        self._pairs: list[Row] | None = None  # side-by-side rows, built on first use
        self._pair_row_of: dict[int, int] | None = None
        self._mark_rows: dict[tuple[str, bool], list[int]] = {}
        self._sbs = False  # the layout in effect
        self._gutter = 1
        self._width = 0
        self._nav_row: int | None = None
        self._strips: LRUCache[tuple[int, bool, int, bool], tuple[Strip, Style]] = LRUCache(2048)
        self._tokens: dict[int, list[tuple[str, Style | None]]] = {}
        self._styles: dict[str, Style] = {}
        self.set_diff("")

    # -- public ---------------------------------------------------------------------------

    def set_diff(self, text: str, title: str = "") -> None:
        """Show a unified diff (``git diff`` output); the empty string shows "no changes"."""
        self.diff_title = title
        self.border_title = title or None
        self._lines, self._files = parse_diff(text) if text.strip() else ([], [])
        for line in self._lines:  # paths and code are the agent's: shown inert, one row each
            if not line.text.isprintable():
                line.text = one_line(line.text)
        if not self._lines:
            self._lines = [DiffLine("empty", "no changes")]
        numbers = [n for ln in self._lines for n in (ln.old_no, ln.new_no) if n is not None]
        self._gutter = len(str(max(numbers, default=1)))
        self._width = 2 * self._gutter + 4 + max(cell_len(ln.text) for ln in self._lines)
        self._pairs = self._pair_row_of = None
        self._mark_rows.clear()
        self._tokens.clear()
        self._strips.clear()
        self._nav_row = None
        self._sbs = self.is_side_by_side
        self._update_virtual_size()
        if self.is_mounted:
            self.scroll_to(0, 0, animate=False, force=True)
            self.refresh()

    @property
    def is_side_by_side(self) -> bool:
        """The layout in effect (resolving ``side_by_side = None`` by width)."""
        if self.side_by_side is not None:
            return self.side_by_side
        return self.size.width >= SIDE_BY_SIDE_MIN_WIDTH

    @property
    def files(self) -> list[DiffFile]:
        """The files of the diff, in order (paths, status, +/- counts)."""
        return self._files

    @property
    def line_count(self) -> int:
        """Rows in the current layout."""
        return len(self._rows()) if self._sbs else len(self._lines)

    @property
    def hunk_rows(self) -> list[int]:
        """Row indices of hunk headers in the current layout."""
        return self._marks("hunk")

    @property
    def file_rows(self) -> list[int]:
        """Row indices of file headers in the current layout."""
        return self._marks("file")

    def row_text(self, y: int) -> str:
        """Plain text of row ``y`` as drawn in the current layout (gutters and markers
        included; side by side, without the padding at the end of the row)."""
        text = self._row_strip(y)[0].text
        return text.rstrip() if self._sbs else text

    # -- actions --------------------------------------------------------------------------

    def action_toggle_layout(self) -> None:
        self.side_by_side = not self.is_side_by_side

    def action_next_hunk(self) -> None:
        self._go(self.hunk_rows, forward=True)

    def action_previous_hunk(self) -> None:
        self._go(self.hunk_rows, forward=False)

    def action_next_file(self) -> None:
        self._go(self.file_rows, forward=True)

    def action_previous_file(self) -> None:
        self._go(self.file_rows, forward=False)

    def _go(self, rows: list[int], *, forward: bool) -> None:
        top = round(self.scroll_y)
        cur = self._nav_row
        if cur is None or not top <= cur < top + max(1, self.size.height):
            cur = top if forward else top + 1  # "previous" from the top row includes itself
        i = bisect_right(rows, cur) if forward else bisect_left(rows, cur) - 1
        if not 0 <= i < len(rows):
            self.app.bell()
            return
        self._set_nav(rows[i])
        self.scroll_to(y=rows[i], animate=False, force=True)

    def _set_nav(self, row: int | None) -> None:
        old, self._nav_row = self._nav_row, row
        for r in (old, row):
            if r is not None:
                self.refresh_line(r)

    # -- layout ---------------------------------------------------------------------------

    def watch_side_by_side(self) -> None:
        self._apply_layout()

    def on_resize(self, event: events.Resize) -> None:
        self._apply_layout()

    def _apply_layout(self) -> None:
        sbs = self.is_side_by_side
        if sbs == self._sbs:
            self.refresh()
            return
        top = self._line_at(round(self.scroll_y))
        self._sbs = sbs
        self._set_nav(None)
        self._update_virtual_size()
        self.scroll_to(y=self._row_of(top), animate=False, force=True)
        self.refresh()

    def _rows(self) -> list[Row]:
        if self._pairs is None:
            self._pairs = pair_rows(self._lines)
        return self._pairs

    def _marks(self, kind: LineKind) -> list[int]:
        """Rows that start a hunk or a file, in the current layout (cached per layout)."""
        key = (kind, self._sbs)
        rows = self._mark_rows.get(key)
        if rows is None:
            if self._sbs:
                pairs = self._rows()
                rows = [r for r, (a, _) in enumerate(pairs) if self._lines[a].kind == kind]
            else:
                rows = [i for i, line in enumerate(self._lines) if line.kind == kind]
            self._mark_rows[key] = rows
        return rows

    def _line_at(self, row: int) -> int:
        if not self._sbs:
            return min(row, len(self._lines) - 1)
        rows = self._rows()
        a, b = rows[min(row, len(rows) - 1)]
        return a if a != -1 else b

    def _row_of(self, line: int) -> int:
        if not self._sbs:
            return line
        if self._pair_row_of is None:
            self._pair_row_of = {}
            for r, (a, b) in enumerate(self._rows()):
                self._pair_row_of.setdefault(a, r)
                self._pair_row_of.setdefault(b, r)
        return self._pair_row_of.get(line, 0)

    def _update_virtual_size(self) -> None:
        if self._sbs:
            self.virtual_size = Size(0, len(self._rows()))
        else:
            self.virtual_size = Size(self._width, len(self._lines))

    def _halves(self) -> tuple[int, int]:
        width = max(3, self.scrollable_content_region.width)
        half = (width - 1) // 2
        return half, width - 1 - half

    # -- text -----------------------------------------------------------------------------

    def _number(self, n: int | None) -> str:
        return " " * self._gutter if n is None else str(n).rjust(self._gutter)

    def _unified_gutter(self, line: DiffLine) -> str:
        return f"{self._number(line.old_no)} {self._number(line.new_no)} "

    def _side_gutter(self, line: DiffLine, side: str) -> str:
        n = line.old_no if side == "left" else line.new_no
        sign = {"added": "+", "removed": "-"}.get(line.kind, " ")
        if line.kind == "nonewline":
            return " " * (self._gutter + 3)
        return f"{self._number(n)} {sign} "

    # -- rendering ------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        self._strips.clear()
        self._tokens.clear()

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            style = self._styles[name] = self.get_component_rich_style(f"diffview--{name}")
        return style

    def _code(self, index: int, base: Style) -> list[Segment]:
        """The code of line ``index`` as segments: highlighted once, then cached."""
        tokens = self._tokens.get(index)
        if tokens is None:
            line = self._lines[index]
            text = line.text
            lexer = None
            if line.kind in ("context", "added", "removed") and line.file >= 0:
                lexer = _lexer_for(self._files[line.file].path.rsplit("/", 1)[-1])
            if lexer is None:
                tokens = [(text, None)]
            else:
                theme = "monokai" if self.app.current_theme.dark else "default"
                tokens = [(value, _token_style(theme, ttype))
                          for ttype, value in lexer.get_tokens(text) if value]
            self._tokens[index] = tokens
        return [Segment(text, base + style if style else base) for text, style in tokens]

    def _full_row(self, index: int, *, gutter: bool) -> tuple[Strip, Style]:
        line = self._lines[index]
        kind = line.kind
        if kind == "hunk" and self._row_of(index) == self._nav_row:
            style = self._style("hunk-current")
        else:
            style = self._style({"empty": "meta", "nonewline": "meta"}.get(kind, kind))
        if kind in ("file", "empty"):
            text = " " + line.text
            return Strip([Segment(text, style)], cell_len(text)), style
        pad = " " * (2 * self._gutter + 2) if gutter else ""
        segments = [Segment(pad, style), *self._code(index, style)]
        return Strip(segments), style

    def _unified_row(self, index: int) -> tuple[Strip, Style]:
        line = self._lines[index]
        if line.kind not in ("context", "added", "removed"):
            return self._full_row(index, gutter=True)
        style = self._style(line.kind)
        gutter = self._style("gutter" if line.kind == "context" else f"{line.kind}-gutter")
        sign = {"added": "+ ", "removed": "- "}.get(line.kind, "  ")
        segments = [Segment(self._unified_gutter(line), gutter), Segment(sign, style),
                    *self._code(index, style)]
        return Strip(segments), style

    def _side(self, index: int, side: str, width: int) -> Strip:
        if index == -1:
            return Strip.blank(width, self._style("blank"))
        line = self._lines[index]
        if line.kind == "nonewline":
            style = self._style("meta")
            gutter_style = style
        elif line.kind == "context":
            style, gutter_style = self._style("context"), self._style("gutter")
        else:
            style, gutter_style = self._style(line.kind), self._style(f"{line.kind}-gutter")
        gutter = self._side_gutter(line, side)
        number, sign = gutter[: self._gutter + 1], gutter[self._gutter + 1 :]
        segments = [Segment(number, gutter_style), Segment(sign, style),
                    *self._code(index, style)]
        return Strip(segments).crop_extend(0, width, style)

    def _sbs_row(self, row: int) -> tuple[Strip, Style]:
        a, b = self._rows()[row]
        if a == b and self._lines[a].kind in FULL_WIDTH:
            return self._full_row(a, gutter=False)
        half, right = self._halves()
        sep = Strip([Segment("│", self._style("separator"))], 1)
        return Strip.join([self._side(a, "left", half), sep, self._side(b, "right", right)]), \
            self._style("context")

    def _row_strip(self, row: int) -> tuple[Strip, Style]:
        """Row ``row`` of the current layout, uncropped, and the style to pad it with."""
        key = (row, self._sbs, self.size.width if self._sbs else 0, row == self._nav_row)
        cached = self._strips.get(key)
        if cached is None:
            cached = self._sbs_row(row) if self._sbs else self._unified_row(row)
            self._strips[key] = cached
        return cached

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        row = scroll_y + y
        width = self.size.width
        if row >= self.line_count:
            return Strip.blank(width, self.rich_style)
        strip, pad_style = self._row_strip(row)
        if self._sbs:
            return strip.crop_extend(0, width, pad_style)
        return strip.crop_extend(scroll_x, scroll_x + width, pad_style)
