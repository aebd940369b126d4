"""A campaign's results: per cell n, mean, sd, bootstrap 95% CIs, expected best of k; a CSV row per run.

Reads the campaign folder as its backend leaves it (``campaign.db``, ``record.campaign_db``: one
row per run attempt, superseded attempts marked) and each current run's run.db; never writes,
and never asks a scheduler. A cell's statistics count every ended run whose agent started, a run
without a valid submission at its baseline (improvement 0, ``review.outcome``), with the cell's
valid-submission rate beside them; runs still going or failed before their agent started are
left out and counted apart (``CellResult.tally``).

On Slurm (``backend = "slurm"``) a row's state also depends on its job's: a job that ended before
its run started is a failed run, and says why (``run_state``, ``failed_before_run``: the one rule
every reader shares). What the job's scheduler says is handed in (``jobs``: the run layer asks,
``run.campaign.campaign_runs``), else read as the backend last recorded it in campaign.db.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from agent2rl_tui.record import campaign_db
from agent2rl_tui.record.campaign_db import CampaignRow, JobInfo
from agent2rl_tui.record.store import RunStatus
from agent2rl_tui.review.index import RunSummary, summarize
from agent2rl_tui.review.outcome import AGENT_NEVER_STARTED, STILL_RUNNING, Tally, tally
from agent2rl_tui.review.run_usage import NONE, RunUsage
from agent2rl_tui.review.stats import Summary, expected_best_of, summarize_values
from agent2rl_tui.util.timeutil import iso

__all__ = ["AUTORL_COLUMNS", "CAMPAIGN_STATES", "OUR_COLUMNS", "CampaignRow", "CampaignRun", "CellResult", "JobInfo",
           "JobState", "cell_results", "csv_rows", "failed_before_run", "read_runs", "read_summary", "run_state",
           "usage_columns", "write_csv"]

AUTORL_COLUMNS = ["run_id", "timestamp", "task", "agent", "driver_model", "base_model", "baseline", "best_score",
                  "improvement", "submissions", "duration_s", "success", "workspace"]
"""AutoRL-Bench's results.csv columns (RD-Agent ``autorl_bench/core/utils.py``), in its order."""
OUR_COLUMNS = ["campaign", "cell", "seed", "attempt", "job_id", "status", "end_reason", "prompt_profile", "contained",
               "contaminated", "revisions", "budget_s", "tokens_in", "tokens_out", "cached_tokens", "cost_usd",
               "tokens_source", "error"]
"""``tokens_*`` and ``cost_usd`` follow ``review.run_usage.run_usage`` (``tokens_source`` says which source:
metered, or from the agent's stream); an empty ``cost_usd`` is an unknown cost."""


def read_summary(row: CampaignRow) -> RunSummary | None:
    """The current run of a campaign row, if it has started (an unreadable run folder: None)."""
    if not row.run_dir or row.superseded:
        return None
    try:
        return summarize(Path(row.run_dir))
    except Exception:  # noqa: BLE001 - unreadable: shown as failed
        return None


class JobState(StrEnum):
    """A campaign run's state before (or instead of) its run's own ``RunStatus``."""

    QUEUED = "queued"
    SUBMITTED = "submitted"
    SUPERSEDED = "superseded"


CAMPAIGN_STATES: tuple[str, ...] = (JobState.QUEUED, JobState.SUBMITTED, RunStatus.CREATED, RunStatus.PREPARING,
                                    RunStatus.RUNNING, RunStatus.ENDING, RunStatus.FINISHED, RunStatus.FAILED,
                                    RunStatus.LOST, RunStatus.STOPPED)
"""Every state a current campaign run can be in, in the order a campaign lists them."""


def run_state(row: CampaignRow, summary: RunSummary | None, job: JobInfo | None = None) -> str:
    """queued or submitted (no run yet), superseded (queued again), failed (its Slurm ``job`` ended
    before the run started, or its folder cannot be read), else the run's own status (created,
    running, finished, failed, lost, stopped ...)."""
    if row.superseded:
        return JobState.SUPERSEDED
    if summary is None:
        if not row.run_dir:
            if not row.job_id:
                return JobState.QUEUED
            return RunStatus.FAILED if job is not None and job.ended else JobState.SUBMITTED
        return RunStatus.FAILED
    return summary.status


def failed_before_run(row: CampaignRow, job: JobInfo | None) -> str | None:
    """Why a run's job ended before the run started (None: it has not ended, or the run started):
    what the job recorded (a run it could not make), else what it left behind (the last line of its
    log, ``JobInfo.detail``), else its scheduler's word alone."""
    if row.run_dir or not row.job_id or job is None or not job.ended:
        return None
    why = row.error or job.detail
    return f"job {row.job_id} ended {job} before its run started" + (f": {why}" if why else "")


@dataclass
class CampaignRun:
    row: CampaignRow
    summary: RunSummary | None
    job: JobInfo | None = field(default=None)
    """The scheduler's word on the job of a row whose run has not started (None: no job, not on
    Slurm, or Slurm does not know it)."""
    why: str | None = None
    """Why it failed before its run started (``failed_before_run``)."""

    @property
    def state(self) -> str:
        return run_state(self.row, self.summary, self.job)


@dataclass
class CellResult:
    cell: str
    task: str
    agent: str
    driver: str
    base_model: str
    runs: list[CampaignRun]
    best: Summary
    """Of best of budget (``review.outcome``): the best valid submission, else the baseline."""
    improvement: Summary
    expected_best: dict[int, float | None]
    tally: Tally

    def count(self, state: str) -> int:
        return sum(1 for r in self.runs if r.state == state)


def read_runs(folder: Path, *, jobs: Mapping[str, JobInfo] | None = None) -> list[CampaignRun]:
    """Every row of the campaign with its run's summary and, for a row whose run has not started,
    its job's state: from ``jobs`` (what the scheduler says now), else as campaign.db last recorded it
    (a job the scheduler has forgotten keeps the state it last had)."""
    db = campaign_db.connect(folder, readonly=True)
    try:
        rows = campaign_db.read_rows(db)
        known = {**campaign_db.read_jobs(db), **(jobs or {})}
    finally:
        db.close()
    out = []
    for row in rows:
        job = known.get(row.job_id or "") if not row.run_dir and not row.superseded else None
        out.append(CampaignRun(row, read_summary(row), job, failed_before_run(row, job)))
    return out


def cell_results(runs: list[CampaignRun], ks: tuple[int, ...] = (1, 2, 3, 5)) -> list[CellResult]:
    cells: dict[str, list[CampaignRun]] = {}
    for r in runs:
        cells.setdefault(r.row.cell, []).append(r)
    out = []
    for key, members in cells.items():
        current = [m for m in members if m.state != JobState.SUPERSEDED]
        # Rows whose run never started: queued (still to come) or failed before it.
        counted = tally([m.summary for m in current if m.summary is not None],
                        [AGENT_NEVER_STARTED if m.state == RunStatus.FAILED else STILL_RUNNING
                         for m in current if m.summary is None])
        bests, improvements = counted.bests, counted.improvements
        first = members[0].row
        out.append(CellResult(key, first.task, first.agent, first.driver or "-", Path(first.base_model).name,
                              current, summarize_values(bests), summarize_values(improvements),
                              {k: expected_best_of(bests, k) for k in ks}, counted))
    return out


def csv_rows(folder: Path, runs: list[CampaignRun]) -> list[dict[str, Any]]:
    rows = []
    for r in runs:
        s, row = r.summary, r.row
        duration = (s.ended_at - s.budget_start) if s and s.ended_at and s.budget_start else None
        rows.append({
            "run_id": s.id if s else "", "timestamp": iso(s.created_at) if s else "", "task": row.task,
            "agent": row.agent, "driver_model": row.driver or "", "base_model": Path(row.base_model).name,
            "baseline": s.baseline if s else "", "best_score": s.best if s else "",
            "improvement": s.improvement if s else "", "submissions": s.n_submissions if s else "",
            "duration_s": round(duration, 1) if duration is not None else "",
            "success": bool(s and s.improvement is not None and s.improvement > 0),
            "workspace": str(s.path / "workspace") if s else "",
            "campaign": folder.name, "cell": row.cell, "seed": row.seed, "attempt": row.attempt,
            "job_id": row.job_id or "",
            "status": r.state, "end_reason": s.end_reason if s else "", "prompt_profile": s.prompt_profile if s else "",
            "contained": s.contained if s else "", "contaminated": s.contaminated if s else "",
            "revisions": s.n_revisions if s else "", "budget_s": s.budget_s if s else "",
            **usage_columns(s.usage if s else None),
            "error": (s.error if s else None) or r.why or row.error or "",
        })
    return rows


def usage_columns(u: RunUsage | None) -> dict[str, Any]:
    if u is None or u.source == NONE:
        return {"tokens_in": "", "tokens_out": "", "cached_tokens": "", "cost_usd": "",
                "tokens_source": u.label if u else ""}
    return {"tokens_in": u.tokens_in, "tokens_out": u.tokens_out,
            "cached_tokens": u.cached_tokens if u.cached_tokens is not None else "",
            "cost_usd": round(u.cost_usd, 6) if u.cost_usd is not None and not u.unpriced_calls else "",
            "tokens_source": u.label}


def write_csv(folder: Path, path: Path, *, jobs: Mapping[str, JobInfo] | None = None) -> int:
    """One row per run attempt (``AUTORL_COLUMNS`` then ``OUR_COLUMNS``) to ``path``; how many."""
    runs = read_runs(folder, jobs=jobs)
    rows = csv_rows(folder, runs)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=AUTORL_COLUMNS + OUR_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)
