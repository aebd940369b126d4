"""A campaign's backends behind one protocol, without a run or a cluster: the file picks the backend,
the Slurm backend words what ``squeue``/``sacct`` say (here: fake clients on PATH) and records it in
campaign.db, and review reads the same states without running a program. The real thing:
tests/system/test_campaign.py (local) and tests/system/test_campaign_slurm_real.py (a one-node Slurm).
"""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path

import pytest
from support.runs import cli

from agent2rl_tui.record import campaign_db
from agent2rl_tui.record.root import RunError
from agent2rl_tui.review.campaign_view import read_runs, write_csv
from agent2rl_tui.run.campaign import Campaign, CampaignSpec, LocalBackend, SlurmBackend, backend_for, campaign_runs
from agent2rl_tui.run.campaign.slurm_jobs import job_info

SPEC = """
name = "fake"
tasks = ["arith"]
base_models = ["/models/tiny"]
seeds = [0, 1]
BACKEND

[[agents]]
agent = "command"
command = "echo"
"""


def make_campaign(tmp_path: Path, backend: str) -> Path:
    """A campaign folder as ``campaign start`` leaves it (no pre-flight: no run is ever made here)."""
    text = SPEC.replace("BACKEND", f'backend = "{backend}"')
    folder = tmp_path / "campaigns" / f"20250101T000000-{backend}"
    folder.mkdir(parents=True)
    (folder / "campaign.toml").write_text(text, encoding="utf-8")
    campaign_db.create(folder, "fake", 1.0, CampaignSpec.from_toml(text).queued())
    return folder


@pytest.fixture
def fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``squeue``, ``sacct`` and ``scancel`` on PATH that answer from files in the folder returned."""
    bin_dir, answers = tmp_path / "bin", tmp_path / "answers"
    bin_dir.mkdir()
    answers.mkdir()
    for name in ("squeue", "sacct"):
        (bin_dir / name).write_text(f'#!/bin/sh\ncat "{answers}/{name}" 2>/dev/null\n', encoding="utf-8")
    (bin_dir / "scancel").write_text(f'#!/bin/sh\necho "$@" >> "{answers}/scancelled"\n', encoding="utf-8")
    for script in bin_dir.iterdir():
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path('/usr/bin')}:{Path('/bin')}")
    return answers


def test_the_campaign_file_picks_the_backend(tmp_path: Path) -> None:
    assert isinstance(backend_for(CampaignSpec.from_toml(SPEC.replace("BACKEND", ""))), LocalBackend)
    with Campaign(make_campaign(tmp_path, "slurm")) as campaign:
        assert isinstance(campaign.backend, SlurmBackend) and campaign.backend.name == "slurm"
    with Campaign(make_campaign(tmp_path, "local")) as campaign:
        assert campaign.job_states() == {}  # runs have no jobs
        with pytest.raises(RunError, match="has not started"):
            campaign.cancel("1")
        assert [r.seed for r in campaign.rows()] == [0, 1] and campaign.rows()[0]["seed"] == 0


def test_slurm_words_as_the_status_shows_them() -> None:
    assert (str(job_info("PENDING", "Resources")), job_info("PENDING", "Resources").ended) == ("PENDING (Resources)", False)
    assert str(job_info("RUNNING", "None")) == "RUNNING"
    assert (str(job_info("FAILED", exit_code="1:0")), job_info("FAILED", exit_code="1:0").ended) == ("FAILED (exit 1:0)", True)
    assert str(job_info("COMPLETED", exit_code="0:0")) == "COMPLETED"


def test_job_states_are_asked_by_the_backend_recorded_and_read_by_review(tmp_path: Path, fake_slurm: Path) -> None:
    folder = make_campaign(tmp_path, "slurm")
    with Campaign(folder) as campaign:
        for row, job in zip(campaign.rows(), ("11", "12"), strict=True):
            campaign.set_job(row.id, job)
    assert [r.state for r in read_runs(folder)] == ["submitted", "submitted"]  # nothing recorded yet, nothing asked
    (fake_slurm / "squeue").write_text("11|PENDING|Resources\n", encoding="utf-8")
    (fake_slurm / "sacct").write_text("12|FAILED|1:0\n", encoding="utf-8")
    log = folder / "slurm" / "12" / "12_0_log.err"
    log.parent.mkdir(parents=True)
    log.write_text("Traceback ...\nModuleNotFoundError: No module named 'submitit'\n", encoding="utf-8")

    with Campaign(folder) as campaign:
        jobs = campaign.job_states()
        assert {k: str(v) for k, v in jobs.items()} == {"11": "PENDING (Resources)", "12": "FAILED (exit 1:0)"}
        assert [campaign.state_of(r) for r in campaign.rows()] == ["submitted", "failed"]
    why = "job 12 ended FAILED (exit 1:0) before its run started: ModuleNotFoundError: No module named 'submitit'"
    status = cli("campaign", "status", str(folder)).stdout  # the CLI, through the same backend
    assert "submitted   job 11 PENDING (Resources)" in status and f"failed      job 12 FAILED (exit 1:0)  ({why})" in status
    # Review asks nobody: with the clients gone it reads what the backend recorded.
    (fake_slurm / "squeue").unlink()
    (fake_slurm / "sacct").unlink()
    runs = read_runs(folder)
    assert [(r.state, r.why) for r in runs] == [("submitted", None), ("failed", why)]
    assert "runs: 1 failed" in cli("campaign", "results", str(folder)).stdout
    assert write_csv(folder, tmp_path / "runs.csv") == 2
    with (tmp_path / "runs.csv").open(newline="") as fh:
        assert [(r["status"], r["job_id"], r["error"]) for r in csv.DictReader(fh)] == [
            ("submitted", "11", ""), ("failed", "12", why)]
    # The clients answer nothing now (Slurm forgot the jobs): what they said last is kept.
    assert [r.state for r in campaign_runs(folder)] == ["submitted", "failed"]

    with Campaign(folder) as campaign:
        assert campaign.requeue("2") == 3
        assert [(r.attempt, r.superseded, r.job_id) for r in campaign.rows()] == [(1, False, "11"), (1, True, "12"),
                                                                                   (2, False, None)]
        campaign.cancel("1")
    assert (fake_slurm / "scancelled").read_text(encoding="utf-8").split() == ["11"]


def test_a_campaign_folder_made_before_jobs_were_recorded_reads_as_it_did(tmp_path: Path) -> None:
    folder = make_campaign(tmp_path, "slurm")
    db = sqlite3.connect(folder / "campaign.db")
    assert {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} == {"campaign", "runs"}
    db.execute("UPDATE runs SET job_id = '7' WHERE id = 1")
    db.commit()
    db.close()
    assert [r.state for r in read_runs(folder)] == ["submitted", "queued"]
