"""Bad input to the CLI gets a clear error and leaves no half-made run behind."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.runs import cli


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--task", "nope", "--agent", "example"], "no task named 'nope'"),
        (["--task", "arith", "--agent", "robot"], "unknown agent 'robot'"),
        (["--task", "arith", "--agent", "command"], "needs --command"),
        (["--task", "arith", "--agent", "example", "--budget", "soon"], "cannot read the duration"),
        (["--task", "arith", "--agent", "example", "--engine-option", "gpu_share=0.3"],
         "unknown engine setting 'gpu_share'; known: cpu_dtype"),
        (["--task", "arith", "--agent", "example", "--engine-option", "max_model_len=long"],
         "engine setting max_model_len='long': expected int"),
    ],
)
def test_bad_run_requests_fail_cleanly(tmp_path: Path, tiny_model: Path, args: list[str], message: str) -> None:
    root = tmp_path / "runs"
    proc = cli("run", "start", "--model", str(tiny_model), *args, root=root)
    assert proc.returncode == 1
    assert message in proc.stderr
    assert not root.exists() or not any(root.iterdir())


def test_a_model_folder_without_config_is_refused_before_anything_starts(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    proc = cli("run", "start", "--task", "arith", "--agent", "example", "--model", str(tmp_path / "model"),
               root=tmp_path / "runs")
    assert proc.returncode == 1
    assert "no config.json" in proc.stderr or "no weights" in proc.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_show_and_stop_of_an_unknown_run_say_how_to_list_runs(tmp_path: Path) -> None:
    for args in (["run", "show", "nope"], ["run", "stop", "nope"]):
        proc = cli(*args, root=tmp_path)
        assert proc.returncode == 1
        assert "agent2rl-tui runs" in proc.stderr


def test_tiny_model_command_builds_a_model(tmp_path: Path) -> None:
    proc = cli("tiny-model", str(tmp_path / "m"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "m" / "config.json").exists()
