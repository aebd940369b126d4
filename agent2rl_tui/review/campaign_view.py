"""A campaign's results: per cell n, mean, sd, bootstrap 95% CIs, expected best of k; a CSV row per run.

Reads the campaign folder as the scheduler leaves it (``campaign.db``: one row per run
attempt, superseded attempts marked) and each current run's run.db; never writes. A cell's
statistics use its finished runs that have a best score (a run that ended without one counts
in ``runs`` but not in the statistics, and ``failed``/``lost`` say how many).

On Slurm (``backend = "slurm"``) it also reads what Slurm says of each run's job
(``job_states``: ``squeue``, then ``sacct``), for the one rule every reader shares
(``run_state``): a job that ended before its run started is a failed run, and says why
(``failed_before_run``).
"""

from __future__ import annotations

import csv
import sqlite3
import subprocess
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from agent2rl_tui.record.store import RunStatus
from agent2rl_tui.review.index import RunSummary, summarize
from agent2rl_tui.review.run_usage import NONE, RunUsage
from agent2rl_tui.review.stats import Summary, expected_best_of, summarize_values
from agent2rl_tui.util.timeutil import iso

AUTORL_COLUMNS = ["run_id", "timestamp", "task", "agent", "driver_model", "base_model", "baseline", "best_score",
                  "improvement", "submissions", "duration_s", "success", "workspace"]
"""AutoRL-Bench's results.csv columns (RD-Agent ``autorl_bench/core/utils.py``), in its order."""
OUR_COLUMNS = ["campaign", "cell", "seed", "attempt", "job_id", "status", "end_reason", "prompt_profile", "contained",
               "contaminated", "revisions", "budget_s", "tokens_in", "tokens_out", "cached_tokens", "cost_usd",
               "tokens_source", "error"]
"""``tokens_*`` and ``cost_usd`` follow ``review.run_usage.run_usage`` (``tokens_source`` says which source:
metered, or from the agent's stream); an empty ``cost_usd`` is an unknown cost."""
CampaignRow = Mapping[str, Any] | sqlite3.Row
"""A row of campaign.db's runs table: as read (sqlite3.Row), or as a dict."""


def read_summary(row: CampaignRow) -> RunSummary | None:
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


def run_state(row: CampaignRow, summary: RunSummary | None, job: JobInfo | None = None) -> str:
    """queued or submitted (no run yet), superseded (queued again), failed (its Slurm ``job`` ended
    before the run started, or its folder cannot be read), else the run's own status (created,
    running, finished, failed, lost, stopped ...)."""
    if row["superseded"]:
        return JobState.SUPERSEDED
    if summary is None:
        if not row["run_dir"]:
            if not row["job_id"]:
                return JobState.QUEUED
            return RunStatus.FAILED if job is not None and job.ended else JobState.SUBMITTED
        return RunStatus.FAILED
    return summary.status


ENDED_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
                          "DEADLINE", "PREEMPTED", "REVOKED", "SPECIAL_EXIT"})
"""Slurm's states of a job that has ended (``squeue``/``sacct``); the rest are waiting or running."""


@dataclass(frozen=True)
class JobInfo:
    """What Slurm says of one job: its state (PENDING, RUNNING, COMPLETED, FAILED, CANCELLED,
    TIMEOUT ...), why a pending job waits, and an ended job's exit code."""

    state: str
    reason: str = ""
    exit_code: str = ""

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES

    def __str__(self) -> str:
        note = self.reason if self.state == "PENDING" and self.reason not in ("", "None") else ""
        if self.ended and self.exit_code not in ("", "0:0"):
            note = f"exit {self.exit_code}"
        return self.state + (f" ({note})" if note else "")


def _slurm(*cmd: str) -> list[list[str]]:
    """A Slurm client's ``|``-separated lines, [] where it fails (not installed, no controller, unknown ids)."""
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if proc.returncode != 0:
        return []
    return [line.split("|") for line in proc.stdout.splitlines() if line.strip()]


def job_states(job_ids: list[str]) -> dict[str, JobInfo]:
    """Slurm's word on each job: ``squeue`` for the jobs the controller still holds (pending,
    running, and ended ones for ``MinJobAge``), then ``sacct`` for the others: the accounting
    database where there is one, else the job completion log (``sacct -c``, JobCompType).
    A job neither knows is left out."""
    ids = sorted({j for j in job_ids if j}, key=lambda j: (len(j), j))
    if not ids:
        return {}
    found: dict[str, JobInfo] = {}
    for jid, state, reason in (r for r in _slurm("squeue", "-h", "-t", "all", "-o", "%i|%T|%r", "-j", ",".join(ids))
                               if len(r) == 3):
        found[jid] = JobInfo(state, reason)
    rest = [j for j in ids if j not in found]
    if rest:
        fields = ("-n", "-P", "-X", "-o", "JobID,State,ExitCode", "-j", ",".join(rest))
        rows = _slurm("sacct", *fields) or _slurm("sacct", "-c", *fields)
        for r in rows:
            if len(r) == 3 and r[0] in rest:
                found[r[0]] = JobInfo(r[1].split()[0] if r[1] else "", exit_code=r[2])  # "CANCELLED by 0"
    return found


def on_slurm(folder: Path) -> bool:
    """True for a campaign whose runs are real Slurm jobs (``backend = "slurm"``, not ``cluster = "local"``)."""
    try:
        raw = tomllib.loads((folder / "campaign.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return raw.get("backend") == "slurm" and raw.get("slurm", {}).get("cluster") in (None, "slurm")


def slurm_jobs(folder: Path, rows: Iterable[CampaignRow]) -> dict[str, JobInfo]:
    """Slurm's word on the jobs of a campaign's rows ({} for a campaign not on Slurm)."""
    if not on_slurm(folder):
        return {}
    return job_states([r["job_id"] for r in rows if r["job_id"]])


def failed_before_run(folder: Path, row: CampaignRow, job: JobInfo | None) -> str | None:
    """Why a run's job ended before the run started (None: it has not ended, or the run started):
    what the job recorded (a run it could not make), else the last line of its log, else Slurm's state."""
    if row["run_dir"] or not row["job_id"] or job is None or not job.ended:
        return None
    why = row["error"] or _last_line(folder / "slurm" / row["job_id"] / f"{row['job_id']}_0_log.err")
    return f"job {row['job_id']} ended {job} before its run started" + (f": {why}" if why else "")


def _last_line(path: Path, limit: int = 300) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:limit] if lines else ""


@dataclass
class CampaignRun:
    row: dict[str, Any]
    summary: RunSummary | None
    job: JobInfo | None = field(default=None)
    """Slurm's word on the row's job (None: no job, not on Slurm, or Slurm does not know it)."""
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
    improvement: Summary
    expected_best: dict[int, float | None]

    def count(self, state: str) -> int:
        return sum(1 for r in self.runs if r.state == state)


def read_runs(folder: Path, *, ask_slurm: bool = True) -> list[CampaignRun]:
    """Every row of the campaign with its run's summary, and on Slurm its job's state (``ask_slurm``)."""
    db = sqlite3.connect(f"file:{folder / 'campaign.db'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        rows = [dict(r) for r in db.execute("SELECT * FROM runs ORDER BY id")]
    finally:
        db.close()
    jobs = slurm_jobs(folder, [r for r in rows if not r["run_dir"] and not r["superseded"]]) if ask_slurm else {}
    out = []
    for row in rows:
        job = jobs.get(row["job_id"] or "")
        out.append(CampaignRun(row, read_summary(row), job, failed_before_run(folder, row, job)))
    return out


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
            "error": (s.error if s else None) or r.why or row.get("error") or "",
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
