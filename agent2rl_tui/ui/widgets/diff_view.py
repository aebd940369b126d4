"""A `git diff` viewer: unified or side by side, syntax-highlighted, drawing only visible rows.

Revisions of an agent's workspace produce diffs of thousands of lines (a rewritten training
script, a regenerated config). Building a Rich renderable for the whole diff would cost
seconds, so this is a Line-API ``ScrollView``: ``set_diff`` only parses the text into
``DiffLine`` records (a few ms for 4,000 lines); a row is styled, and its code highlighted
with Pygments, when it is first drawn, then cached.

Colours come from component classes resolved against the app theme (``$success`` /
``$error`` tints for added / removed lines), so the view reads on dark and light themes; the
syntax colours follow the theme's darkness (monokai / default Pygments styles).

Layouts: unified (old and new line-number gutters) or side by side (a run of removed lines
paired row by row with the run of added lines that follows it). ``side_by_side = None``
picks side by side when the view itself (not the terminal: on the Revisions pane it sits
beside the list) is at least ``SIDE_BY_SIDE_MIN_WIDTH`` cells wide, each half then being
at least 51 cells, gutter included.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar, Literal

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

LineKind = Literal["file", "meta", "hunk", "context", "added", "removed", "nonewline", "empty"]
FULL_WIDTH = frozenset({"file", "meta", "hunk", "empty"})
SIDE_BY_SIDE_MIN_WIDTH = 104
HUNKS = Binding.Group("Hunk")
FILES = Binding.Group("File")

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
_HIDDEN_META = ("index ", "+++ ")
MAX_LINE_CHARS = 10_000
"""Longer lines (minified files) are cut: a row is built whole before it is cropped."""


def _body(text: str) -> str:
    text = text.expandtabs(4)
    return text if len(text) <= MAX_LINE_CHARS else text[: MAX_LINE_CHARS - 1] + "…"


@dataclass(slots=True)
class DiffLine:
    """One line of the diff: its role, its text (without the +/-/space marker), numbers."""

    kind: LineKind
    text: str
    old_no: int | None = None
    new_no: int | None = None
    file: int = -1


@dataclass(slots=True)
class DiffFile:
    """One file of the diff, from its header lines."""

    old_path: str | None = None
    new_path: str | None = None
    status: str = "modified"
    """modified, added, deleted, renamed or copied."""
    binary: bool = False
    similarity: str = ""
    added: int = 0
    removed: int = 0
    hunks: int = 0
    git: bool = False

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or "?"

    @property
    def title(self) -> str:
        name = self.path
        notes = []
        if self.status in ("renamed", "copied") and self.old_path and self.old_path != name:
            name = f"{self.old_path} → {name}"
            notes.append(f"{self.status} {self.similarity}".strip())
        elif self.status in ("added", "deleted"):
            notes.append("new file" if self.status == "added" else "deleted")
        if self.binary:
            notes.append("binary")
        counts = " ".join(c for c in (f"+{self.added}" if self.added else "",
                                      f"-{self.removed}" if self.removed else "") if c)
        return " ".join(p for p in (name, f"({', '.join(notes)})" if notes else "", counts) if p)


def _unquote(path: str) -> str:
    """Git quotes paths with unusual bytes as C strings: ``"a/t\\303\\251st"``."""
    if len(path) >= 2 and path[0] == path[-1] == '"':
        raw = path[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        return raw.encode("latin-1", "replace").decode("utf-8", "replace")
    return path


def _strip_prefix(path: str | None, prefix: str) -> str | None:
    if path is None or path == "/dev/null":
        return None
    return path[2:] if path.startswith(prefix) else path


def _git_header_paths(rest: str) -> tuple[str, str]:
    """The two paths of ``diff --git a/X b/Y`` (quoted, or split where ``b/`` starts)."""
    quoted = re.match(r'^("(?:[^"\\]|\\.)*"|\S+) ("(?:[^"\\]|\\.)*"|\S+)$', rest)
    if quoted:
        return _unquote(quoted.group(1)), _unquote(quoted.group(2))
    half = (len(rest) - 1) // 2
    if len(rest) % 2 == 1 and rest[half] == " " and rest[2:half] == rest[half + 3 :]:
        return rest[:half], rest[half + 1 :]
    i = rest.find(" b/")
    return (rest[:i], rest[i + 1 :]) if i != -1 else (rest, rest)


def parse_diff(text: str) -> tuple[list[DiffLine], list[DiffFile]]:
    """Parse ``git diff`` (or ``diff -u``) output into lines and files.

    Header lines whose content goes into the file title (``diff --git``, ``index``, ``---``,
    ``+++``) become one ``file`` line; other header lines (modes, renames, binary notices)
    are kept as ``meta``. Hunk line counts decide where a hunk ends, so a removed line that
    reads ``-- x`` is not mistaken for a ``---`` header.
    """
    lines: list[DiffLine] = []
    files: list[DiffFile] = []
    cur: DiffFile | None = None
    old_no = new_no = old_left = new_left = 0
    skip_binary = False
    raw_lines = text.split("\n")
    if raw_lines and raw_lines[-1] == "":
        raw_lines.pop()

    def start_file(git: bool) -> DiffFile:
        nonlocal skip_binary
        skip_binary = False
        f = DiffFile(git=git)
        files.append(f)
        lines.append(DiffLine("file", "", file=len(files) - 1))
        return f

    for raw in raw_lines:
        if raw.endswith("\r"):
            raw = raw[:-1]
        fi = len(files) - 1
        if old_left > 0 or new_left > 0:
            tag = raw[:1]
            if tag in ("+", "-", " ", ""):
                body = _body(raw[1:])
                if tag == "+":
                    lines.append(DiffLine("added", body, None, new_no, fi))
                    new_no += 1
                    new_left -= 1
                    if cur:
                        cur.added += 1
                elif tag == "-":
                    lines.append(DiffLine("removed", body, old_no, None, fi))
                    old_no += 1
                    old_left -= 1
                    if cur:
                        cur.removed += 1
                else:
                    lines.append(DiffLine("context", body, old_no, new_no, fi))
                    old_no += 1
                    new_no += 1
                    old_left -= 1
                    new_left -= 1
                continue
            if tag != "\\":
                old_left = new_left = 0
        if raw.startswith("\\"):
            lines.append(DiffLine("nonewline", raw[2:] if raw.startswith("\\ ") else raw, file=fi))
        elif raw.startswith("diff --git "):
            cur = start_file(git=True)
            a, b = _git_header_paths(raw[len("diff --git "):])
            cur.old_path, cur.new_path = _strip_prefix(a, "a/"), _strip_prefix(b, "b/")
        elif raw.startswith("diff ") and (cur is None or cur.hunks or cur.binary):
            cur = start_file(git=False)  # `diff -ru` names each file; ---/+++ give the paths
        elif raw.startswith("@@"):
            if cur is None:
                cur = start_file(git=False)
            match = _HUNK.match(raw)
            if match:
                old_no, new_no = int(match.group(1)), int(match.group(3))
                old_left = int(match.group(2)) if match.group(2) is not None else 1
                new_left = int(match.group(4)) if match.group(4) is not None else 1
            cur.hunks += 1
            lines.append(DiffLine("hunk", _body(raw), file=len(files) - 1))
        elif raw.startswith("--- "):  # outside a hunk: a header (a new file in `diff -u`)
            if cur is None or cur.hunks:
                cur = start_file(git=False)
            cur.old_path = _header_path(raw, cur)
        elif raw.startswith("+++ ") and cur is not None and not cur.hunks:
            cur.new_path = _header_path(raw, cur)
            if cur.old_path is None and cur.new_path is not None:
                cur.status = "added"
            elif cur.new_path is None:
                cur.status = "deleted"
        elif skip_binary:
            continue
        elif cur is not None and raw.startswith(_HIDDEN_META) and not cur.hunks:
            continue
        else:
            _header_line(raw, cur)
            skip_binary = raw.startswith("GIT binary patch")
            lines.append(DiffLine("meta", _body(raw), file=fi))
    for line in lines:
        if line.kind == "file":
            line.text = files[line.file].title
    return lines, files


def _header_path(raw: str, cur: DiffFile) -> str | None:
    path = _unquote(raw[4:].split("\t", 1)[0])
    if path == "/dev/null":
        return None
    prefix = "a/" if raw.startswith("---") else "b/"
    return _strip_prefix(path, prefix) if cur.git or path.startswith(prefix) else path


def _header_line(raw: str, cur: DiffFile | None) -> None:
    """Fold an extended header line (modes, renames, binary) into the file record."""
    if cur is None:
        return
    if raw.startswith("new file mode"):
        cur.status = "added"
    elif raw.startswith("deleted file mode"):
        cur.status = "deleted"
    elif raw.startswith(("rename from ", "copy from ")):
        cur.status = "renamed" if raw.startswith("rename") else "copied"
        cur.old_path = _unquote(raw.split(" ", 2)[2])
    elif raw.startswith(("rename to ", "copy to ")):
        cur.new_path = _unquote(raw.split(" ", 2)[2])
    elif raw.startswith("similarity index "):
        cur.similarity = raw.rsplit(" ", 1)[-1]
    elif raw.startswith(("Binary files ", "GIT binary patch")):
        cur.binary = True


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


Row = tuple[int, int]
"""Side by side: (left line index, right line index); -1 is a blank half."""


def pair_rows(lines: list[DiffLine]) -> list[Row]:
    """Side-by-side rows: each run of removed lines beside the run of added lines after it."""
    rows: list[Row] = []
    left: list[int] = []
    right: list[int] = []

    def flush() -> None:
        for k in range(max(len(left), len(right))):
            rows.append((left[k] if k < len(left) else -1, right[k] if k < len(right) else -1))
        left.clear()
        right.clear()

    for i, line in enumerate(lines):
        if line.kind == "removed":
            if right:
                flush()
            left.append(i)
        elif line.kind == "added":
            right.append(i)
        elif line.kind == "nonewline" and (right or left):
            (right if right else left).append(i)
        else:
            flush()
            rows.append((i, i))
    flush()
    return rows


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
            text = _CONTROL.sub("\ufffd", line.text)
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
