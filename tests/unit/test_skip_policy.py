"""No silent skips (tests/support/skip_policy.py): under CI a skip fails unless the machine lacks
hardware; outside CI it stays a skip that says what to install. Run as pytest runs: a real
pytest subprocess on a small test file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.paths import TESTS

SAMPLE = '''
import pytest
from support.skip_policy import missing

def test_needs_npm():
    missing("npm", "apt install npm, then make agent-clis")

@pytest.mark.skipif(True, reason="no CUDA GPU: this one needs one")
def test_needs_a_gpu():
    pass

def test_plain():
    from support.skip_policy import HARDWARE_REASONS
    assert "no CUDA GPU" in HARDWARE_REASONS
'''
# The sample module of a test run in a subprocess: a module skipped because a package no one
# declares does not import (a module-level skip, as pytest's own import-skip raises it) is what the
# skip policy must turn into an error under CI.
MODULE_SKIP = '''
import pytest
try:
    import a_package_nobody_installed
except ImportError as exc:
    pytest.skip(f"could not import 'a_package_nobody_installed': {exc}", allow_module_level=True)

def test_never_collected():
    pass
'''


def run_pytest(folder: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith("PYTEST_XDIST")}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "support.skip_policy", "-p", "no:cacheprovider", "-q", "-rA",
                           "-o", "addopts=", str(folder)], capture_output=True, text=True, timeout=120, cwd=folder, env=env)


def folder_with(tmp_path: Path, source: str) -> Path:
    (tmp_path / "test_sample.py").write_text(source)
    return tmp_path


def test_under_ci_a_skip_that_is_not_hardware_fails_and_says_what_to_install(tmp_path: Path) -> None:
    out = run_pytest(folder_with(tmp_path, SAMPLE), "true")
    assert out.returncode == 1, out.stdout
    assert "skipped under CI: npm is missing: apt install npm, then make agent-clis" in out.stdout
    assert "1 failed, 1 passed, 1 skipped" in out.stdout, out.stdout
    assert "SKIPPED [1] test_sample.py" in out.stdout and "no CUDA GPU: this one needs one" in out.stdout


def test_under_ci_a_module_skipped_at_import_stops_the_session(tmp_path: Path) -> None:
    out = run_pytest(folder_with(tmp_path, MODULE_SKIP), "true")
    assert out.returncode == 2, out.stdout  # a collection error: the session is interrupted
    assert "skipped under CI: could not import 'a_package_nobody_installed'" in out.stdout


def test_outside_ci_the_same_skips_stay_skips_with_their_reason(tmp_path: Path) -> None:
    out = run_pytest(folder_with(tmp_path, SAMPLE), None)
    assert out.returncode == 0, out.stdout
    assert "1 passed, 2 skipped" in out.stdout, out.stdout
    assert "npm is missing: apt install npm, then make agent-clis" in out.stdout
    module = run_pytest(folder_with(tmp_path, MODULE_SKIP), "false")
    assert module.returncode == 5 and "1 skipped" in module.stdout, module.stdout  # 5: no test ran, nothing failed
