"""The agent's own running summary: ``summary.md`` in its workspace, kept as the reference asks.

The agent's instructions ask it to append a section to ``summary.md`` after every attempt
(what it did, why, the score, the training type, the key configuration, problems). The file is
captured in the revisions like any other; the report and the Iterations pane show it beside
our own diagnosis, and the optional narrative reads it. It is the agent's word, never a
measurement: read without following a link or waiting on a FIFO, capped, control characters
shown as escapes.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from agent2rl_tui.record.capture import open_regular, read_capped
from agent2rl_tui.util.inert import visible

SUMMARY_FILE = "summary.md"
"""At the workspace's root."""
SUMMARY_CAP_BYTES = 64 << 10
SUMMARY_PART_CHARS = 6000
"""What of summary.md goes with one iteration, at most."""


def read_regular_nofollow(path: Path, cap: int) -> tuple[bytes, bool] | None:
    """A regular file's first ``cap`` bytes and whether there was more; None when it cannot be
    read as one (absent, a link, a FIFO, a folder). Its folder is opened without following a link."""
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        with open_regular(path.name, dir_fd=dir_fd) as (fh, _st):
            data = read_capped(fh, cap)
    except OSError:
        return None
    finally:
        os.close(dir_fd)
    return data[:cap], len(data) > cap


def read_summary(run_dir: Path) -> str | None:
    """The agent's summary.md (its first `SUMMARY_CAP_BYTES`), control characters as escapes;
    None when there is none it can be read as a regular file."""
    got = read_regular_nofollow(Path(run_dir) / "workspace" / SUMMARY_FILE, SUMMARY_CAP_BYTES)
    if got is None:
        return None
    data, more = got
    text = visible(data.decode("utf-8", "replace"))
    return text + ("\n[... cut: summary.md is longer]" if more else "")


_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:\s|$)")
_NAMED = re.compile(r"(?i)(?:\b(?:iteration|iter|attempt|round|try|experiment|version|submission|sub|step|v)"
                    r"\s*[#:.\-]?\s*|#)(\d+)\b")


def sections_about(summary: str | None, iteration: int) -> str | None:
    """The sections of summary.md whose headings name ``iteration`` ("## Attempt 2", "## Iteration 2"),
    with their sub-sections, capped; None when no heading names it."""
    if summary is None:
        return None
    picked: list[str] = []
    level = 0  # inside a picked section of this heading level (0: not inside one)
    for line in summary.splitlines():
        m = _HEADING.match(line)
        if m:
            depth = len(m.group(1))
            if level and depth <= level:
                level = 0
            if not level and any(int(n) == iteration for n in _NAMED.findall(line)):
                level = depth
        if level:
            picked.append(line)
    return cap_text("\n".join(picked), SUMMARY_PART_CHARS) if picked else None


def summary_part(summary: str | None, iteration: int) -> tuple[str, str]:
    """What of summary.md goes with ``iteration``: the sections about it, else the whole file
    (capped); and a label saying which."""
    if summary is None:
        return "none", "(the agent wrote no summary.md)"
    part = sections_about(summary, iteration)
    if part is not None:
        return f"the sections of summary.md about iteration {iteration}", part
    return (f"all of summary.md: no heading of it names iteration {iteration}", cap_text(summary, SUMMARY_PART_CHARS))


def cap_text(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars] + "\n[... cut]"
