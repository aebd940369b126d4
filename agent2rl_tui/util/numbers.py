"""Whole numbers read from text someone else wrote: ASCII digits only.

``str.isdigit()`` is true for "²", "١" and "𝟗", and ``int()`` then raises for some of them and reads
others as digits: an id, a seed, a length or a size read that way from an agent's request, a file
or an environment variable gave an unrecorded 500 or a number nobody typed. Every such read goes
through here.
"""

from __future__ import annotations

import re

_DIGITS = re.compile(r"[0-9]+")
_SIGNED = re.compile(r"-?[0-9]+")


def is_digits(text: str) -> bool:
    """True for one or more ASCII digits and nothing else (no sign, no space, no other script)."""
    return _DIGITS.fullmatch(text) is not None


def ascii_int(text: str, *, signed: bool = False) -> int | None:
    """The number ``text`` spells in ASCII digits (an optional leading minus if ``signed``); None otherwise."""
    return int(text) if (_SIGNED if signed else _DIGITS).fullmatch(text) else None
