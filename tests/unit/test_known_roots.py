"""Every root runs were made under is remembered (record/root.py), so that containment can keep a
contained agent out of all of them: another root's runs hold eval prompts with their gold answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent2rl_tui.record.root import ROOTS_FILE_ENV, known_roots, remember_root


def test_roots_are_remembered_once_and_those_gone_are_not_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    listed = tmp_path / "state" / "roots"
    monkeypatch.setenv(ROOTS_FILE_ENV, str(listed))
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    for root in (a, b, a):
        remember_root(root)
    assert listed.read_text().splitlines() == [str(a), str(b)]
    b.rmdir()
    assert known_roots() == [a]


def test_a_list_that_cannot_be_read_or_written_costs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(ROOTS_FILE_ENV, str(blocker / "roots"))  # its folder is a file
    remember_root(tmp_path)
    assert known_roots() == []
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"relative/path\n\xff\xfe\n" + str(tmp_path).encode() + b"\n")
    monkeypatch.setenv(ROOTS_FILE_ENV, str(garbage))
    assert known_roots() == [tmp_path]
