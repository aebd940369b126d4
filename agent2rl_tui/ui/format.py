"""Formatting shared by the screens: scores, times, statuses (colours from the theme), and
agent-made text as Rich ``Text`` that is shown literally.

Textual parses a plain ``str`` given to ``Static``, ``Label``, ``DataTable`` cells or
``notify`` as markup (``[b]``, ``[link=...]``, ``[@click=...]`` actions); a ``Text`` is
never parsed. So text the agent or its model produced reaches a widget only through
``literal`` (multi-line) or ``literal_line`` (one row), which also show its control
characters as escapes (``util.inert``).
"""

from __future__ import annotations

from datetime import UTC, datetime

from rich.text import Text

from agent2rl_tui.record.store import RunStatus
from agent2rl_tui.util.inert import one_line, visible

STATUS_STYLE: dict[str, str] = {
    RunStatus.RUNNING: "bold $success", RunStatus.PREPARING: "$warning", RunStatus.CREATED: "$warning",
    RunStatus.ENDING: "$warning", RunStatus.FINISHED: "$text", RunStatus.STOPPED: "$text-muted",
    RunStatus.FAILED: "bold $error", RunStatus.LOST: "bold $error",
}
_RICH_STATUS: dict[str, str] = {
    RunStatus.RUNNING: "bold green", RunStatus.PREPARING: "yellow", RunStatus.CREATED: "yellow",
    RunStatus.ENDING: "yellow", RunStatus.FINISHED: "", RunStatus.STOPPED: "dim", RunStatus.FAILED: "bold red",
    RunStatus.LOST: "bold red",
}


def fmt_score(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:+.2f}" if signed else f"{x:.2f}"


def fmt_time(ts: float | None, now: float) -> str:
    """Today's times as HH:MM, older ones with the date (UTC, like the record)."""
    if ts is None:
        return "-"
    d = datetime.fromtimestamp(ts, tz=UTC)
    today = datetime.fromtimestamp(now, tz=UTC).date()
    return d.strftime("%H:%M") if d.date() == today else d.strftime("%Y-%m-%d %H:%M")


def status_text(status: str) -> Text:
    return Text(status, style=_RICH_STATUS.get(status, ""))


def fmt_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(size)


def literal(text: object, style: str = "") -> Text:
    """Agent-made text for a detail view: never markup, controls as escapes, lines kept."""
    return Text(visible("" if text is None else str(text)), style=style)


def literal_line(text: object, style: str = "") -> Text:
    """Agent-made text for one row (a table cell, a title): ``literal``, on one line."""
    return Text(one_line("" if text is None else str(text)), style=style)
