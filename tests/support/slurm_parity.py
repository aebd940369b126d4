"""A campaign on a real Slurm reads as the same campaign run locally, and its jobs get the run's
environment by name, never its secrets' values.

The session's one-node cluster (tests/support/slurm_cluster.py, as in tests/system/test_campaign_slurm_real.py)
runs two campaigns through the CLI while the local scheduler runs a third:

- one matrix (arith, a named agent of agents.toml that submits a changed copy of the base model,
  two seeds, a fixed eval draw) with ``backend = "local"`` and with ``backend = "slurm"``, graded by a
  scripted eval worker: ``campaign results``, its CSV and the TUI's campaign and Compare screens
  read the same for both, and the job found the agent's profile by the variable that names it;
- an AlpacaEval run graded by a judge (tests/support/judge_server.py) that answers only with its key,
  the key's variable named in the campaign's options and its value set only in the shell that
  submits: the job's run is judged (the key reached the node), its agent sees the submitting
  shell's ``HF_HOME``, and the key's value is in no file under the campaign folder: not the
  job script, not submitit's pickles or logs, not the run folder.

They share the cluster and two cores: all three are started first, then waited for. The tests
are collected in tests/system/test_campaign_slurm_real.py, so that the suite starts one cluster: the
fixture lives once per test process, and pytest-xdist (``--dist loadfile``) keeps a file on one.
"""

from __future__ import annotations

import csv
import json
import os
import re
import secrets
from pathlib import Path

import pytest

from agent2rl_tui.record.store import RunStore
from agent2rl_tui.review.campaign_view import AUTORL_COLUMNS, OUR_COLUMNS, cell_results, read_runs
from agent2rl_tui.review.index import summarize
from agent2rl_tui.run.campaign import Campaign
from agent2rl_tui.run.campaign.slurm_jobs import ENDED_STATES
from support import local_server
from support.agent_scripts import submitter_profile
from support.runs import cli, fill, scripted_env, wait_for
from support.slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the session fixture

MATRIX = """
name = "parity"
backend = "BACKEND"
tasks = ["arith"]
base_models = ["MODEL"]
seeds = [0, 1]
budget = "20m"
max_parallel = 2        # local: both seeds at once, as the two-CPU node fits both jobs
gpus_per_run = 0

[slurm]
cpus_per_task = 1

[[agents]]
agent = "submitter"     # support.agent_scripts.submitter_profile: the job reads it from $AGENT2RL_AGENTS

[options]
eval_limit = 2
eval_seed = 20261126
grace = "5s"
"""

KEY_VAR = "A2RL_PARITY_JUDGE_KEY"

JUDGED = """
name = "judged"
backend = "slurm"
tasks = ["alpacaeval"]
base_models = ["MODEL"]
seeds = [0]
budget = "5m"
gpus_per_run = 0

[slurm]
cpus_per_task = 1

[[agents]]
agent = "command"
command = "printf %s \\"$HF_HOME\\" > hf_home.txt"

[options]
eval_limit = 2
grace = "1s"
judge = { base_url = "URL", model = "local-judge", key_env = "KEY_VAR" }
"""

ENDED = ("finished", "failed", "lost", "stopped")
VARYING = {"run_id", "timestamp", "duration_s", "workspace", "campaign", "job_id"}
"""CSV columns that differ between any two campaigns: ids, times, paths."""


def folder_of(stdout: str) -> Path:
    return Path(next(line.split(": ", 1)[1] for line in stdout.splitlines() if line.startswith("campaign folder: ")))


STATUS_LINE = re.compile(r"^\s*\d+ .* seed \d+\s+(\S+)(?:.* job \d+ ([A-Z_]+))?", re.M)
"""One run in `campaign status`: its state and, on Slurm, its job's (`job 12 COMPLETED`)."""


def status(folder: Path) -> list[tuple[str, str]]:
    """(run state, job state) of each run, as `campaign status` shows them."""
    out = cli("campaign", "status", str(folder), timeout=120)
    assert out.returncode == 0, out.stderr
    return STATUS_LINE.findall(out.stdout)


def ended(folder: Path, slurm: bool) -> bool:
    """Every run has ended, and on Slurm its job too (its result written, its files complete)."""
    rows = status(folder)
    return bool(rows) and all(run in ENDED and (not slurm or job in ENDED_STATES) for run, job in rows)


@pytest.fixture(scope="module")
def campaigns(slurm_cluster: SlurmCluster, prepared_data: Path, tiny_model: Path,  # noqa: F811
              tmp_path_factory: pytest.TempPathFactory) -> dict:
    from agent2rl_tui.tasks.data import prepare
    from agent2rl_tui.tasks.registry import load_task
    from support.alpaca import REFERENCE_FILE, alpaca_rows

    tmp = tmp_path_factory.mktemp("parity")
    source = tmp / "alpaca-source"
    source.mkdir()
    (source / "alpaca_data.json").write_text(json.dumps(alpaca_rows(8)), encoding="utf-8")
    prepare(load_task("alpacaeval"), [REFERENCE_FILE, source / "alpaca_data.json"])

    secret = "sk-parity-" + secrets.token_hex(16)
    judge, port = local_server.start("judge_server.py", tmp, "--key", secret)
    hf_home = tmp / "hf-home"
    hf_home.mkdir()
    try:
        started = {}
        for backend in ("local", "slurm"):
            spec = tmp / f"{backend}.toml"
            spec.write_text(fill(MATRIX, BACKEND=backend, MODEL=str(tiny_model)), encoding="utf-8")
            # Graded by a scripted eval worker (the same scores on both backends by construction): the
            # campaign's reading is what is compared; the judged run below is graded for real.
            proc = cli("campaign", "start", str(spec), root=tmp / backend, timeout=300,
                       env={**scripted_env(), **submitter_profile(tmp)})
            assert proc.returncode == 0, proc.stdout + proc.stderr
            started[backend] = folder_of(proc.stdout)
        spec = tmp / "judged.toml"
        spec.write_text(fill(JUDGED, MODEL=str(tiny_model), URL=f"http://127.0.0.1:{port}/v1", KEY_VAR=KEY_VAR),
                        encoding="utf-8")
        # The key's value and HF_HOME are set only in the shell that submits the job.
        env = {**os.environ, KEY_VAR: secret, "HF_HOME": str(hf_home)}
        proc = cli("campaign", "start", str(spec), root=tmp / "judged", timeout=300, env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        started["judged"] = folder_of(proc.stdout)

        for name, folder in started.items():
            wait_for(lambda f=folder, n=name: ended(f, slurm=n != "local"), timeout=1800, interval=2,
                     what=f"the {name} campaign's runs and jobs to end")
        yield {**started, "tmp": tmp, "secret": secret, "hf_home": hf_home}
    finally:
        judge.kill()
        judge.wait()


def test_a_jobs_run_gets_the_judge_key_and_hf_home_by_name_never_the_keys_value(campaigns: dict) -> None:
    folder, secret = campaigns["judged"], campaigns["secret"]
    with Campaign(folder) as campaign:
        [row] = campaign.rows()
    assert status(folder) == [("finished", "COMPLETED")], cli("campaign", "status", str(folder)).stdout
    run_dir = Path(row.run_dir or "")
    assert run_dir.parent == folder
    # The judge answers only with the key: the baseline judged on the node means the key reached it.
    s = summarize(run_dir)
    assert (s.status, s.error) == ("finished", None) and s.baseline is not None
    with RunStore.of_run(run_dir) as store:
        baseline = store.baseline()
        config = json.loads(store.run().config_json)
    assert baseline.status == "scored" and baseline.n_items == 2
    assert config["judge"]["key_env"] == KEY_VAR  # the run records the key's name
    # The agent on the node saw the submitting shell's HF_HOME.
    assert (run_dir / "workspace" / "hf_home.txt").read_text(encoding="utf-8") == str(campaigns["hf_home"])

    # The job script names the variables; their values went through Slurm, not through a file.
    job = row.job_id or ""
    script = (folder / "slurm" / job / f"{job}_submission.sh").read_text(encoding="utf-8")
    [export] = re.findall(r"^#SBATCH --export=(\S+)$", script, re.M)
    assert export.split(",")[0] == "ALL" and {KEY_VAR, "HF_HOME", "HF_HUB_OFFLINE"} <= set(export.split(","))
    assert str(campaigns["hf_home"]) not in script
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert any(p.suffix == ".pkl" for p in files) and any(p.name.endswith("_log.out") for p in files)
    assert any(p.is_relative_to(run_dir) for p in files)
    leaked = [str(p.relative_to(folder)) for p in files if secret.encode() in p.read_bytes()]
    assert leaked == [], "the judge key's value was written under the campaign folder"


def results(folder: Path, csv_path: Path) -> tuple[str, list[dict[str, str]], list[str]]:
    """`campaign results` as printed (less its CSV line), the CSV's rows by seed, its columns."""
    out = cli("campaign", "results", str(folder), "--csv", str(csv_path))
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout.replace(f"2 rows -> {csv_path}\n", "")
    with csv_path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        table = sorted(reader, key=lambda r: r["seed"])
    return text, table, list(reader.fieldnames or [])


def test_campaign_results_read_the_same_for_local_and_slurm_runs(campaigns: dict) -> None:
    local, slurm, tmp = campaigns["local"], campaigns["slurm"], campaigns["tmp"]
    assert status(local) == [("finished", "")] * 2 and status(slurm) == [("finished", "COMPLETED")] * 2
    local_text, local_rows, local_columns = results(local, tmp / "local.csv")
    slurm_text, slurm_rows, slurm_columns = results(slurm, tmp / "slurm.csv")
    assert local_columns == slurm_columns == AUTORL_COLUMNS + OUR_COLUMNS
    assert "arith · submitter · - · tiny-llama\n  runs: 2 finished; counted: 2 of 2 valid\n  best of budget: " \
        in local_text
    assert slurm_text == local_text  # the same cell, counts and statistics, to the printed digit

    assert [r["job_id"] for r in local_rows] == ["", ""] and all(r["job_id"].isdigit() for r in slurm_rows)
    for mine, theirs in zip(local_rows, slurm_rows, strict=True):
        same = {k: v for k, v in mine.items() if k not in VARYING}
        assert same == {k: v for k, v in theirs.items() if k not in VARYING}
        assert same["status"] == "finished" and same["best_score"] != "" and same["submissions"] == "1"

    # The statistics behind them, field by field.
    [a] = cell_results(read_runs(local))
    [b] = cell_results(read_runs(slurm))
    assert (a.cell, a.best, a.improvement, a.expected_best) == (b.cell, b.best, b.improvement, b.expected_best)
    assert a.best.n == 2 and a.expected_best[2] is not None


@pytest.mark.asyncio
async def test_the_campaign_and_compare_screens_read_the_same_for_local_and_slurm_runs(campaigns: dict) -> None:
    from textual.widgets import DataTable, Static

    from agent2rl_tui.ui.app import Agent2RLApp
    from agent2rl_tui.ui.screens.campaign import CampaignScreen, CampaignsScreen
    from agent2rl_tui.ui.screens.compare import CompareScreen
    from support.tui import open_runs, plain, settle, table_rows

    async def screens(folder: Path) -> dict[str, list]:
        """Runs -> g (Campaigns) -> enter (the campaign) -> c (Compare), as a user goes."""
        app = Agent2RLApp(root=folder.parent.parent)
        async with app.run_test(size=(160, 48)) as pilot:
            await open_runs(pilot)
            await pilot.press("g")
            await settle(pilot, lambda: isinstance(app.screen, CampaignsScreen), what="Campaigns")
            listed = table_rows(app.screen.query_one("#campaigns", DataTable))
            await pilot.press("enter")
            await settle(pilot, lambda: isinstance(app.screen, CampaignScreen) and app.screen.loaded,
                         timeout=30, what="the campaign")
            cells = table_rows(app.screen.query_one("#cells", DataTable))
            seeds = [r[:3] + r[4:] for r in table_rows(app.screen.query_one("#cell-runs", DataTable))]
            await pilot.press("c")
            await settle(pilot, lambda: isinstance(app.screen, CompareScreen), what="Compare")
            table = app.screen.query_one("#compare", DataTable)
            return {"listed": [r[1:] for r in listed], "cells": cells, "seeds": seeds,
                    "columns": [str(c.label) for c in table.columns.values()], "compare": table_rows(table),
                    "title": plain(app.screen.query_one("#compare-title", Static))}

    local, slurm = await screens(campaigns["local"]), await screens(campaigns["slurm"])
    assert local["listed"] == [["2", "2 finished"]]
    assert [r[:3] for r in local["seeds"]] == [["0", "1", "finished"], ["1", "1", "finished"]]
    assert local["columns"][:8] == ["task", "prompts", "agent", "driver", "base model", "mode", "runs", "valid"]
    [row] = local["compare"]
    assert row[:4] + row[5:8] == ["arith", "default", "submitter", "-", "mode free, first 2 eval items", "2",
                                  "2 of 2 valid"] and "2 runs" in local["title"]
    assert slurm == local  # every cell: the same runs, counts, profile and scores
