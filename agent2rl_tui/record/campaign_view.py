"""A campaign's results: per cell n, mean, sd, bootstrap 95% CIs, expected best of k; a CSV row per run.

Reads the campaign folder as the scheduler leaves it (``campaign.db``: one row per run
attempt, superseded attempts marked) and each current run's run.db; never writes. A cell's
statistics use its finished runs that have a best score (a run that ended without one counts
in ``runs`` but not in the statistics, and ``failed``/``lost`` say how many).
"""

from __future__ import annotations

import csv
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from agent2rl_tui.record.index import RunSummary, summarize
from agent2rl_tui.record.stats import Summary, expected_best_of, summarize_values
from agent2rl_tui.record.store import RunStatus
from agent2rl_tui.record.usage import NONE, RunUsage
from agent2rl_tui.util.timeutil import iso

AUTORL_COLUMNS = ["run_id", "timestamp", "task", "agent", "driver_model", "base_model", "baseline", "best_score",
                  "improvement", "submissions", "duration_s", "success", "workspace"]
"""AutoRL-Bench's results.csv columns (RD-Agent ``autorl_bench/core/utils.py``), in its order."""
OUR_COLUMNS = ["campaign", "cell", "seed", "attempt", "job_id", "status", "end_reason", "prompt_profile", "contained",
               "contaminated", "revisions", "budget_s", "tokens_in", "tokens_out", "cached_tokens", "cost_usd",
               "tokens_source", "error"]
"""``tokens_*`` and ``cost_usd`` follow ``record.usage.run_usage`` (``tokens_source`` says which source:
metered, or from the agent's stream); an empty ``cost_usd`` is an unknown cost."""


def read_summary(row: Mapping[str, Any]) -> RunSummary | None:
    """The current run of a campaign row, if it has started (an unreadable run folder: None)."""
    if not row["run_dir"] or row["superseded"]:
        return None
    try:
        return summarize(Path(row["run_dir"]))
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


def run_state(row: Mapping[str, Any], summary: RunSummary | None) -> str:
    """queued or submitted (no run yet), superseded (queued again), failed (its folder cannot be
    read), else the run's own status (created, running, finished, failed, lost, stopped ...)."""
    if row["superseded"]:
        return JobState.SUPERSEDED
    if summary is None:
        if not row["run_dir"]:
            return JobState.SUBMITTED if row["job_id"] else JobState.QUEUED
        return RunStatus.FAILED
    return summary.status


@dataclass
class CampaignRun:
    row: dict[str, Any]
    summary: RunSummary | None

    @property
    def state(self) -> str:
        return run_state(self.row, self.summary)


@dataclass
class CellResult:
    cell: str
    task: str
    agent: str
    driver: str
    base_model: str
    runs: list[CampaignRun]
    best: Summary
    improvement: Summary
    expected_best: dict[int, float | None]

    def count(self, state: str) -> int:
        return sum(1 for r in self.runs if r.state == state)


def read_runs(folder: Path) -> list[CampaignRun]:
    db = sqlite3.connect(f"file:{folder / 'campaign.db'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        rows = [dict(r) for r in db.execute("SELECT * FROM runs ORDER BY id")]
    finally:
        db.close()
    return [CampaignRun(row, read_summary(row)) for row in rows]


def cell_results(runs: list[CampaignRun], ks: tuple[int, ...] = (1, 2, 3, 5)) -> list[CellResult]:
    cells: dict[str, list[CampaignRun]] = {}
    for r in runs:
        cells.setdefault(r.row["cell"], []).append(r)
    out = []
    for key, members in cells.items():
        done = [r.summary for r in members if r.state == "finished" and r.summary and r.summary.best is not None]
        bests = [s.best for s in done if s.best is not None]
        improvements = [s.improvement for s in done if s.improvement is not None]
        first = members[0].row
        out.append(CellResult(key, first["task"], first["agent"], first["driver"] or "-",
                              Path(first["base_model"]).name, [m for m in members if m.state != "superseded"],
                              summarize_values(bests), summarize_values(improvements),
                              {k: expected_best_of(bests, k) for k in ks}))
    return out


def csv_rows(folder: Path, runs: list[CampaignRun]) -> list[dict[str, Any]]:
    rows = []
    for r in runs:
        s, row = r.summary, r.row
        duration = (s.ended_at - s.budget_start) if s and s.ended_at and s.budget_start else None
        rows.append({
            "run_id": s.id if s else "", "timestamp": iso(s.created_at) if s else "", "task": row["task"],
            "agent": row["agent"], "driver_model": row["driver"] or "", "base_model": Path(row["base_model"]).name,
            "baseline": s.baseline if s else "", "best_score": s.best if s else "",
            "improvement": s.improvement if s else "", "submissions": s.n_submissions if s else "",
            "duration_s": round(duration, 1) if duration is not None else "",
            "success": bool(s and s.improvement is not None and s.improvement > 0),
            "workspace": str(s.path / "workspace") if s else "",
            "campaign": folder.name, "cell": row["cell"], "seed": row["seed"], "attempt": row["attempt"],
            "job_id": row["job_id"] or "",
            "status": r.state, "end_reason": s.end_reason if s else "", "prompt_profile": s.prompt_profile if s else "",
            "contained": s.contained if s else "", "contaminated": s.contaminated if s else "",
            "revisions": s.n_revisions if s else "", "budget_s": s.budget_s if s else "",
            **usage_columns(s.usage if s else None),
            "error": (s.error if s else None) or row.get("error") or "",
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


def write_csv(folder: Path, path: Path) -> int:
    runs = read_runs(folder)
    rows = csv_rows(folder, runs)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=AUTORL_COLUMNS + OUR_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)
