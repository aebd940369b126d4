"""Where things are, from any tier's folder: the repository, tests/, its fixtures, the shared data,
and the folder a session's xdist workers share."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # bench/ imports this module too: no pytest at run time
    import pytest

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"
SHARED_DATA = REPO.parent / "shared" / "data"
"""Real GSM8K, AlpacaEval, ALFWorld games and ReAct's prompts, beside the checkout (CI's too)."""


@contextmanager
def shared_by_workers(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """The session's folder that all its xdist workers share (its own without xdist), held under
    ``name``'s file lock: what one worker makes there (``tiny_model``, ``example_run``) the others wait
    for and read."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    with FileLock(str(shared / f"{name}.lock")):
        yield shared
