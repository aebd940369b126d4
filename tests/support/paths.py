"""Where things are, from any tier's folder: the repository, tests/, its fixtures, the shared data."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"
SHARED_DATA = REPO.parent / "shared" / "data"
"""Real GSM8K, AlpacaEval, ALFWorld games and ReAct's prompts, beside the checkout (CI's too)."""
