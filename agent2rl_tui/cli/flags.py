"""The run options declared once (``run.options``) as click options: ``run start``'s and ``report``'s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from agent2rl_tui.run.options import SUMMARIZER_FLAGS, Flag


def _click_option(flag: Flag) -> Any:
    """A declared flag (``run.options.Flag``) as a click option."""
    kw: dict[str, Any] = {}
    if flag.kind == "flag":
        kw["is_flag"] = True
    elif flag.kind == "path":
        kw["type"] = click.Path(path_type=Path, exists=flag.exists, dir_okay=flag.dir_okay)
    elif flag.kind == "choice":
        kw["type"] = click.Choice(list(flag.choices))
    elif flag.kind == "int":
        kw["type"] = click.IntRange(*flag.bounds) if flag.bounds else int
    elif flag.kind == "float":
        kw["type"] = float
    for key in ("help", "default", "metavar"):
        if getattr(flag, key) is not None:
            kw[key] = getattr(flag, key)
    for key in ("show_default", "required", "multiple"):
        if getattr(flag, key):
            kw[key] = True
    return click.option(flag.name, flag.dest, **kw)


def _options(flags: list[Flag]) -> Any:
    """A decorator giving a command these declared flags, in this order."""
    def apply(command: Any) -> Any:
        for flag in reversed(flags):
            command = _click_option(flag)(command)
        return command
    return apply


_summarizer_options = _options(list(SUMMARIZER_FLAGS))
"""``--summarizer-url/--summarizer-model/--summarizer-key-env``: the optional narrative's endpoint."""
