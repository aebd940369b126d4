"""A task's ``[env]`` section, typed per environment kind, and the kinds' register.

Every kind's module declares its own spec (a frozen dataclass over ``EnvSpec``, with the keys
only that kind takes) and registers it with its maker (``register``), so adding an environment
is adding one module under ``envs/``: the register finds the modules itself (``kinds``). A
table is read once (``EnvSpec.from_table``): an unknown kind, an unknown key, a key of the
wrong type or a missing required one is refused with the key named and what to write instead;
the task loader runs the same check on every task it loads (``check_task``), naming the file.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Union

from agent2rl_tui.envs.base import EnvError, Environment
from agent2rl_tui.util.numbers import ascii_int

TRANSCRIPTS = ("plain", "react", "search-react", "webshop")
PROFILE_TRANSCRIPTS = ("search-react-reference", "webshop-reference")
"""Layouts a prompt profile may name over its task's (the reference's own loops, quirks kept)."""

GIVEN = {"given": True}
"""Field metadata of a spec value the run or the task's data gives, never the ``[env]`` table."""


@dataclass(frozen=True, kw_only=True)
class EnvSpec:
    """The keys every kind's ``[env]`` takes: the episode's limits and how it is written.

    A kind's spec subclasses it with its own keys and names its ``kind``; ``from_table`` gives
    the spec of the table's kind.
    """

    kind: ClassVar[str] = ""
    """The ``[env] kind`` this spec reads (set by each kind's subclass)."""
    max_steps: int = 50
    """Actions per episode; then the game counts as lost."""
    pool_size: int = 16
    """Games played at once (one environment instance each)."""
    think_prefix: str | None = None
    """Actions starting so are thoughts: they cost a step and are answered "OK."."""
    transcript: str = "plain"
    """How the episode is written for the model: ``plain`` (observations trimmed) or ``react``
    (ReAct's ALFWorld layout, see ``grader.episode_runner.ReActFormat``), ..."""
    examples: str | None = None
    """A JSON file in the task folder with few-shot examples by kind (``react_<kind>_<i>``),
    put in the header's ``{example_<i>}`` fields."""
    processes: bool = False
    """Each environment in its own process (``envs.subproc``), the pool stepped in parallel:
    for environments that spend their time in Python (ALFWorld)."""
    data_dir: Path | None = field(default=None, metadata=GIVEN)
    """The task's prepared data folder, where an environment with game files finds them."""

    @classmethod
    def from_table(cls, table: Mapping[str, Any], data_dir: Path | None = None,
                   search: dict[str, Any] | None = None, store: dict[str, Any] | None = None,
                   where: Path | str | None = None) -> EnvSpec:
        """The spec of ``table``'s kind, every key checked; ``search`` and ``store`` (the run's)
        go to the kinds that take them. ``where``: the task file, named in the errors."""
        at = f"{where} [env]" if where else "[env]"
        kind = table.get("kind")
        known = kinds()
        if kind not in known:
            raise EnvError(f"{at} kind {kind!r} is not known; known: {', '.join(sorted(known))}")
        spec_cls = known[str(kind)].spec
        values = read_table(spec_cls, {k: v for k, v in table.items() if k != "kind"}, at, str(kind))
        given = {"data_dir": data_dir, "search": search, "store": store}
        values |= {f.name: given[f.name] for f in dataclasses.fields(spec_cls) if f.metadata.get("given")}
        return spec_cls(**values)

    @property
    def workers(self) -> int:
        """How many environments the episode runner drives at once."""
        return self.pool_size if self.processes else 1

    def factory(self) -> Callable[[], Environment]:
        """A maker of fresh environment instances for this spec: the kind's maker makes it, in a
        process of its own each where the spec says so."""
        make = kinds()[self.kind].maker(self)
        if self.processes:
            from agent2rl_tui.envs.subproc import InChildProcess

            return partial(InChildProcess, make)
        return make


@dataclass(frozen=True)
class EnvKind:
    """One kind of environment: its ``[env]`` spec and its maker of environments for a spec."""

    name: str
    spec: type[EnvSpec]
    maker: Callable[[Any], Callable[[], Environment]]


_REGISTERED: dict[str, EnvKind] = {}
_FOUND: list[bool] = []


def register(spec: type[EnvSpec], maker: Callable[[Any], Callable[[], Environment]]) -> EnvKind:
    """Called by a kind's module: its spec (which names the kind) and its maker."""
    if not spec.kind:
        raise EnvError(f"{spec.__name__} names no kind")
    _REGISTERED[spec.kind] = kind = EnvKind(spec.kind, spec, maker)
    return kind


def kinds() -> dict[str, EnvKind]:
    """Every registered kind by name: the modules of this package are imported once to find them."""
    if not _FOUND:
        import agent2rl_tui.envs as package

        for module in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            importlib.import_module(module.name)
        _FOUND.append(True)
    return dict(_REGISTERED)


def read_table(spec: type[EnvSpec], table: Mapping[str, Any], at: str, kind: str) -> dict[str, Any]:
    """``table``'s values for ``spec``'s fields, each of the field's type; refusals name the key."""
    hints = typing.get_type_hints(spec)
    fields = {f.name: f for f in dataclasses.fields(spec) if not f.metadata.get("given")}
    unknown = sorted(set(table) - set(fields))
    if unknown:
        raise EnvError(f"{at} key {unknown[0]!r} is not a key of a {kind} environment: remove it or fix its "
                       f"spelling; its keys: kind, {', '.join(sorted(fields))}")
    missing = [name for name, f in fields.items() if f.default is dataclasses.MISSING and name not in table]
    if missing:
        raise EnvError(f"{at} needs {missing[0]} = ... ({field_help(spec, missing[0])})")
    values = {name: _typed(hints[name], value, f"{at} {name}") for name, value in table.items()}
    transcript = values.get("transcript", "plain")
    if transcript not in TRANSCRIPTS:
        raise EnvError(f"{at} transcript {transcript!r} is not known; known: {', '.join(TRANSCRIPTS)}")
    return values


def field_help(spec: type[EnvSpec], name: str) -> str:
    """What a field is, from its metadata ``help``, else its type."""
    f = next(f for f in dataclasses.fields(spec) if f.name == name)
    return str(f.metadata.get("help") or typing.get_type_hints(spec)[name])


def _typed(hint: Any, value: Any, what: str) -> Any:
    """``value`` as a field of type ``hint`` takes it (an int from its digits too), else an error."""
    optional = typing.get_origin(hint) in (Union, types.UnionType) and type(None) in typing.get_args(hint)
    base = next((a for a in typing.get_args(hint) if a is not type(None)), hint) if optional else hint
    if base is bool and isinstance(value, bool):
        return value
    if base is int and not isinstance(value, bool):
        if isinstance(value, int):
            return value
        if isinstance(value, str) and (number := ascii_int(value.strip(), signed=True)) is not None:
            return number
    if base is str and isinstance(value, str):
        return value
    name = getattr(base, "__name__", str(base))
    raise EnvError(f"{what} = {value!r} is not {'an' if name == 'int' else 'a'} {name}: write it as one "
                   f"(e.g. {_example(base)})")


def _example(base: Any) -> str:
    return {bool: "true", int: "16", str: '"text"'}.get(base, "a TOML value")

