"""Numbers read from someone else's text are ASCII digits only (util/numbers.py): "²" and "١" are
digits to ``str.isdigit()``, and ``int()`` raises for the first and reads the second as 1."""

from __future__ import annotations

import pytest

from agent2rl_tui.util.numbers import ascii_int, is_digits


@pytest.mark.parametrize("text", ["0", "7", "0042", "123456789012345678901234567890"])
def test_ascii_digits_are_read(text: str) -> None:
    assert is_digits(text) and ascii_int(text) == int(text)


@pytest.mark.parametrize("text", ["", "\u00b2", "\u0661", "\U0001d7d7", "1\u00b2", " 1", "1 ", "+1", "-1", "1_000", "0x1", "1\n"])
def test_anything_else_is_not_a_number(text: str) -> None:
    assert not is_digits(text) and ascii_int(text) is None


def test_a_sign_only_where_asked() -> None:
    assert ascii_int("-12", signed=True) == -12 and ascii_int("12", signed=True) == 12
    assert ascii_int("--1", signed=True) is None and ascii_int("-\u0661", signed=True) is None
