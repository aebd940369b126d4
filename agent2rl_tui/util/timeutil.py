"""Time helpers shared by the record, the CLI and the reports.

The record stores instants as UNIX seconds (floats) so that durations are plain
subtraction; everything a human reads is rendered as UTC ISO-8601.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import overload

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def now() -> float:
    """Wall-clock time in UNIX seconds."""
    return time.time()


@overload
def iso(ts: float) -> str: ...


@overload
def iso(ts: None) -> None: ...


@overload
def iso(ts: float | None) -> str | None: ...


def iso(ts: float | None) -> str | None:
    """UTC ISO-8601 with milliseconds and a Z, or None."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def compact_utc(ts: float) -> str:
    """``yyyymmddThhmmss`` in UTC, the prefix of a run id."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y%m%dT%H%M%S")


def parse_duration(text: str) -> float:
    """Parse ``90``, ``90s``, ``5m``, ``1.5h``, ``2d`` into seconds.

    Raises ValueError with a message that says what is accepted.
    """
    m = _DURATION.match(str(text))
    if not m:
        raise ValueError(
            f"cannot read the duration {text!r}: use a number with an optional unit "
            "s, m, h or d, e.g. 90s, 5m, 1.5h"
        )
    seconds = float(m.group(1)) * _UNIT_SECONDS[m.group(2).lower()]
    if seconds <= 0:
        raise ValueError(f"the duration {text!r} must be greater than zero")
    return seconds


def human_duration(seconds: float | None) -> str:
    """``1h02m03s`` style, for tables and progress lines."""
    if seconds is None:
        return "-"
    s = int(round(max(0.0, seconds)))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h}h{m:02d}m{sec:02d}s"
    if m:
        return f"{m}m{sec:02d}s"
    return f"{sec}s"
