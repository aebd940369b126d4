"""Unified diffs as data: ``git diff`` text parsed into files, hunks and numbered lines.

The record produces the diffs between workspace revisions (revisions.py, from
snapshots.git); whatever shows or checks them (the TUI's diff view, tests, reports) needs the
same reading of that text: which file each line belongs to, its old and new line numbers,
added or removed, and the file's status (added, deleted, renamed, binary). This module is
that reading, headless and standard library only. It also pairs removed and added lines for
a side-by-side layout, since that pairing is a property of the diff, not of its drawing.

Parsing is linear and cheap (a few ms for 4,000 lines); nothing is highlighted or styled here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

LineKind = Literal["file", "meta", "hunk", "context", "added", "removed", "nonewline", "empty"]

MAX_LINE_CHARS = 10_000
"""Longer lines (minified files) are cut: a row is built whole before it is cropped."""

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_HIDDEN_META = ("index ", "+++ ")  # header lines whose content goes into the file title
_QUOTED_PAIR = re.compile(r'^("(?:[^"\\]|\\.)*"|\S+) ("(?:[^"\\]|\\.)*"|\S+)$')


@dataclass(slots=True)
class DiffLine:
    """One line of the diff: its role, its text (without the +/-/space marker), numbers."""

    kind: LineKind
    text: str
    old_no: int | None = None
    new_no: int | None = None
    file: int = -1
    """Index of the line's file in the parsed files; -1 before the first file."""


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
        """One line: the path (old → new for a rename), notes (new file, binary…), +/- counts."""
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


def parse_diff(text: str) -> tuple[list[DiffLine], list[DiffFile]]:
    """Parse ``git diff`` (or ``diff -u``) output into lines and files.

    Header lines whose content goes into the file title (``diff --git``, ``index``, ``---``,
    ``+++``) become one ``file`` line; other header lines (modes, renames, binary notices)
    are kept as ``meta``. Hunk line counts decide where a hunk ends, so a removed line that
    reads ``-- x`` is not mistaken for a ``---`` header.
    """
    return _Parser().parse(text)


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


# --- the parser ------------------------------------------------------------------------------

class _Parser:
    """One pass over the diff's lines; a hunk's remaining counts tell body from header."""

    def __init__(self) -> None:
        self.lines: list[DiffLine] = []
        self.files: list[DiffFile] = []
        self.cur: DiffFile | None = None
        self.old_no = self.new_no = 0  # numbers of the next old / new line in the hunk
        self.old_left = self.new_left = 0  # lines still due in the hunk
        self.skip_binary = False  # inside a `GIT binary patch` body

    def parse(self, text: str) -> tuple[list[DiffLine], list[DiffFile]]:
        raw_lines = text.split("\n")
        if raw_lines and raw_lines[-1] == "":
            raw_lines.pop()
        for raw in raw_lines:
            self._feed(raw[:-1] if raw.endswith("\r") else raw)
        for line in self.lines:
            if line.kind == "file":
                line.text = self.files[line.file].title
        return self.lines, self.files

    @property
    def _file_index(self) -> int:
        return len(self.files) - 1

    def _feed(self, raw: str) -> None:
        if self.old_left > 0 or self.new_left > 0:
            if raw[:1] in ("+", "-", " ", ""):
                self._body_line(raw)
                return
            if not raw.startswith("\\"):
                self.old_left = self.new_left = 0  # the hunk was shorter than its header said
        self._outside_body(raw)

    def _body_line(self, raw: str) -> None:
        tag, body, fi = raw[:1], _body(raw[1:]), self._file_index
        if tag == "+":
            self.lines.append(DiffLine("added", body, None, self.new_no, fi))
            self.new_no, self.new_left = self.new_no + 1, self.new_left - 1
            if self.cur:
                self.cur.added += 1
        elif tag == "-":
            self.lines.append(DiffLine("removed", body, self.old_no, None, fi))
            self.old_no, self.old_left = self.old_no + 1, self.old_left - 1
            if self.cur:
                self.cur.removed += 1
        else:  # a space, or nothing where a tool stripped the blank context line
            self.lines.append(DiffLine("context", body, self.old_no, self.new_no, fi))
            self.old_no, self.old_left = self.old_no + 1, self.old_left - 1
            self.new_no, self.new_left = self.new_no + 1, self.new_left - 1

    def _outside_body(self, raw: str) -> None:
        cur = self.cur
        if raw.startswith("\\"):
            text = raw[2:] if raw.startswith("\\ ") else raw
            self.lines.append(DiffLine("nonewline", text, file=self._file_index))
        elif raw.startswith("diff --git "):
            self._git_file(raw[len("diff --git "):])
        elif raw.startswith("diff ") and (cur is None or cur.hunks or cur.binary):
            self._start_file(git=False)  # `diff -ru` names each file; ---/+++ give the paths
        elif raw.startswith("@@"):
            self._hunk_header(raw)
        elif raw.startswith("--- "):  # outside a hunk: a header (a new file in `diff -u`)
            self._old_path(raw)
        elif raw.startswith("+++ ") and cur is not None and not cur.hunks:
            self._new_path(raw, cur)
        elif self.skip_binary:
            return
        elif cur is not None and raw.startswith(_HIDDEN_META) and not cur.hunks:
            return
        else:
            self._meta(raw)

    def _start_file(self, *, git: bool) -> DiffFile:
        self.skip_binary = False
        self.cur = DiffFile(git=git)
        self.files.append(self.cur)
        self.lines.append(DiffLine("file", "", file=self._file_index))
        return self.cur

    def _git_file(self, rest: str) -> None:
        cur = self._start_file(git=True)
        a, b = _git_header_paths(rest)
        cur.old_path, cur.new_path = _strip_prefix(a, "a/"), _strip_prefix(b, "b/")

    def _hunk_header(self, raw: str) -> None:
        cur = self.cur if self.cur is not None else self._start_file(git=False)
        match = _HUNK.match(raw)
        if match:
            self.old_no, self.new_no = int(match.group(1)), int(match.group(3))
            self.old_left = int(match.group(2)) if match.group(2) is not None else 1
            self.new_left = int(match.group(4)) if match.group(4) is not None else 1
        cur.hunks += 1
        self.lines.append(DiffLine("hunk", _body(raw), file=self._file_index))

    def _old_path(self, raw: str) -> None:
        cur = self.cur
        if cur is None or cur.hunks:
            cur = self._start_file(git=False)
        cur.old_path = _header_path(raw, cur)

    def _new_path(self, raw: str, cur: DiffFile) -> None:
        cur.new_path = _header_path(raw, cur)
        if cur.old_path is None and cur.new_path is not None:
            cur.status = "added"
        elif cur.new_path is None:
            cur.status = "deleted"

    def _meta(self, raw: str) -> None:
        fi = self._file_index
        if self.cur is not None:
            _fold_header_line(raw, self.cur)
        self.skip_binary = raw.startswith("GIT binary patch")
        self.lines.append(DiffLine("meta", _body(raw), file=fi))


# --- header lines ----------------------------------------------------------------------------

def _body(text: str) -> str:
    """A line's text as shown: tabs expanded, cut at ``MAX_LINE_CHARS``."""
    text = text.expandtabs(4)
    return text if len(text) <= MAX_LINE_CHARS else text[: MAX_LINE_CHARS - 1] + "…"


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
    quoted = _QUOTED_PAIR.match(rest)
    if quoted:
        return _unquote(quoted.group(1)), _unquote(quoted.group(2))
    half = (len(rest) - 1) // 2
    if len(rest) % 2 == 1 and rest[half] == " " and rest[2:half] == rest[half + 3 :]:
        return rest[:half], rest[half + 1 :]
    i = rest.find(" b/")
    return (rest[:i], rest[i + 1 :]) if i != -1 else (rest, rest)


def _header_path(raw: str, cur: DiffFile) -> str | None:
    """The path of a ``---`` / ``+++`` line; None for /dev/null."""
    path = _unquote(raw[4:].split("\t", 1)[0])
    if path == "/dev/null":
        return None
    prefix = "a/" if raw.startswith("---") else "b/"
    return _strip_prefix(path, prefix) if cur.git or path.startswith(prefix) else path


def _fold_header_line(raw: str, cur: DiffFile) -> None:
    """Fold an extended header line (modes, renames, binary) into the file record."""
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
