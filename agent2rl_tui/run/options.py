"""Every option of a run, derived from the fields that hold it.

A run's options reach it three ways: ``run start``'s flags, the New Run form's fields, and a
campaign file's ``[options]`` table. Each option is declared once, on the field that holds its
value: ``RunRequest``'s own fields (run/request.py: the task, the agent, the budget, what the
run's creation resolves) and ``RunConfig``'s (record/runconfig.py: what is recorded as given),
each carrying a ``record.setting.Setting`` in its metadata: its flags with their help, its
group, its campaign key, how flags' and campaign values become its value, where it is checked.
This module gathers them: ``OPTIONS`` in ``--help`` order (the settings' ranks), ``flags()`` for
the CLI (``cli.flags._click_option`` renders each as a click option), ``flag()`` for the New Run form,
``CAMPAIGN_OPTIONS`` for campaign files, and the two ways to a ``RunRequest``. (Harlequin
declares its adapters' options the same way, as objects its CLI turns into click options.)

This module is headless: it knows no click.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent2rl_tui.record.runconfig import JUDGE_FLAGS, SEARCH_FLAGS, SUMMARIZER_FLAGS, RunConfig
from agent2rl_tui.record.setting import Flag, FormField, OptionValueError, Setting, parse_pairs, setting_of
from agent2rl_tui.run.request import RunRequest

__all__ = ["JUDGE_FLAGS", "SEARCH_FLAGS", "SUMMARIZER_FLAGS", "Flag", "FormField", "OptionValueError", "parse_pairs",
           "RunOption", "declared", "OPTIONS", "BY_FIELD", "CAMPAIGN_OPTIONS", "flags", "flag", "request_from_flags",
           "request_fields_from_campaign"]


@dataclass(frozen=True)
class RunOption:
    """One option: the field that holds it (of ``RunRequest``, or of its ``RunConfig``) and how
    it is given."""

    field: str
    setting: Setting
    in_config: bool
    """A field of ``RunConfig`` (recorded as given), else of ``RunRequest`` itself."""

    @property
    def group(self) -> str:
        return self.setting.group

    @property
    def flags(self) -> tuple[Flag, ...]:
        return self.setting.flags

    @property
    def campaign(self) -> str | None:
        return self.setting.campaign

    @property
    def check(self) -> str | None:
        return self.setting.check

    def value_from_flags(self, values: Mapping[str, Any]) -> Any:
        return self.setting.value_from_flags(values)

    def value_from_campaign(self, value: Any) -> Any:
        return self.setting.value_from_campaign(value)


def declared(request: type[Any] = RunRequest, config: type[RunConfig] = RunConfig) -> tuple[RunOption, ...]:
    """The options the fields of ``request`` and ``config`` declare, in ``--help`` order."""
    found = [RunOption(f.name, s, owner is config)
             for owner in (request, config) for f in dataclasses.fields(owner)
             if (s := setting_of(f)) is not None]
    return tuple(sorted(found, key=lambda o: o.setting.rank))


OPTIONS: tuple[RunOption, ...] = declared()
"""Every run option, in the order ``run start --help`` lists their flags."""

BY_FIELD: dict[str, RunOption] = {o.field: o for o in OPTIONS}
CAMPAIGN_OPTIONS: dict[str, RunOption] = {o.campaign: o for o in OPTIONS if o.campaign}
"""A campaign file's ``[options]`` keys and the options they give."""


def flags() -> list[Flag]:
    """Every flag of every option, in ``--help`` order."""
    return [f for o in OPTIONS for f in o.flags]


def flag(name: str) -> Flag:
    """The flag named ``name`` (``--judge-url``)."""
    return next(f for f in flags() if f.name == name)


def request_from_flags(values: Mapping[str, Any], **extra: Any) -> RunRequest:
    """A ``RunRequest`` from flags' values keyed by ``Flag.dest`` (as click hands them; an absent
    one takes its declared default); ``extra`` sets fields no flag gives (``root``)."""
    given = {**{f.dest: f.default for f in flags()}, **values}
    return RunRequest.of(**{o.field: o.value_from_flags(given) for o in OPTIONS}, **extra)


def request_fields_from_campaign(options: Mapping[str, Any]) -> dict[str, Any]:
    """The fields (``RunRequest.of``'s) a campaign's ``[options]`` give (known keys only: the
    file's reader refuses the others)."""
    return {CAMPAIGN_OPTIONS[k].field: CAMPAIGN_OPTIONS[k].value_from_campaign(v) for k, v in options.items()}
