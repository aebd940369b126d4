"""The layers hold: nothing below the front ends loads textual or rich, and the import
contracts in pyproject.toml (docs/architecture.md) are kept.

The first check imports every headless module in a fresh interpreter and inspects
``sys.modules`` (what really gets loaded, lazy imports included); the second runs
import-linter over the source (what the code says it imports).
"""

from __future__ import annotations

import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import REPO

import agent2rl_tui.agents
import agent2rl_tui.envs
import agent2rl_tui.grader
import agent2rl_tui.record
import agent2rl_tui.run
import agent2rl_tui.tasks
import agent2rl_tui.util

ROOT = REPO
HEADLESS = (agent2rl_tui.util, agent2rl_tui.tasks, agent2rl_tui.record, agent2rl_tui.envs, agent2rl_tui.grader,
            agent2rl_tui.run, agent2rl_tui.agents)


def test_headless_layers_import_neither_textual_nor_rich() -> None:
    # The example agent's scripts are programs it copies into its workspace and runs by path.
    modules = [m.name for pkg in HEADLESS for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")
               if ".scripts." not in m.name]
    assert "agent2rl_tui.run.supervisor" in modules and "agent2rl_tui.grader.server" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: `pip install -e '.[dev]'` installs it")
    return found


def test_import_contracts_are_kept() -> None:
    out = subprocess.run([_tool("lint-imports"), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def test_ruff_is_clean() -> None:
    out = subprocess.run([_tool("ruff"), "check", "agent2rl_tui", "tests", "bench"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:]


def test_the_package_cites_nothing_outside_the_repository() -> None:
    offenders = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "agent2rl_tui").rglob("*.py"))
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if "shared/" in line]
    assert offenders == [], "cite docs/ in the repository instead: " + ", ".join(offenders)
