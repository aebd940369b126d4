"""Text the agent or its model produced, made inert wherever it is shown: one rule, one place.

An agent controls its output, its transcript, the names and contents of the files it writes,
the ``model_path`` of its submissions (and so the errors that quote it), and its model's
outputs. Shown raw, such text drives the reader's terminal (OSC 52 writes the clipboard,
OSC 0 the window title, ``ESC c`` resets the terminal, an 8-bit CSI does what ``ESC [``
does), reorders what is read (bidi overrides), forges rows (a newline in a table cell), or
forges a report (markdown). So every front end (CLI printers, TUI panes, report.md) shows
agent-made text through these functions, and nothing else decides what is safe to show:

- ``visible(text)``: multi-line text (a log line, a step, a file's content). Every control
  and format character except newline and tab is replaced by an escape that reads like
  Python's: ``\\x1b``, ``\\x9b``, ``\\r``, ``\\u202e``, ``\\U000e0041``.
- ``one_line(text)``: one record, one row (a table cell, a CLI row, a path): newline, tab
  and carriage return are escapes too, so the text can never start a row of its own.
- ``md_escape(text)`` / ``md_code(text)``: text inside a markdown report, as prose or as a
  code span: one line, and markdown's syntax characters escaped, so it cannot open a
  heading, a table row, emphasis, a link (a bare URL included), HTML or an entity.

What counts as a control: the Unicode categories Cc (C0, DEL, C1), Cf (format: bidi
embeddings, overrides and isolates, zero-width characters, the byte-order mark, tag
characters), Zl and Zp (line and paragraph separators, which some readers break lines at),
and Cs (lone surrogates, which cannot even be encoded for a terminal). A backslash is
left as it is: an agent may write the characters ``\\x1b`` literally, which is text, not a
control. Rich/Textual markup is the UI's concern (``ui.format``): it builds ``Text``
objects from these strings and never parses them as markup.

Cheap by design, because logs and diffs are drawn line by line: text with nothing to escape
is found with ``str.isprintable`` and returned as is (the same object); other text takes one
compiled-regex substitution, each escape looked up in a dict once it has been made.
Standard library only, at the bottom layer, so the record, the CLI and the UI share it.
"""

from __future__ import annotations

import re

# Code points of categories Cc, Cf, Zl, Zp and Cs (Unicode 15.1; tests check it against
# the interpreter's unicodedata, so a newer Unicode that adds one fails the test here).
_RANGES: tuple[tuple[int, int], ...] = (
    (0x0000, 0x001F), (0x007F, 0x009F), (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C),
    (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E),
    (0x200B, 0x200F), (0x2028, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0xD800, 0xDFFF),
    (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD),
    (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)
"""Every character these functions escape (newline and tab only in ``one_line``)."""


def _class(ranges: tuple[tuple[int, int], ...], keep: str = "") -> re.Pattern[str]:
    parts = []
    for lo, hi in ranges:
        chars = [c for c in range(lo, hi + 1) if chr(c) not in keep] if lo < 0x20 else None
        if chars is not None:  # the C0 range, less the characters kept
            parts += [re.escape(chr(c)) for c in chars]
        else:
            parts.append(f"\\U{lo:08x}-\\U{hi:08x}" if lo != hi else f"\\U{lo:08x}")
    return re.compile("[" + "".join(parts) + "]")


_ANY = _class(_RANGES)
_MULTI = _class(_RANGES, keep="\n\t")


class _Escapes(dict[str, str]):
    """Each character's escape, made the first time it is met (a dict lookup after that)."""

    def __missing__(self, c: str) -> str:
        o = ord(c)
        escape = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(c) or (
            f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}")
        self[c] = escape
        return escape


_ESCAPES = _Escapes()


def _escape(match: re.Match[str]) -> str:
    return _ESCAPES[match.group()]


def visible(text: str) -> str:
    """``text`` with every control and format character shown as an escape, except newline
    and tab (multi-line text stays multi-line)."""
    if text.isprintable() or text.replace("\n", "").replace("\t", "").isprintable():
        return text
    return _MULTI.sub(_escape, text)


def one_line(text: str) -> str:
    """``text`` as one row: ``visible``, and newline, tab and carriage return escaped too."""
    if text.isprintable():
        return text
    return _ANY.sub(_escape, text)


def is_inert(text: str, *, multi_line: bool = False) -> bool:
    """Nothing in ``text`` would be escaped (``multi_line``: newlines and tabs allowed)."""
    return (visible(text) if multi_line else one_line(text)) == text


# -- markdown ------------------------------------------------------------------------------

_MD_INLINE = re.compile(r"([\\`*_\[\]<>!&|~#.:])")
"""Characters that start markdown syntax anywhere in a line (GFM: tables, strikethrough; and
``.`` and ``:``, without which no bare URL, domain or e-mail address is made a link)."""
_MD_LINE_START = re.compile(r"^(\d*)([-+=)])")
"""What starts a block (a list, a thematic break, a setext underline) at the start of a line."""


def md_escape(text: str) -> str:
    """``text`` as literal markdown prose on one line: a table cell or a list item's words.

    Safe at the start of a line too: a leading space becomes ``&#32;`` (four would make an
    indented code block) and a leading list or break marker is escaped."""
    escaped = _MD_INLINE.sub(r"\\\1", one_line(text))
    if escaped.startswith(" "):
        return "&#32;" + escaped[1:]
    return _MD_LINE_START.sub(r"\1\\\2", escaped)


def md_code(text: str, *, in_table: bool = True) -> str:
    """``text`` as a markdown code span: shown literally (no emphasis, links, HTML or
    entities), on one line; its fence is longer than any run of backticks in it, and in a
    table its ``|`` is escaped (GFM removes that backslash before reading the span)."""
    line = one_line(text)
    if in_table:
        line = line.replace("|", "\\|")
    longest = max((len(run) for run in re.findall("`+", line)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if line.startswith(("`", " ")) or line.endswith(("`", " ")) or not line else ""
    return f"{fence}{pad}{line}{pad}{fence}"


def md_block(text: str) -> str:
    """Multi-line ``text`` as a markdown fenced code block: shown literally, lines kept. Its
    fence is longer than any run of backticks in it, so no line of it can close the block."""
    body = visible(text).rstrip("\n")
    longest = max((len(run) for run in re.findall("`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{body}\n{fence}"
