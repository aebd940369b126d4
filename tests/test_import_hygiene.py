"""The pure core and the grader never import textual or rich (checked in a fresh interpreter)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import agent2rl_tui.core
import agent2rl_tui.grader


def test_core_and_grader_import_neither_textual_nor_rich() -> None:
    modules = [m.name for pkg in (agent2rl_tui.core, agent2rl_tui.grader)
               for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")]
    assert "agent2rl_tui.core.supervisor" in modules and "agent2rl_tui.grader.server" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
