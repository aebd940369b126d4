"""The unit tier: in-process tests (with real SQLite, git, files and small loopback servers) that
never load torch, transformers or vLLM, so the tier runs in seconds to a minute.

Held, not hoped: in a session of unit tests only, a test after which one of those packages is
loaded fails, named (a test that needs the tiny model or a grader belongs in ``integration/``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

HEAVY = ("torch", "transformers", "vllm")


def _unit_only(session: pytest.Session) -> bool:
    return all(item.path.parent.name == "unit" for item in session.items)


@pytest.fixture(autouse=True)
def _no_heavy_imports(request: pytest.FixtureRequest) -> Iterator[None]:
    before = [name for name in HEAVY if name in sys.modules]
    yield
    if before or not _unit_only(request.session):  # loaded by an integration test of the same process
        return
    loaded = [name for name in HEAVY if name in sys.modules]
    if loaded:
        pytest.fail(f"this unit test loaded {', '.join(loaded)}: a test that needs it belongs in tests/integration")
