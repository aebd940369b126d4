"""Typed trees over JSON that was written by another release: read forgivingly, written back exactly.

A JSON file a reader keeps for years (report.json) is read by code that expects today's keys
and types; the file may be older (a key missing), newer (a key unknown) or damaged (a list
where an object belongs). ``Node`` is a dataclass over one JSON object that holds all three:

- each typed field declares its key's ``Codec`` (``key(TEXT)``, ``key(part(Baseline))``...):
  how a JSON value is read into the field and written back;
- reading never raises: a value of the wrong type leaves its field at its default (None, an
  empty part, or the readable items of a list) and is kept, as found, in ``rest``; so is every
  key this release does not type; ``order`` keeps the object's keys in the order read;
- ``to_json`` writes the object as read (``rest`` wins over a field, ``order`` gives the keys),
  so ``Cls.from_json(d).to_json() == d`` for any object ``d``; a node made in code (``order``
  None) writes its typed fields in the order they are declared, then ``rest``. (A field set
  after reading is written only where its key was read, and a value kept in ``rest`` wins.)

Values are checked, never converted (an integer stays an integer, so the bytes stay the same).
A field whose codec reads into a type of another module (``foreign``: a class with its own JSON
methods) is compared after reading: where writing it back would not give the value read, the
value is kept in ``rest`` too, and the typed field is still there for readers.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

_NOTHING: Any = object()


class Unreadable(Exception):
    """A JSON value of the wrong type; ``partial``: what of it could be read (a list's readable items)."""

    def __init__(self, partial: Any = _NOTHING) -> None:
        super().__init__("unreadable")
        self.partial = partial


@dataclass(frozen=True)
class Codec:
    """How one key's JSON value becomes a field's value (``read``, raising ``Unreadable``) and back."""

    read: Callable[[Any], Any]
    write: Callable[[Any], Any]
    checked: bool = False
    """Whether ``write(read(x))`` may differ from ``x`` (a foreign type): then ``x`` is also kept as found."""


def _as_is(value: Any) -> Any:
    return value


def scalar(*types: type, nullable: bool = True) -> Codec:
    """A value of one of ``types`` kept as it is (never a bool where a number is meant); None if ``nullable``."""

    def read(value: Any) -> Any:
        if value is None and nullable:
            return None
        if isinstance(value, bool) and bool not in types:
            raise Unreadable()
        if not isinstance(value, types):
            raise Unreadable()
        return value

    return Codec(read, _as_is)


TEXT = scalar(str)
NUM = scalar(int, float)
INT = scalar(int)
BOOL = scalar(bool)
LIST = scalar(list)
"""A list kept as found (its items are not typed)."""
TABLE = scalar(dict)
"""An object kept as found (its values are not typed)."""


def key(codec: Codec, default: Any = None, *, factory: Callable[[], Any] | None = None) -> Any:
    """A typed field of a ``Node``: its codec, and its default (or ``factory``) when the key is
    missing or unreadable."""
    if factory is not None:
        return field(default_factory=factory, metadata={"codec": codec})
    return field(default=default, metadata={"codec": codec})


@dataclass(kw_only=True)
class Node:
    """One JSON object: its typed fields (declared with ``key``), ``rest`` and ``order``."""

    rest: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The keys not typed here, and typed keys whose value could not be read exactly, as found."""
    order: tuple[str, ...] | None = field(default=None, repr=False, compare=False)
    """The object's keys in the order read; None for a node made in code."""

    @classmethod
    def from_json(cls, data: Any) -> Self:
        """The node of ``data`` as found; never raises (anything but an object reads as an empty node)."""
        if not isinstance(data, dict):
            return cls()
        codecs = codecs_of(cls)
        typed: dict[str, Any] = {}
        rest: dict[str, Any] = {}
        for name, raw in data.items():
            codec = codecs.get(name)
            if codec is None:
                rest[name] = raw
                continue
            try:
                value = codec.read(raw)
            except Unreadable as exc:
                rest[name] = raw
                if exc.partial is not _NOTHING:
                    typed[name] = exc.partial
                continue
            typed[name] = value
            if codec.checked and not same_json(codec.write(value), raw):
                rest[name] = raw
        return cls(rest=rest, order=tuple(data), **typed)

    def to_json(self) -> dict[str, Any]:
        """The object as read (same keys, same order, same values); a node made in code: its typed
        fields in declared order, then ``rest``."""
        codecs = codecs_of(type(self))
        keys = self.order if self.order is not None else (*codecs, *(k for k in self.rest if k not in codecs))
        return {k: self.rest[k] if k in self.rest else codecs[k].write(getattr(self, k)) for k in keys}


_CODECS: dict[type, dict[str, Codec]] = {}


def codecs_of(cls: type[Node]) -> dict[str, Codec]:
    """A node class's typed fields and their codecs, in declared order (worked out once per class)."""
    if cls not in _CODECS:
        _CODECS[cls] = {f.name: f.metadata["codec"] for f in dataclasses.fields(cls) if "codec" in f.metadata}
    return _CODECS[cls]


def same_json(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are written as the same JSON text (so ``1`` and ``1.0`` differ, as do key orders)."""
    try:
        return json.dumps(a) == json.dumps(b)
    except (TypeError, ValueError):
        return False


def part(cls: type[Node], *, optional: bool = True) -> Codec:
    """A nested object read as ``cls`` (None for null where ``optional``)."""

    def read(value: Any) -> Any:
        if value is None and optional:
            return None
        if not isinstance(value, dict):
            raise Unreadable()
        return cls.from_json(value)

    return Codec(read, lambda v: None if v is None else v.to_json())


def parts(cls: type[Node]) -> Codec:
    """A list of objects, each read as ``cls``; items that are not objects are left out of the field."""

    def read(value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise Unreadable([])
        items = [cls.from_json(v) for v in value if isinstance(v, dict)]
        if len(items) < len(value):
            raise Unreadable(items)
        return items

    return Codec(read, lambda items: [v.to_json() for v in items])


READ_ERRORS = (Unreadable, KeyError, ValueError, TypeError, AttributeError)
"""What a foreign class's reader may raise on a damaged value."""


def foreign(read: Callable[[Any], Any], write: Callable[[Any], Any], *, optional: bool = True) -> Codec:
    """A value read into a type of another module (``read`` may raise any of ``READ_ERRORS``)."""

    def read_checked(value: Any) -> Any:
        if value is None and optional:
            return None
        try:
            return read(value)
        except READ_ERRORS:
            raise Unreadable() from None

    return Codec(read_checked, lambda v: None if v is None else write(v), checked=True)


def foreign_list(read: Callable[[Any], Any], write: Callable[[Any], Any]) -> Codec:
    """A list read item by item with ``read``; unreadable items are left out of the field."""

    def read_items(value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise Unreadable([])
        items = []
        for raw in value:
            try:
                items.append(read(raw))
            except READ_ERRORS:
                continue
        if len(items) < len(value):
            raise Unreadable(items)
        return items

    return Codec(read_items, lambda items: [write(v) for v in items], checked=True)


def need(d: dict[str, Any], name: str, codec: Codec) -> Any:
    """``d[name]`` read with ``codec``, present and not null, else ``Unreadable``."""
    value = codec.read(d.get(name))
    if value is None:
        raise Unreadable()
    return value


def opt(d: dict[str, Any], name: str, codec: Codec, default: Any = None) -> Any:
    """``d[name]`` read with ``codec``; ``default`` when missing or null."""
    value = codec.read(d.get(name))
    return default if value is None else value


def an_object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Unreadable()
    return value


def items_of(value: Any, read: Callable[[Any], Any]) -> list[Any]:
    """Every item of a list read with ``read`` (None: an empty list); one unreadable item: ``Unreadable``."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise Unreadable()
    return [read(v) for v in value]
