"""The system tier: Slurm, the npm agent CLIs, vLLM, chromium, fresh installs, every benchmark's
quick run and the type checker: what needs more of the machine than a Python process and the tiny model.
"""

from __future__ import annotations

import pytest

LONG_FILES = ("test_campaign_slurm_real.py", "test_plain_install.py", "test_bench.py")
"""Files that take longest (about eight minutes of Slurm jobs; pip resolving a plain install against
the package index; every benchmark's quick run): started first, so that pytest-xdist (``--dist
loadfile``) runs the rest beside them, not after them."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.path.name not in LONG_FILES)  # stable: the order within is kept
