"""The package type-checks: mypy, as pyproject.toml configures it ([tool.mypy]: mypy's default level
on the whole package, strict on the record, review and run layers), reports no error.

A cold run takes about half a minute on a 2-core machine (torch, transformers, TRL, vLLM and
inspect_ai are not followed: pyproject.toml); mypy's cache (.mypy_cache/ at the repository root,
which git ignores) brings the next one to a few seconds.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from support.paths import REPO

ROOT = REPO


def test_mypy_reports_no_error() -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.fail("mypy is not installed: `pip install -e '.[dev]'` installs it")
    out = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=540)
    assert out.returncode == 0, out.stdout[-8000:] + out.stderr[-2000:]
