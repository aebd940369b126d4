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


def test_the_root_is_taken_after_the_subcommand_and_named_in_every_hint(tmp_path: Path, tiny_model: Path) -> None:
    """Issue 41 (4): `--root` where people type it; the hints and messages name the root in use."""
    import json
    import os
    import re

    root = tmp_path / "elsewhere"
    empty = tmp_path / "empty"
    listed = cli("runs", "--root", str(empty))
    assert listed.returncode == 0 and f"no runs under {empty}" in listed.stdout, listed.stdout + listed.stderr
    env = {**os.environ, "AGENT2RL_SCRIPTED_WORKER": json.dumps({"default_score": 10.0})}
    proc = cli("run", "start", "--task", "arith", "--agent", "command", "--command", "true", "--model",
               str(tiny_model), "--budget", "1m", "--detach", "--root", str(root), env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = Path(re.search(r"run folder: (\S+)", proc.stdout).group(1))
    assert run_dir.parent == root.resolve()
    assert f"`agent2rl-tui --root {root.resolve()} run show {run_dir.name}`" in proc.stdout  # pasted, it works
    shown = cli("run", "show", run_dir.name, "--root", str(root), timeout=120)
    assert shown.returncode == 0 and run_dir.name in shown.stdout, shown.stdout + shown.stderr

    not_a_run = cli("run", "show", str(tmp_path))
    assert not_a_run.returncode == 1 and f"{tmp_path} is not a run folder (it has no run.db)" in not_a_run.stderr
    a_root = cli("report", str(root))
    assert a_root.returncode == 1 and f"{root} is a folder of runs, not a run (1: {run_dir.name})" in a_root.stderr
    assert f"agent2rl-tui --root {root} runs" in a_root.stderr


def test_a_hub_id_as_the_model_says_a_local_folder_is_wanted_and_how_to_get_one(tmp_path: Path) -> None:
    proc = cli("run", "start", "--task", "arith", "--agent", "command", "--command", "true",
               "--model", "Qwen/Qwen2.5-0.5B-Instruct", root=tmp_path / "runs")
    assert proc.returncode == 1
    assert "a local model folder is expected" in proc.stderr and "hf download Qwen/Qwen2.5-0.5B-Instruct" in proc.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
