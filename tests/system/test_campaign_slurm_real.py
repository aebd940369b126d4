"""Campaigns on a real Slurm: a one-node cluster (tests/support/slurm_cluster.py: munged, slurmctld and
slurmd from Debian's slurm-wlm) and the campaign's runs submitted to it as real jobs through the
CLI (sbatch via submitit's Slurm executor), read back the way a user would: `campaign status`,
the run folders and their reports, `campaign results`.

Every test here shares the session's cluster (one per pytest process: keep Slurm tests in this
file). Where root or the packages are missing they skip, saying how to run them.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import signal
import sys
from pathlib import Path

import pytest
from support.agent_scripts import MUTATE, SUBMIT
from support.runs import cli, fill, toml_inline, wait_for
from support.slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the session fixture

from agent2rl_tui.record.store import RunStore
from agent2rl_tui.review.campaign_view import read_runs
from agent2rl_tui.review.index import summarize
from agent2rl_tui.run.campaign import Campaign
from agent2rl_tui.run.campaign.slurm_jobs import ENDED_STATES

# A busy machine: the fixtures wait long. The runs are graded by a scripted worker: Slurm's part is
# what is tested here, and the grading with a model is the end-to-end run's (test_run_e2e).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400), pytest.mark.usefixtures("scripted_grading")]

FOUR_RUNS = """
name = "on-real-slurm"
backend = "slurm"
tasks = ["arith"]
base_models = ["MODEL"]
seeds = [0, 1, 2, 3]
budget = "20m"
gpus_per_run = 0        # the test node has no GPUs: no gres asked

[slurm]
cpus_per_task = CPUS

[[agents]]
agent = "command"   # a changed copy of the base model, submitted: Slurm's part is what is tested here
command = '"$PY" -c "$MUTATE_CODE" output/m1 1 && "$PY" -c "$SUBMIT_CODE" output/m1'

[options]
eval_limit = 2
grace = "5s"
env = ENV
"""

STATUS_POLL_S = 4
"""How often a test that waits on Slurm asks `campaign status` (a CLI process, squeue and sacct:
about 0.2 CPU-s each): the jobs take tens of seconds. The 4-run campaign's watch, which must see a
job PENDING while others run, samples every second instead."""

STATUS_LINE = re.compile(r"^\s*(\d+) .* seed (\d+)\s+(\S+)\s+(?:(\S+)\s+)?job (\d+) ([A-Z_]+)")
"""One run in `campaign status`: row id, seed, state, run folder (once started), job id, Slurm state."""


def folder_of(stdout: str) -> Path:
    return Path(next(line.split(": ", 1)[1] for line in stdout.splitlines() if line.startswith("campaign folder: ")))


def status_rows(folder: Path) -> list[tuple[str, ...]]:
    out = cli("campaign", "status", str(folder), timeout=120)
    assert out.returncode == 0, out.stderr
    rows = [m.groups() for line in out.stdout.splitlines() if (m := STATUS_LINE.match(line))]
    assert rows, out.stdout
    return rows


def test_a_campaign_runs_as_slurm_jobs_and_slurm_decides_how_many_at_once(
        slurm_cluster: SlurmCluster, tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    cpus = int(slurm_cluster.node["CPUs"])
    per_job = max(1, cpus // 2)  # so that at most two of the four jobs fit on the node at once
    fit = cpus // per_job
    spec = tmp_path / "campaign.toml"
    env = toml_inline({"PY": sys.executable, "MUTATE_CODE": MUTATE, "SUBMIT_CODE": SUBMIT})
    spec.write_text(fill(FOUR_RUNS, MODEL=str(tiny_model), CPUS=str(per_job), ENV=env), encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"  # `campaign start` runs from a folder the jobs never see
    elsewhere.mkdir()
    proc = cli("campaign", "start", str(spec), root=tmp_path / "root", timeout=300, cwd=elsewhere)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4 runs, Slurm decides how many run at once" in proc.stdout and "4 jobs submitted" in proc.stdout
    folder = folder_of(proc.stdout)
    elsewhere.rmdir()

    # Watch `campaign status` until every run has finished: each line names the run's Slurm job
    # and its state; the jobs that do not fit wait (PENDING) while the others run.
    seen: list[list[tuple[str, ...]]] = []

    def all_finished() -> bool:
        rows = status_rows(folder)
        seen.append(rows)
        return len(rows) == 4 and all(r[2] == "finished" for r in rows)

    wait_for(all_finished, timeout=1800, interval=1, what="the four runs to finish on Slurm")
    running_at_once = max(sum(r[5] == "RUNNING" for r in rows) for rows in seen)
    assert 1 <= running_at_once <= fit
    assert any(sum(r[5] == "RUNNING" for r in rows) and any(r[5] == "PENDING" for r in rows) for rows in seen), \
        "a job should have waited for the node while others ran"

    with Campaign(folder) as campaign:
        db_rows = {str(r.id): r for r in campaign.rows()}
    job_ids = {row_id: db.job_id for row_id, db in db_rows.items()}
    assert len(set(job_ids.values())) == 4 and all(j.isdigit() for j in job_ids.values())
    final = seen[-1]
    for row_id, seed, state, run_name, job_id, slurm_state in final:
        assert job_ids[row_id] == job_id and state == "finished"
        run_dir = folder / run_name
        assert Path(db_rows[row_id].run_dir or "") == run_dir and run_dir.is_dir()  # the run folder, in the campaign
        s = summarize(run_dir)
        assert (s.status, s.error) == ("finished", None)
        assert s.baseline is not None and s.best is not None and s.n_submissions >= 1
        assert (run_dir / "report" / "report.json").is_file() and (run_dir / "report" / "report.md").is_file()
        assert (run_dir / "workspace").is_dir() and (run_dir / "logs" / "supervisor.log").is_file()
    assert sorted(r[1] for r in final) == ["0", "1", "2", "3"]
    # Each job ends once its run has: COMPLETED, as squeue and then sacct say. Only then has submitit
    # written the job's result (run_job returns after the supervisor has exited, and its process then
    # pickles the result): a run reads finished a moment before its job's result exists.
    wait_for(lambda: {r[5] for r in status_rows(folder)} == {"COMPLETED"}, timeout=300, interval=STATUS_POLL_S,
             what="the four jobs to be COMPLETED")
    for job_id in job_ids.values():
        assert list((folder / "slurm" / job_id).glob("*_result.pkl")), "submitit keeps each job's result"

    # Slurm ran them at most `fit` at once: each run from its start on its node to its end.
    spans = [(db.started_at, summarize(Path(db.run_dir or "")).ended_at) for db in db_rows.values()]
    assert max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans) <= fit

    # The results read as a local campaign's: one CSV row per run, with its job id.
    out = cli("campaign", "results", str(folder), "--csv", str(tmp_path / "runs.csv"))
    assert out.returncode == 0 and "runs: 4 finished" in out.stdout, out.stdout + out.stderr
    with (tmp_path / "runs.csv").open(newline="") as fh:
        table = list(csv.DictReader(fh))
    assert sorted(r["job_id"] for r in table) == sorted(job_ids.values())
    assert {r["status"] for r in table} == {"finished"} and len(read_runs(folder)) == 4


ONE_RUN = """
name = "no-gpus-here"
backend = "slurm"
tasks = ["arith"]
base_models = ["MODEL"]
seeds = [0]
budget = "5m"

[slurm]
cpus_per_task = 1

[[agents]]
agent = "command"
command = "echo a run inside a job"

[options]
eval_limit = 2
grace = "1s"
"""


def test_a_job_sbatch_refuses_is_said_and_submitted_once_the_file_is_mended(
        slurm_cluster: SlurmCluster, tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    spec = tmp_path / "campaign.toml"
    spec.write_text(fill(ONE_RUN, MODEL=str(tiny_model)), encoding="utf-8")
    # gpus_per_run defaults to 1: a GPU asked of a node without any, which sbatch refuses.
    proc = cli("campaign", "start", str(spec), root=tmp_path / "root", timeout=300)
    assert proc.returncode != 0
    assert "sbatch refused run 1's job" in proc.stderr and "gpus_per_run = 0" in proc.stderr, proc.stderr
    folder = folder_of(proc.stdout)
    status = cli("campaign", "status", str(folder))
    assert " queued " in status.stdout and "job " not in status.stdout, status.stdout

    mended = folder / "campaign.toml"
    mended.write_text(mended.read_text(encoding="utf-8").replace('budget = "5m"', 'budget = "5m"\ngpus_per_run = 0'),
                      encoding="utf-8")
    again = cli("campaign", "resume", str(folder), timeout=300)
    assert again.returncode == 0 and "1 jobs submitted" in again.stdout, again.stdout + again.stderr
    wait_for(lambda: [r[2] for r in status_rows(folder)] == ["finished"], timeout=900, interval=STATUS_POLL_S,
             what="the mended campaign's run to finish")
    with Campaign(folder) as campaign:
        assert summarize(Path(campaign.rows()[0].run_dir or "")).baseline is not None


KILLABLE = """
name = "cancelled"
backend = "slurm"
tasks = ["arith"]
base_models = ["MODEL"]
seeds = [0]
budget = "10m"
gpus_per_run = 0

[slurm]
cpus_per_task = 1

[[agents]]
agent = "command"
command = "PYTHON -c 'import pathlib, time; [time.sleep(0.2) for _ in range(3000) if not pathlib.Path(\\"GO\\").exists()]'"

[options]
eval_limit = 2
grace = "1s"
contain = false
"""


def test_a_job_cancelled_mid_run_is_not_a_finished_run_and_is_queued_again(
        slurm_cluster: SlurmCluster, tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    import sys

    go = tmp_path / "go"
    spec = tmp_path / "campaign.toml"
    spec.write_text(fill(KILLABLE, MODEL=str(tiny_model), PYTHON=sys.executable, GO=str(go)), encoding="utf-8")
    proc = cli("campaign", "start", str(spec), root=tmp_path / "root", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    folder = folder_of(proc.stdout)
    wait_for(lambda: [r[2] for r in status_rows(folder)] == ["running"], timeout=600, interval=STATUS_POLL_S,
             what="the agent to run inside its job")
    [(_, _, _, run_name, job_id, slurm_state)] = status_rows(folder)
    assert slurm_state == "RUNNING"
    assert slurm_cluster.run("scancel", job_id).returncode == 0  # mid-run, as a user or an admin would

    # Slurm signals every process of the job: the run is closed as stopped (its record and report
    # written), never counted as finished; `campaign status` names the cancelled job.
    wait_for(lambda: [(r[2], r[5]) for r in status_rows(folder)] == [("stopped", "CANCELLED")], timeout=300,
             interval=STATUS_POLL_S, what="the cancelled job's run to be closed")
    s = summarize(folder / run_name)
    assert s.status == "stopped" and s.end_reason == "stopped", (s.status, s.end_reason)
    assert (folder / run_name / "report" / "report.json").is_file()
    assert "1 stopped" in cli("campaign", "results", str(folder)).stdout

    go.touch()  # the next attempt's agent ends at once
    again = cli("campaign", "requeue", str(folder), run_name, timeout=300)
    assert again.returncode == 0 and "queued again as 2; job " in again.stdout, again.stdout + again.stderr
    wait_for(lambda: [r[2] for r in status_rows(folder)] == ["superseded", "finished"], timeout=600, interval=STATUS_POLL_S,
             what="the second attempt to finish")
    rows = status_rows(folder)
    assert rows[0][4] == job_id and rows[1][4] != job_id and rows[1][3] != run_name
    assert (folder / run_name).is_dir()  # the cancelled attempt's folder is kept
    out = cli("campaign", "results", str(folder), "--csv", str(tmp_path / "runs.csv"))
    assert out.returncode == 0, out.stderr
    with (tmp_path / "runs.csv").open(newline="") as fh:
        table = list(csv.DictReader(fh))
    assert [(r["attempt"], r["job_id"]) for r in table] == [("1", job_id), ("2", rows[1][4])]
    assert [r["status"] for r in table] == ["superseded", "finished"]


def test_a_job_that_fails_before_its_run_starts_says_why(
        slurm_cluster: SlurmCluster, tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    import shutil

    model = tmp_path / "models" / "tiny-llama"  # on the "login node" at submission, gone when the job starts
    shutil.copytree(tiny_model, model)
    spec = tmp_path / "campaign.toml"
    held = {'budget = "5m"': 'budget = "5m"\ngpus_per_run = 0',
            "cpus_per_task = 1": "cpus_per_task = 1\nadditional_parameters = { hold = true }"}
    spec.write_text(fill(ONE_RUN, MODEL=str(model), **held), encoding="utf-8")
    proc = cli("campaign", "start", str(spec), root=tmp_path / "root", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    folder = folder_of(proc.stdout)
    [(_, _, state, _, job_id, slurm_state)] = status_rows(folder)
    assert (state, slurm_state) == ("submitted", "PENDING")
    shutil.rmtree(model)
    assert slurm_cluster.run("scontrol", "release", job_id).returncode == 0

    wait_for(lambda: [r[2] for r in status_rows(folder)] == ["failed"], timeout=600, interval=STATUS_POLL_S,
             what="the job to fail")
    status = cli("campaign", "status", str(folder)).stdout
    assert f"job {job_id} FAILED" in status and "before its run started" in status, status
    assert str(model) in status, status  # why: the run could not be made, its model is missing
    # `campaign results` and its CSV read it the same way: failed, and why; never "submitted".
    out = cli("campaign", "results", str(folder), "--csv", str(tmp_path / "runs.csv"))
    assert out.returncode == 0 and "runs: 1 failed" in out.stdout, out.stdout + out.stderr
    with (tmp_path / "runs.csv").open(newline="") as fh:
        [row] = list(csv.DictReader(fh))
    assert (row["status"], row["job_id"]) == ("failed", job_id) and "before its run started" in row["error"], row
    assert str(model) in row["error"]
    assert [r.state for r in read_runs(folder)] == ["failed"]
    again = cli("campaign", "requeue", str(folder), "1", timeout=300)
    assert again.returncode == 0 and "queued again as 2" in again.stdout, again.stdout + again.stderr


# An agent that makes one submission in time, then keeps going: only the job's time limit ends it.
SUBMIT_THEN_KEEP_GOING = """
import json, os, shutil, time, urllib.request
shutil.copytree(os.environ["MODEL_PATH"], "output/v1")
req = urllib.request.Request(os.environ["GRADING_SERVER_URL"] + "/submit?wait=0",
                             data=json.dumps({"model_path": "output/v1"}).encode(),
                             headers={"Content-Type": "application/json"})
print(urllib.request.urlopen(req, timeout=600).read().decode(), flush=True)
while True:
    time.sleep(1)
"""

TIME_LIMITED = """
name = "time-limited"
backend = "slurm"
tasks = ["arith"]
base_models = ["MODEL"]
seeds = [0]
budget = "30m"          # far beyond the job's time limit
gpus_per_run = 0

[slurm]
cpus_per_task = 1
time = 4                # minutes: the job's time limit, below what the run needs
signal_delay_s = 90     # Slurm warns the job this long before it (up to a minute earlier)

[[agents]]
agent = "command"
command = 'AGENT'

[options]
eval_limit = 2
grace = "1s"
contain = false
"""


def test_a_job_that_hits_its_time_limit_is_stopped_as_a_budget_ends(
        slurm_cluster: SlurmCluster, tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    import sys

    agent = tmp_path / "agent.py"
    agent.write_text(SUBMIT_THEN_KEEP_GOING, encoding="utf-8")
    spec = tmp_path / "campaign.toml"
    spec.write_text(fill(TIME_LIMITED, MODEL=str(tiny_model), AGENT=f"{sys.executable} {agent}"), encoding="utf-8")
    proc = cli("campaign", "start", str(spec), root=tmp_path / "root", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    folder = folder_of(proc.stdout)
    [(_, _, _, _, job_id, _)] = status_rows(folder)
    script = (folder / "slurm" / job_id / f"{job_id}_submission.sh").read_text(encoding="utf-8")
    assert "#SBATCH --time=4" in script and "#SBATCH --signal=USR2@90" in script, script

    # Slurm's warning stops the run the way its budget's end would: the agent ended, its submission
    # made in time scored, the report written; the job then ends by itself, before its limit.
    wait_for(lambda: [(r[2], r[5]) for r in status_rows(folder)] == [("stopped", "COMPLETED")], timeout=900,
             interval=STATUS_POLL_S, what="the time-limited job's run to be stopped")
    status = cli("campaign", "status", str(folder)).stdout
    assert "(time_limit)" in status, status
    with Campaign(folder) as campaign:
        run_dir = Path(campaign.rows()[0].run_dir or "")
    s = summarize(run_dir)
    assert (s.status, s.end_reason) == ("stopped", "time_limit"), (s.status, s.end_reason, s.error)
    assert s.baseline is not None and s.n_submissions == 1 and s.best is not None  # scored, not lost
    report = json.loads((run_dir / "report" / "report.json").read_text(encoding="utf-8"))
    assert (report["status"], report["end_reason"]) == ("stopped", "time_limit")
    log = (folder / "slurm" / job_id / f"{job_id}_0_log.err").read_text(encoding="utf-8")
    assert "the job's time limit is near" in log, log[-2000:]

    out = cli("campaign", "results", str(folder), "--csv", str(tmp_path / "runs.csv"))
    assert out.returncode == 0 and "1 stopped" in out.stdout, out.stdout + out.stderr
    with (tmp_path / "runs.csv").open(newline="") as fh:
        [row] = list(csv.DictReader(fh))
    assert (row["status"], row["end_reason"], row["job_id"]) == ("stopped", "time_limit", job_id)
    assert row["best_score"] != "" and row["submissions"] == "1"


def test_a_job_killed_hard_leaves_its_run_lost_and_it_is_queued_again(
        slurm_cluster: SlurmCluster, tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    import sys

    go = tmp_path / "go"
    spec = tmp_path / "campaign.toml"
    spec.write_text(fill(KILLABLE, MODEL=str(tiny_model), PYTHON=sys.executable, GO=str(go),
                         **{'name = "cancelled"': 'name = "killed"'}), encoding="utf-8")
    proc = cli("campaign", "start", str(spec), root=tmp_path / "root", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    folder = folder_of(proc.stdout)
    wait_for(lambda: [r[2] for r in status_rows(folder)] == ["running"], timeout=600, interval=STATUS_POLL_S,
             what="the agent to run inside its job")
    [(_, _, _, run_name, job_id, _)] = status_rows(folder)
    # As a node lost would: every process of the job on the node (`scontrol listpids`: the batch
    # shell, submitit's, the supervisor, grader and agent) killed at once, none left to close the run.
    # (`scancel --signal=KILL --full` is gentler: Slurm then ends the step with SIGTERM first, and
    # the supervisor closes the run as stopped.)
    listed = slurm_cluster.run("scontrol", "listpids", job_id).stdout.split("\n")[1:]
    pids = [int(line.split()[0]) for line in listed if line.split() and line.split()[0].isdigit()]
    assert len(pids) >= 3, listed
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    # Its supervisor's heartbeat stops and Slurm says the job has ended: the run is lost, and its
    # record closed so (not "running" forever), its report written.
    wait_for(lambda: [r[2] for r in status_rows(folder)] == ["lost"] and status_rows(folder)[0][5] in ENDED_STATES,
             timeout=300, interval=STATUS_POLL_S, what="the killed job's run to be lost")
    s = summarize(folder / run_name)
    with RunStore.of_run(folder / run_name) as store:
        assert store.run().status == "lost"  # the record itself, not only the heartbeat's reading
    assert s.status == "lost" and f"Slurm job {job_id} ended" in (s.error or ""), (s.status, s.error)
    assert json.loads((folder / run_name / "report" / "report.json").read_text(encoding="utf-8"))["status"] == "lost"
    assert "1 lost" in cli("campaign", "results", str(folder)).stdout

    go.touch()  # the next attempt's agent ends at once
    again = cli("campaign", "requeue", str(folder), run_name, timeout=300)
    assert again.returncode == 0 and "queued again as 2; job " in again.stdout, again.stdout + again.stderr
    wait_for(lambda: [r[2] for r in status_rows(folder)] == ["superseded", "finished"], timeout=600, interval=STATUS_POLL_S,
             what="the second attempt to finish")
    rows = status_rows(folder)
    out = cli("campaign", "results", str(folder), "--csv", str(tmp_path / "runs.csv"))
    assert out.returncode == 0, out.stderr
    with (tmp_path / "runs.csv").open(newline="") as fh:
        table = list(csv.DictReader(fh))
    assert [(r["attempt"], r["job_id"], r["status"]) for r in table] == [("1", job_id, "superseded"),
                                                                          ("2", rows[1][4], "finished")]


# The local-vs-Slurm and job-environment tests (tests/support/slurm_parity.py), collected here so that
# they share this file's cluster: one cluster for the suite.
from support.slurm_parity import (  # noqa: E402, F401
    campaigns,
    test_a_jobs_run_gets_the_judge_key_and_hf_home_by_name_never_the_keys_value,
    test_campaign_results_read_the_same_for_local_and_slurm_runs,
    test_the_campaign_and_compare_screens_read_the_same_for_local_and_slurm_runs,
)
