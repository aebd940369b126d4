"""Campaigns: a real matrix of runs (2 tasks x 2 agents x 2 seeds, the tiny model, CPU) queued by the
real scheduler, its statistics against a hand computation, the CSV, and a run killed mid-campaign.

Every run here is graded by the real grader with a scripted eval worker (``SCRIPTED_GRADING``: the
campaign is what is tested here, the grading with a model is test_run_e2e's). The matrix's agent that
submits is a named command (``[agents.submitter]`` in agents.toml, ``support.agent_scripts``): a
changed copy of the base model, submitted, as a researcher names each of two command agents of one
campaign. The example agent's own route is test_run_e2e's.
"""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import statistics
import sys
from pathlib import Path

import pytest
from support.agent_scripts import submitter_profile
from support.runs import cli, fill, scripted_env, wait_for

from agent2rl_tui.record.store import RunStore
from agent2rl_tui.review.campaign_view import AUTORL_COLUMNS, cell_results, read_runs
from agent2rl_tui.review.index import summarize
from agent2rl_tui.review.stats import bootstrap_ci, expected_best_of, summarize_values
from agent2rl_tui.run.campaign import Campaign
from agent2rl_tui.util import procs

pytestmark = pytest.mark.slow


def test_statistics_by_hand() -> None:
    values = [10.0, 20.0, 30.0, 40.0]
    assert expected_best_of(values, 1) == pytest.approx(25.0)  # the mean
    assert expected_best_of(values, 2) == pytest.approx((20 * 1 + 30 * 2 + 40 * 3) / 6)  # C(4,2) = 6 pairs
    assert expected_best_of(values, 4) == 40.0 and expected_best_of(values, 5) is None
    s = summarize_values(values)
    assert s.mean == 25.0 and s.sd == pytest.approx(statistics.stdev(values))
    low, high = bootstrap_ci(values)
    assert 10.0 <= low < 25.0 < high <= 40.0
    assert bootstrap_ci(values) == (low, high)  # seeded: the same report twice
    assert bootstrap_ci([5.0]) is None and summarize_values([]).n == 0


def campaign_file(tmp_path: Path, tiny_model: Path, body: str) -> Path:
    path = tmp_path / "campaign.toml"
    path.write_text(fill(body, MODEL=str(tiny_model)), encoding="utf-8")
    return path


def folder_of(stdout: str) -> Path:
    return Path(next(line.split(": ", 1)[1] for line in stdout.splitlines() if line.startswith("campaign folder: ")))


MATRIX = """
name = "matrix"
tasks = ["arith", "gsm8k"]
base_models = ["MODEL"]
seeds = [0, 1]
budget = "4m"
max_parallel = 2

[[agents]]
agent = "submitter"

[[agents]]
agent = "command"
command = "echo nothing to train"

[options]
eval_limit = 2
grace = "2s"
"""



@pytest.fixture(scope="module")
def matrix(prepared_data: Path, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The 8-run campaign, started detached through the CLI and run to its end."""
    tmp_path = tmp_path_factory.mktemp("matrix")
    proc = cli("campaign", "start", str(campaign_file(tmp_path, tiny_model, MATRIX)), root=tmp_path / "root",
               timeout=60, env={**scripted_env(), **submitter_profile(tmp_path)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    folder = folder_of(proc.stdout)
    with Campaign(folder) as campaign:
        wait_for(lambda: campaign.meta().ended_at, timeout=900, interval=1, what="the campaign to end")
    return {"stdout": proc.stdout, "folder": folder, "root": tmp_path / "root", "tmp": tmp_path}


def test_a_campaign_runs_its_matrix_at_most_n_at_once_and_reports_per_cell(matrix: dict) -> None:
    assert "4 cells x 2 seeds = 8 runs, at most 2 at once" in matrix["stdout"]
    folder, tmp_path = matrix["folder"], matrix["tmp"]
    with Campaign(folder) as campaign:
        rows = campaign.rows()
    assert len(rows) == 8 and all(r.run_dir for r in rows)
    runs = {r.id: summarize(Path(r.run_dir or "")) for r in rows}
    assert {s.status for s in runs.values()} == {"finished"}, {s.id: (s.status, s.error) for s in runs.values()}
    assert {s.baseline for s in runs.values()} == {10.0}  # the scripted worker's baseline: no model loaded
    assert all(Path(r.run_dir or "").parent == folder for r in rows)  # grouped under the campaign
    # Never more than two at once: each run from its start by the scheduler to its end.
    spans = [(r.started_at, runs[r.id].ended_at) for r in rows]
    most = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert most <= 2
    with RunStore.of_run(Path(rows[0].run_dir or "")) as store:
        config = json.loads(store.run().config_json)
    assert config["eval_limit"] == 2

    # The results by cell, against the runs' own records.
    cells = {c.cell: c for c in cell_results(read_runs(folder))}
    assert len(cells) == 4
    submitted_arith = cells["arith · submitter · - · tiny-llama"]
    bests = [runs[r.id].best for r in rows if r.cell == submitted_arith.cell]
    assert submitted_arith.tally.valid_text() == "2 of 2 valid"  # a changed copy is a valid submission
    assert submitted_arith.best.n == 2 and submitted_arith.best.mean == pytest.approx(statistics.fmean(bests))
    assert submitted_arith.best.sd == pytest.approx(statistics.stdev(bests))
    assert submitted_arith.expected_best[2] == pytest.approx(max(bests))
    assert submitted_arith.expected_best[1] == pytest.approx(statistics.fmean(bests))
    imps = [runs[r.id].improvement for r in rows if r.cell == submitted_arith.cell]
    assert submitted_arith.improvement.mean == pytest.approx(statistics.fmean(imps))
    # Runs without a valid submission count at their baseline (improvement 0), not dropped (issue 42, 2).
    silent = cells["arith · command · - · tiny-llama"]
    silent_runs = [runs[r.id] for r in rows if r.cell == silent.cell]
    assert silent.tally.valid == 0 and silent.tally.valid_text() == "0 of 2 valid"
    assert silent.best.n == 2 and silent.best.mean == pytest.approx(statistics.fmean(s.baseline for s in silent_runs))
    assert silent.improvement.mean == 0.0 and silent.improvement.ci_low is None  # two runs: no interval

    out = cli("campaign", "results", str(folder), "--csv", str(tmp_path / "runs.csv"), root=tmp_path / "root")
    assert out.returncode == 0 and "arith · submitter · - · tiny-llama" in out.stdout
    assert f"best of budget: {submitted_arith.best.mean:.2f}" in out.stdout and "E[best of 2]" in out.stdout
    assert "counted: 0 of 2 valid" in out.stdout and "(too few runs for an interval)" in out.stdout
    with (tmp_path / "runs.csv").open(newline="") as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == 8 and list(table[0])[:len(AUTORL_COLUMNS)] == AUTORL_COLUMNS
    assert {row["status"] for row in table} == {"finished"} and {row["seed"] for row in table} == {"0", "1"}
    compared = cli("compare", "--campaign", str(folder), root=tmp_path / "root")
    assert compared.returncode == 0, compared.stderr
    assert "arith · prompts default · submitter · - · base tiny-llama (weights " in compared.stdout
    assert "mode free, first 2 eval items: 2 runs (2 of 2 valid; 2 finished)" in compared.stdout
    assert "arith · prompts default · command · - · base tiny-llama" in compared.stdout
    assert "2 runs (0 of 2 valid; 2 finished)" in compared.stdout and "too few runs for an interval" in compared.stdout
    assert f"best of budget {submitted_arith.best.mean:.2f} ± {submitted_arith.best.sd:.2f} 95% CI too few" in compared.stdout
    status = cli("campaign", "status", "matrix", root=tmp_path / "root")
    assert status.stdout.count(" finished ") == 8 and "scheduler: ended" in status.stdout


KILLABLE = """
name = "killable"
tasks = ["arith"]
base_models = ["MODEL"]
seeds = [0]
budget = "5m"

[[agents]]
agent = "command"
command = "PYTHON -c 'import pathlib, time; [time.sleep(0.2) for _ in range(600) if not pathlib.Path(\\"GO\\").exists()]'"

[options]
eval_limit = 3
grace = "1s"
contain = false
"""


def test_a_run_killed_mid_campaign_is_reported_and_queued_again(prepared_data: Path, tiny_model: Path,
                                                                tmp_path: Path) -> None:
    go = tmp_path / "go"
    body = fill(KILLABLE, PYTHON=sys.executable, GO=str(go))
    proc = cli("campaign", "start", str(campaign_file(tmp_path, tiny_model, body)), root=tmp_path / "root", timeout=60,
               env=scripted_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    folder = folder_of(proc.stdout)
    with Campaign(folder) as campaign:
        wait_for(lambda: campaign.rows()[0].run_dir, timeout=60, what="the run to be started")
        run_dir = Path(campaign.rows()[0].run_dir or "")
        wait_for(lambda: summarize(run_dir).status == "running", timeout=120, what="the agent to start")
        with RunStore.of_run(run_dir) as store:
            pid = store.run().supervisor_pid
        os.kill(pid, signal.SIGKILL)  # the run dies under the campaign
        wait_for(lambda: campaign.state_of(campaign.rows()[0]) == "lost", timeout=60, what="the run to be lost")
        wait_for(lambda: campaign.meta().ended_at, timeout=60, what="the scheduler to end")
        assert not procs.pid_alive(pid)
    status = cli("campaign", "status", str(folder), root=tmp_path / "root")
    assert " lost " in status.stdout and run_dir.name in status.stdout
    results = cli("campaign", "results", str(folder), root=tmp_path / "root")
    assert "1 lost" in results.stdout

    go.touch()  # the next attempt's agent ends at once
    again = cli("campaign", "requeue", str(folder), run_dir.name, root=tmp_path / "root", env=scripted_env())
    assert again.returncode == 0 and "queued again as 2" in again.stdout and "scheduler started" in again.stdout
    with Campaign(folder) as campaign:
        wait_for(lambda: campaign.meta().ended_at and campaign.state_of(campaign.rows()[-1]) == "finished",
                 timeout=300, interval=1, what="the second attempt to finish")
        rows = campaign.rows()
        assert [campaign.state_of(r) for r in rows] == ["superseded", "finished"]
        assert rows[1].attempt == 2 and Path(rows[1].run_dir or "") != run_dir and run_dir.exists()
    refused = cli("campaign", "requeue", str(folder), "2", root=tmp_path / "root")
    assert refused.returncode != 0 and "only failed, lost or stopped runs" in refused.stderr
    assert summarize(Path(rows[1].run_dir or "")).baseline == 10.0  # scored, by the scripted worker


SUBMITIT = """
name = "on-slurm"
backend = "slurm"
tasks = ["arith"]
base_models = ["MODEL"]
seeds = [0]
budget = "3m"

[slurm]
cluster = "local"      # submitit's local executor: the same job, run as a local process
partition = "gpu"      # Slurm-only parameters are dropped by the local executor

[[agents]]
agent = "command"
command = "echo a run inside a job"

[options]
eval_limit = 3
grace = "1s"
"""


def test_the_submitit_backend_runs_a_cell_as_a_job(prepared_data: Path, tiny_model: Path, tmp_path: Path) -> None:
    from agent2rl_tui.run.campaign import CampaignSpec
    from agent2rl_tui.run.campaign.slurm import time_limit_min

    spec_text = campaign_file(tmp_path, tiny_model, SUBMITIT).read_text()
    spec = CampaignSpec.from_toml(spec_text)
    # 3 min budget + 1 s grace + 2 x arith's eval timeout + 10 min, rounded up to minutes.
    eval_s = __import__("agent2rl_tui.tasks.registry", fromlist=["load_task"]).load_task("arith").eval_timeout_s
    assert time_limit_min(spec, spec.cells[0]) == math.ceil((180 + 1 + 2 * eval_s + 600) / 60)
    proc = cli("campaign", "start", str(tmp_path / "campaign.toml"), root=tmp_path / "root", timeout=120,
               env=scripted_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 jobs submitted" in proc.stdout
    folder = folder_of(proc.stdout)
    with Campaign(folder) as campaign:
        row = campaign.rows()[0]
        assert row.job_id
        wait_for(lambda: campaign.rows()[0].run_dir and campaign.state_of(campaign.rows()[0]) == "finished",
                 timeout=300, interval=1, what="the job's run to finish")
        run_dir = Path(campaign.rows()[0].run_dir or "")
    assert run_dir.parent == folder and summarize(run_dir).baseline == 10.0  # the job got the scripted worker
    # The local executor's job id is its process's pid; the process pickles the job's result after
    # the run has finished, then exits: the result is there once the job has ended.
    job_pid = int(row.job_id)
    wait_for(lambda: not procs.pid_alive(job_pid), timeout=120, interval=0.5, what="the job's process to end")
    assert list((folder / "slurm" / str(job_pid)).glob("*_result.pkl")), "submitit keeps the job's result"
    status = cli("campaign", "status", str(folder), root=tmp_path / "root")
    assert " finished " in status.stdout and "backend: slurm" in status.stdout


@pytest.mark.asyncio
async def test_the_campaign_screen_shows_the_matrix_and_opens_its_runs(matrix: dict) -> None:
    from support.tui import open_runs, plain, run_screen_ready, settle, table_rows
    from textual.widgets import DataTable, Static

    from agent2rl_tui.ui.app import Agent2RLApp
    from agent2rl_tui.ui.screens.campaign import CampaignScreen, CampaignsScreen
    from agent2rl_tui.ui.screens.compare import CompareScreen

    cells = {c.cell: c for c in cell_results(read_runs(matrix["folder"]))}
    app = Agent2RLApp(root=matrix["root"])
    async with app.run_test(size=(160, 48)) as pilot:
        await open_runs(pilot)
        await pilot.press("g")
        await settle(pilot, lambda: isinstance(app.screen, CampaignsScreen), what="Campaigns")
        listed = table_rows(app.screen.query_one("#campaigns", DataTable))
        assert listed == [[matrix["folder"].name, "8", "8 finished"]]
        await pilot.press("enter")
        await settle(pilot, lambda: isinstance(app.screen, CampaignScreen) and app.screen.loaded, what="the campaign")
        screen = app.screen
        rows = table_rows(screen.query_one("#cells", DataTable))
        assert sorted(r[0] for r in rows) == sorted(cells) and all(r[1] == "2 finished" for r in rows)
        first = cells[rows[0][0]]
        assert rows[0][2] == first.tally.valid_text()
        assert rows[0][3] == (f"{first.best.mean:.2f} ± {first.best.sd:.2f}" if first.best.sd is not None
                              else (f"{first.best.mean:.2f}" if first.best.mean is not None else "-"))
        runs = table_rows(screen.query_one("#cell-runs", DataTable))
        assert [r[0] for r in runs] == ["0", "1"] and {r[2] for r in runs} == {"finished"}
        await pilot.press("enter")  # from the cells down to their runs
        await pilot.press("down", "enter")  # open the seed-1 run
        await settle(pilot, lambda: run_screen_ready(app), what="the run's screen")
        assert app.screen.run_dir.name == runs[1][3]
        await pilot.press("escape")
        await settle(pilot, lambda: isinstance(app.screen, CampaignScreen), what="back to the campaign")
        await pilot.press("c")
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen), what="Compare")
        assert "8 runs" in plain(app.screen.query_one("#compare-title", Static))
