"""Training prompts in the grader's form, from the workspace's ``data/grading.py``.

Written by the agent after reading description.md: the grader asks each question through the
run's prompt profile (for GSM8K by default the reference's 4-shot chat prompt), and a model
trained on other prompts is graded on ones it has never seen. The workspace ships the
grader's own rules as ``data/grading.py`` with the profile in ``data/grading.json``; without
them, a row's question is one user turn.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

Messages = list[dict[str, str]]


def with_input(row: dict[str, Any]) -> dict[str, Any]:
    """Alpaca-style rows keep an instruction's input apart; their ``question`` joins the two, and
    that is what the model should be asked (the grader's instructions carry their input inline)."""
    if row.get("input") and row.get("question"):
        return {**row, "instruction": row["question"]}
    return row


def grader_messages(train_file: Path) -> Callable[[dict[str, Any]], Messages]:
    """``row -> chat turns`` as the grader builds them for a question like ``row``."""
    kit = train_file.resolve().parent
    if (kit / "grading.py").is_file() and (kit / "grading.json").is_file():
        sys.path.insert(0, str(kit))
        import grading  # the workspace's data/grading.py

        if grading.SPEC.get("chat", True):
            print(f"prompts: the grader's profile {grading.SPEC.get('prompt_profile')!r} "
                  f"({len(grading.SPEC.get('shots', []))} worked examples before each question)", flush=True)
            return lambda row: grading.messages(with_input(row))
    return lambda row: [{"role": "user", "content": row["question"]}]
