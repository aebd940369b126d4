"""The pieces the HTML report is built of: text made inert and escaped, capped sections, tables.

Everything the agent made (paths, errors, code, transcript text, item prompts and outputs,
file names, even the run id) reaches HTML only through ``text`` (one line) or ``pre`` (many
lines): cut to a length, control and format characters shown as escapes
(``util.inert.one_line`` / ``visible``), then ``html.escape(..., quote=True)``. Such text only
ever stands in an element's content, never in an attribute, a tag name, a URL or a style;
attribute values and ids are our own words and numbers. ``Capped`` holds the HTML of one
section up to a byte budget and counts what it had to leave out.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

from agent2rl_tui.util.inert import one_line, visible

MAX_FIELD = 2_000
"""Characters shown of one field the agent made (a path, an error, a code line, a prompt)."""

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
"""The page's Content-Security-Policy: no script, no request, inline styles and data: images only."""

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:0 16px 48px;color:#1d1d1f}
h1{font-size:22px;margin:18px 0 4px}h2{font-size:18px;border-bottom:1px solid #ddd;margin-top:28px}
nav a{margin-right:12px}code,pre,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f6f8;padding:6px 8px;margin:4px 0}
table{border-collapse:collapse;margin:8px 0}th,td{border:1px solid #ddd;padding:3px 6px;vertical-align:top;text-align:left}
th{background:#f0f0f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.text{white-space:pre-wrap;max-width:760px}td.text,td code,td .bad{overflow-wrap:anywhere}
details{margin:6px 0;border:1px solid #e3e3e8;border-radius:4px;padding:4px 8px}
summary{cursor:pointer;font-weight:600}dl{display:grid;grid-template-columns:max-content auto;gap:2px 14px}
dt{color:#555}dd{margin:0}.bad{color:#b00020;font-weight:600}.good{color:#1a7f37;font-weight:600}
.note{color:#666}.cut{color:#8a5a00;font-style:italic}svg{max-width:100%;height:auto}
"""


def clip(value: Any, limit: int = MAX_FIELD) -> tuple[str, int]:
    """``value`` as a string of at most ``limit`` characters, and how many were cut."""
    s = "" if value is None else value if isinstance(value, str) else str(value)
    return (s, 0) if len(s) <= limit else (s[:limit], len(s) - limit)


def _more(n: int) -> str:
    return f'<span class="cut">… {n:,} more characters</span>' if n else ""


def text(value: Any, limit: int = MAX_FIELD) -> str:
    """Agent-made text for an element's content, as one line (``-`` for none)."""
    if value is None or value == "":
        return "-"
    s, cut = clip(value, limit)
    return html.escape(one_line(s), quote=True) + _more(cut)


def block(value: Any, limit: int = MAX_FIELD) -> str:
    """Agent-made multi-line text, lines kept, escaped (for a ``<pre>`` or a ``text`` cell)."""
    s, cut = clip(value, limit)
    return html.escape(visible(s), quote=True) + _more(cut)


def pre(value: Any, limit: int = MAX_FIELD) -> str:
    return f"<pre>{block(value, limit)}</pre>"


def code(value: Any, limit: int = MAX_FIELD) -> str:
    return f"<code>{text(value, limit)}</code>"


def num(x: Any, nd: int = 2) -> str:
    """A number of ours (a score, seconds); anything else is escaped as text."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:,.{nd}f}"
    if isinstance(x, int):
        return f"{x:,}"
    return text(x)


def signed(x: float | None, nd: int = 2) -> str:
    return "-" if x is None else f"{x:+.{nd}f}"


def row(cells: Iterable[str], numeric: Iterable[int] = ()) -> str:
    """One table row of ready HTML cells; ``numeric``: the right-aligned columns."""
    right = set(numeric)
    return "<tr>" + "".join(f'<td class="num">{c}</td>' if i in right else f"<td>{c}</td>"
                            for i, c in enumerate(cells)) + "</tr>\n"


def table_of(headers: Iterable[str], body: str) -> str:
    """A table of ready rows (``headers`` are our words)."""
    head = "".join(f"<th>{h}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table>"


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], *, numeric: Iterable[int] = ()) -> str:
    """A table of ready HTML cells; ``numeric``: the right-aligned columns."""
    numeric = tuple(numeric)
    return table_of(headers, "".join(row(cells, numeric) for cells in rows))


class Capped:
    """HTML pieces up to ``limit`` bytes (UTF-8); pieces past it are counted, not kept."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.dropped = 0

    def add(self, piece: str) -> bool:
        n = len(piece.encode("utf-8"))
        if self.dropped or self.size + n > self.limit:
            self.dropped += 1
            return False
        self.parts.append(piece)
        self.size += n
        return True

    def html(self) -> str:
        return "".join(self.parts)


def page(title: str, heading: str, sections: Iterable[tuple[str, str, str]], footer: str, *, css: str = CSS) -> str:
    """A whole page: no script, no request (``CSP``); ``title`` and ``heading`` ready HTML, ``sections``
    (id, heading, ready HTML) in order with a nav to each, ``footer`` the closing paragraph's HTML."""
    parts = list(sections)
    nav = "".join(f'<a href="#{key}">{name}</a>' for key, name, _ in parts)
    body = "".join(f'<section id="{key}"><h2>{name}</h2>\n{html_}\n</section>\n' for key, name, html_ in parts)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            '<meta name="referrer" content="no-referrer">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{title}</title>\n<style>{css}</style></head>\n<body>\n"
            f"{heading}\n<nav>{nav}</nav>\n{body}"
            f'<footer class="note"><p>{footer}</p></footer>\n</body></html>\n')
