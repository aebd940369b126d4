"""How a run setting is given, carried by the dataclass field that holds it.

A run's settings are fields: what is recorded as given is a field of ``RunConfig``
(``record.runrecord``), what the run's creation turns into something else (the task, the
budget, ``--eval-timeout`` resolved against the task, ``--env``'s values) a field of
``RunRequest`` (``run.request``). Each such field says, in its metadata, how a person gives
it: its ``run start`` flag(s) with their help, its field on the New Run form, its key in a
campaign file, how the flags' values become its value, and where it is checked. This is the
way TRL's config dataclasses carry each argument's help in ``field(metadata=...)``: the front
ends (``run.options``, the CLI, the New Run form, campaigns) derive everything from the
fields, so a new option is one field plus the code that uses it.

This module is headless: it knows no click. A flag's type is a plain word (``kind``) with its
bounds, which the CLI renders as a click type.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

META_KEY = "agent2rl_tui.setting"


class OptionValueError(ValueError):
    """A flag's value that does not read (``--env X`` without ``=``); ``flag`` names it, so the
    CLI reports it as a bad parameter of that flag."""

    def __init__(self, message: str, flag: str) -> None:
        super().__init__(message)
        self.flag = flag


@dataclass(frozen=True)
class FormField:
    """How the New Run form shows a flag: its label and the empty input's placeholder (the
    widget's id is the flag's name without ``--``)."""

    label: str
    placeholder: str = ""


@dataclass(frozen=True)
class Flag:
    """One CLI flag of ``run start``; ``dest`` is the name click hands its value under."""

    name: str
    dest: str
    help: str | None = None
    kind: str = "text"
    """text, path, int, float, choice or flag (a boolean switch)."""
    default: Any = None
    show_default: bool = False
    required: bool = False
    multiple: bool = False
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    """The accepted values of a ``choice``."""
    bounds: tuple[int, int] | None = None
    """An ``int``'s accepted range, both ends included."""
    exists: bool = False
    """A ``path`` that must exist."""
    dir_okay: bool = True
    """A ``path`` that may be a folder."""
    form: FormField | None = None
    """Where the New Run form shows this flag: its field there."""

    @property
    def widget_id(self) -> str:
        return self.name.removeprefix("--")


@dataclass(frozen=True)
class Setting:
    """How one field is given (its metadata): flags, campaign key, conversions, check."""

    rank: float
    """Its place among ``run start``'s options in ``--help`` (ascending)."""
    group: str
    """task, agent, budget, driver, meter, eval, containment, engine, judge, search, webshop store, summarizer."""
    flags: tuple[Flag, ...]
    """Its ``run start`` flags, in the order ``--help`` lists them."""
    campaign: str | None = None
    """Its key in a campaign file's ``[options]``; None: a campaign sets it per cell or not at all."""
    from_flags: Callable[[Mapping[str, Any]], Any] | None = None
    """The field's value from the flags' values (keyed by ``Flag.dest``); None: the one flag's value as it is."""
    from_campaign: Callable[[Any], Any] | None = None
    """The field's value from the campaign value; None: the value as it is."""
    check: str | None = None
    """Where the value is checked before a run is made (for the reader; the preflight calls it)."""

    def value_from_flags(self, values: Mapping[str, Any]) -> Any:
        if self.from_flags is not None:
            return self.from_flags(values)
        return values.get(self.flags[0].dest)

    def value_from_campaign(self, value: Any) -> Any:
        return value if self.from_campaign is None else self.from_campaign(value)


def setting(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING,
            rank: float, group: str, flags: tuple[Flag, ...], campaign: str | None = None,
            from_flags: Callable[[Mapping[str, Any]], Any] | None = None,
            from_campaign: Callable[[Any], Any] | None = None, check: str | None = None,
            metadata: Mapping[str, Any] | None = None) -> Any:
    """A dataclass field given by ``run start``'s flags (and a campaign key, and the New Run form)."""
    meta = {**(metadata or {}), META_KEY: Setting(rank, group, flags, campaign, from_flags, from_campaign, check)}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def setting_of(f: dataclasses.Field[Any]) -> Setting | None:
    """The field's ``Setting``, None for a field no one gives (derived or written by the run)."""
    found = f.metadata.get(META_KEY)
    return found if isinstance(found, Setting) else None


def parse_pairs(pairs: tuple[str, ...], flag: str) -> dict[str, str]:
    """``KEY=VALUE`` strings as a dict (the key stripped); a string without ``=`` is refused."""
    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise OptionValueError(f"{pair!r} is not KEY=VALUE", flag)
        key, value = pair.split("=", 1)
        out[key.strip()] = value
    return out


def paths_of(dest: str) -> Callable[[Mapping[str, Any]], tuple[str, ...]]:
    """A repeatable path flag's values as strings."""
    return lambda values: tuple(map(str, values.get(dest) or ()))
