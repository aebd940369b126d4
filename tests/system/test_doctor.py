"""`agent2rl-tui doctor` through the real CLI, on this machine and on parts made to fail.

The whole doctor runs once for the module (vLLM's token, through the grader's eval worker,
is its slow part): every part has its line, vLLM generated here (``make setup`` installs its
CPU build where there is no GPU), AlpacaEval's scoring module imports, and the exit code is 0.
Then parts are made missing or broken for real, each in a subprocess of its own: a PATH
without bubblewrap and chromium, a ``bwrap`` that cannot make a sandbox, a ``pkg_resources``
that does not import (what setuptools 81 did to AlpacaEval), a workspaces root whose name
holds a terminal escape.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support.runs import cli

from agent2rl_tui.run.doctor import PART_NAMES, Finding, State, failing


def lines_of(part: str, stdout: str) -> list[str]:
    """The finding lines of ``part`` (its fix lines are indented, and so left out)."""
    return [line for line in stdout.splitlines() if line.split(" ", 1)[0] == part]


def env_with(**changes: str) -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", **changes}


@pytest.fixture(scope="module")
def doctor(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    return cli("doctor", root=tmp_path_factory.mktemp("doctor-root"), timeout=900, env=env_with())


def test_every_part_has_a_line(doctor: subprocess.CompletedProcess[str]) -> None:
    for part in PART_NAMES:
        assert lines_of(part, doctor.stdout), f"no line for {part}:\n{doctor.stdout}"
    for line in doctor.stdout.splitlines()[:-1]:
        if not line.startswith(" "):
            assert line.split()[1] in {s.value for s in State}, line


def test_exit_zero_on_this_machine(doctor: subprocess.CompletedProcess[str]) -> None:
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "failing" not in doctor.stdout.splitlines()[-1]


def test_vllm_generated_through_the_eval_worker(doctor: subprocess.CompletedProcess[str]) -> None:
    [line] = lines_of("vllm", doctor.stdout)
    assert line.split()[1] == "ok", line
    assert "generated" in line and "eval worker" in line, line


def test_alpaca_eval_scoring_imports(doctor: subprocess.CompletedProcess[str]) -> None:
    [line] = [x for x in lines_of("packages", doctor.stdout) if "alpaca_eval.metrics.glm_winrate" in x]
    assert line.split()[1] == "ok", line
    assert "alpaca-eval 0.6.6" in line


def test_the_machine_parts_answer(doctor: subprocess.CompletedProcess[str]) -> None:
    """What this machine has, checked for real: a sandbox made, a game step played, a lock compared."""
    [bwrap] = lines_of("bubblewrap", doctor.stdout)
    assert bwrap.split()[1] == "ok" and "contained `true` ran" in bwrap
    [java] = lines_of("java", doctor.stdout)  # the suite gives java options (conftest): their note is not the version
    assert java.split()[1] == "ok" and "version" in java and "Picked up" not in java, java
    [twx] = lines_of("textworld", doctor.stdout)
    assert twx.split()[1] == "ok" and "played" in twx
    [lock] = [x for x in lines_of("packages", doctor.stdout) if " lock: " in x]
    assert "pins of locks/" in lock


def test_a_jvms_note_of_its_options_is_not_its_version() -> None:
    """With options in the environment, java first says it picked them up (a line that can hold a
    number: ``-Dapp.version=1.2``); the version is the line after."""
    from agent2rl_tui.util.versions import version_line

    answer = ("Picked up JAVA_TOOL_OPTIONS: -Dapp.version=1.2 -XX:+UseSerialGC\n"
              "NOTE: Picked up JDK_JAVA_OPTIONS: -Xmx1.5g\n"
              'openjdk version "17.0.15" 2025-04-15\nOpenJDK Runtime Environment (build 17.0.15+6)\n')
    assert version_line(answer) == 'openjdk version "17.0.15" 2025-04-15'


def test_a_missing_part_asked_for_fails_and_names_its_fix(tmp_path: Path) -> None:
    """A PATH with git alone (the record's revisions need it to import): no bubblewrap, no chromium."""
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "git").symlink_to(shutil.which("git"))
    out = cli("doctor", "chromium", "bubblewrap", env=env_with(PATH=str(bare)))
    assert out.returncode == 1, out.stdout + out.stderr
    for part, fix in (("chromium", "sudo apt install chromium"), ("bubblewrap", "sudo apt install bubblewrap")):
        [line] = lines_of(part, out.stdout)
        assert line.split()[1] == "missing", line
        assert fix in out.stdout
    assert "failing: chromium, bubblewrap" in out.stdout.splitlines()[-1]


def test_a_bwrap_that_cannot_sandbox_is_broken(tmp_path: Path) -> None:
    """A real executable named bwrap that fails as bubblewrap fails where user namespaces are off."""
    fake = tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    out = cli("doctor", "bubblewrap", env=env_with(PATH=f"{fake.parent}{os.pathsep}{os.environ['PATH']}"))
    assert out.returncode == 1, out.stdout + out.stderr
    [line] = lines_of("bubblewrap", out.stdout)
    assert line.split()[1] == "broken" and "Permission denied" in line, line
    assert "user namespaces" in out.stdout


def test_a_broken_core_import_is_reported_broken(tmp_path: Path) -> None:
    """setuptools 81 without pkg_resources, for real: a pkg_resources ahead on the path that does not import."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "pkg_resources.py").write_text('raise ImportError("No module named pkg_resources (setuptools 81)")\n')
    out = cli("doctor", "packages", env=env_with(PYTHONPATH=str(shadow)))
    assert out.returncode == 1, out.stdout + out.stderr
    [line] = [x for x in lines_of("packages", out.stdout) if "alpaca_eval.metrics.glm_winrate" in x]
    assert line.split()[1] == "broken" and "pkg_resources" in line, line
    assert "setuptools>=77.0.3,<81" in out.stdout


def test_an_unknown_part_is_a_clear_error() -> None:
    out = cli("doctor", "vlm")
    assert out.returncode == 2
    assert "unknown part 'vlm'" in out.stderr
    assert all(name in out.stderr for name in PART_NAMES)
    assert all(name in cli("doctor", "--help").stdout for name in PART_NAMES)


def test_json_and_inert_text(tmp_path: Path) -> None:
    """Paths come from outside: a root whose name holds an escape is shown escaped, and --json
    gives one object per finding."""
    root = tmp_path / "runs\x1b]0;owned\x07"
    text = cli("doctor", "disk", "python", root=root)
    assert text.returncode == 0, text.stdout + text.stderr
    assert "\x1b" not in text.stdout and "\x07" not in text.stdout
    assert "runs\\x1b]0;owned\\x07" in text.stdout
    out = cli("doctor", "--json", "disk", "python", root=root)
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["part"] for r in rows] == ["disk", "python"]
    assert all(set(r) == {"part", "subject", "state", "detail", "fix"} for r in rows)
    # disk: "info" on a machine with under 20 GiB free (a CI box may have less), never a failure
    assert rows[0]["state"] in ("ok", "info") and rows[1]["state"] == "ok", rows
    assert "\x1b" not in out.stdout


def test_exit_rule() -> None:
    """Missing optional parts pass unless asked for; a broken installed part or a core part missing fails."""
    missing = Finding("chromium", "chromium", State.MISSING, "not on PATH", "sudo apt install chromium")
    broken = Finding("bubblewrap", "bwrap", State.BROKEN, "cannot sandbox", "allow user namespaces")
    core = Finding("torch", "torch", State.MISSING, "import torch failed", "make setup")
    assert failing([missing], named=False) == []
    assert failing([missing], named=True) == [missing]
    assert failing([missing, broken], named=False) == [broken]
    assert failing([core], named=False) == [core]


def test_the_cli_stays_light() -> None:
    code = ("import sys, agent2rl_tui.cli\n"
            "print(','.join(m for m in ('torch', 'vllm', 'transformers', 'agent2rl_tui.run.doctor') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "", out.stdout + out.stderr
