"""The run index: which run folders exist, and one summary row per run.

A reader of the record (CLI, TUI, reports) lists and finds runs here. It knows nothing of
processes beyond reading a pid's liveness for the ``lost`` verdict: a run whose supervisor
stopped beating is shown as lost by whoever reads it.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path

from agent2rl_tui.record.contamination import ContaminationResult
from agent2rl_tui.record.progress import read_progress
from agent2rl_tui.record.root import RunError, default_root
from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.store import (
    ACTIVE_STATUSES,
    BASELINE_ID,
    BEST_SCORE_SQL,
    RunStatus,
    RunStore,
    StoreError,
    SubStatus,
)
from agent2rl_tui.review.run_usage import RunUsage, run_usage
from agent2rl_tui.util import procs
from agent2rl_tui.util.timeutil import now

LOST_AFTER_S = 20.0
@dataclass
class RunSummary:
    """One row of ``agent2rl-tui runs`` and of the TUI's Runs screen."""

    path: Path
    id: str
    status: str
    task: str
    agent: str
    driver: str | None
    base_model: str
    budget_s: float
    created_at: float
    budget_start: float | None
    ended_at: float | None
    baseline: float | None
    best: float | None
    n_submissions: int
    end_reason: str | None
    error: str | None
    n_revisions: int = 0
    contained: bool | None = None
    """False when the agent ran (or runs) outside its sandbox; None before it started."""
    contaminated: bool | None = None
    """True when the contamination check found eval items in what the agent wrote."""
    prompt_profile: str | None = None
    """How the grader prompted and read answers (``store.prompt_profile_of``); scores under two
    profiles are two measurements."""
    agent_ended_at: float | None = None
    heartbeat_at: float | None = None
    usage: RunUsage | None = None
    """The run's tokens and cost (``review.run_usage.run_usage``: metered, else from the agent's stream)."""
    base_weights: str | None = None
    """The base model's weights hash, as the grader hashed them for the baseline (None: not scored)."""
    eval_limit: int | None = None
    """``--eval-limit``: graded on the first N eval items only (None: all of them)."""
    mode: str = "free"
    """The training mode the agent was told to keep to (``--mode``)."""
    scoring: str | None = None
    """How far the evaluation under way has got (``40/100``), for a live run; None otherwise."""
    mode_kept: bool | None = None
    """Whether the training seen running kept to the mode (the report's ``mode_check``): False when
    it trained outside it; None for a free run, one without a report, or one that cannot tell."""

    @property
    def base_model_key(self) -> str:
        """What tells two base models apart: their weights (a folder name can hide two models, and two
        names one), else the folder's name where the baseline was never hashed."""
        return f"weights {self.base_weights[:12]}" if self.base_weights else f"folder {self.base_model}"

    @property
    def flags(self) -> str:
        """What a reviewer must see in the runs list: "not contained", "contaminated?", "outside its
        mode", "without a valid submission"."""
        out = []
        if self.contaminated:
            out.append("contaminated?")
        if self.contained is False:
            out.append("not contained")
        if self.mode_kept is False:
            out.append("outside its mode")
        if self.best is None and self.budget_start is not None and self.status not in ACTIVE_STATUSES:
            out.append("without a valid submission")  # its best of budget is its baseline
        return " · ".join(out)

    @property
    def improvement(self) -> float | None:
        if self.best is None or self.baseline is None:
            return None
        return self.best - self.baseline

    @property
    def budget_used_s(self) -> float | None:
        if self.budget_start is None:
            return None
        end = budget_end(self.budget_start, self.agent_ended_at, self.ended_at, self.heartbeat_at,
                         live=self.status in ACTIVE_STATUSES)
        return min((now() if end is None else end) - self.budget_start, self.budget_s)


def budget_end(start: float, agent_ended_at: float | None, ended_at: float | None, heartbeat_at: float | None,
               *, live: bool) -> float | None:
    """When a run's budget clock stopped: the agent's end, else the run's; for a lost run (not live,
    never closed) its last heartbeat, the last sign of life; None while it runs. The CLI, the Runs
    list and the Run screen all read the clock here, so they agree."""
    end = agent_ended_at or ended_at
    if end is None and not live:
        end = heartbeat_at or start
    return end


def effective_status(run: RunRecord) -> str:
    """The stored status, or ``lost`` for an active run whose supervisor stopped beating."""
    status = run.status
    if status not in ACTIVE_STATUSES:
        return status
    beat = run.heartbeat_at or run.created_at
    if status == RunStatus.CREATED:
        # Not started yet: lost only if its supervisor never came up.
        alive = procs.pid_alive(run.supervisor_pid) or now() - beat < LOST_AFTER_S
        return RunStatus.CREATED if alive else RunStatus.LOST
    if now() - beat > LOST_AFTER_S:
        return RunStatus.LOST
    return status


_SUMMARY_SQL = f"""
SELECT r.*,
  (SELECT score FROM submissions WHERE id = {BASELINE_ID} AND status = '{SubStatus.SCORED.value}') AS baseline_score,
  ({BEST_SCORE_SQL}) AS best_score,
  (SELECT COUNT(*) FROM submissions WHERE kind = 'agent' AND status != 'rejected') AS n_submissions,
  (SELECT COUNT(*) FROM revisions) AS n_revisions,
  (SELECT data_json FROM events WHERE kind = 'containment' ORDER BY id DESC LIMIT 1) AS containment_json,
  (SELECT data_json FROM events WHERE kind = 'contamination' ORDER BY id DESC LIMIT 1) AS contamination_json,
  (SELECT json_extract(settings_json, '$.prompt_profile') FROM submissions
     WHERE json_extract(settings_json, '$.prompt_profile') IS NOT NULL ORDER BY id LIMIT 1) AS scored_profile,
  json_extract(r.config_json, '$.prompt_profile') AS config_profile,
  json_extract(r.config_json, '$.eval_limit') AS config_eval_limit,
  json_extract(r.config_json, '$.mode') AS config_mode,
  (SELECT weights_hash FROM submissions WHERE id = {BASELINE_ID}) AS base_weights,
  (SELECT id FROM submissions WHERE status = '{SubStatus.EVALUATING.value}' ORDER BY id LIMIT 1) AS evaluating_id
FROM run r LIMIT 1
"""


def summarize(run_dir: Path) -> RunSummary:
    """One row of the runs list, in one query (listing a thousand runs opens a thousand dbs)."""
    with RunStore.of_run(run_dir) as store:
        row = store.conn.execute(_SUMMARY_SQL).fetchone()
        usage = run_usage(store) if row is not None else None
    if row is None:
        raise StoreError(f"{run_dir / 'run.db'} holds no run")
    run = dict(row)
    mode = run["config_mode"] if isinstance(run["config_mode"], str) and run["config_mode"] else "free"
    status = effective_status(RunRecord.from_row(run))
    progress = read_progress(run_dir, run["evaluating_id"]) \
        if run["evaluating_id"] is not None and status in ACTIVE_STATUSES else None
    return RunSummary(
        path=run_dir,
        id=run["id"],
        status=status,
        task=run["task"],
        agent=run["agent"],
        driver=run["driver"],
        base_model=run["base_model"],
        budget_s=run["budget_s"],
        created_at=run["created_at"],
        budget_start=run["budget_start"],
        ended_at=run["ended_at"],
        agent_ended_at=run["agent_ended_at"],
        heartbeat_at=run["heartbeat_at"],
        baseline=run["baseline_score"],
        best=run["best_score"],
        n_submissions=run["n_submissions"],
        end_reason=run["end_reason"],
        error=run["error"],
        n_revisions=run["n_revisions"],
        contained=_flag(run["containment_json"], "contained", started=run["budget_start"] is not None),
        contaminated=_contaminated(run["contamination_json"]),
        prompt_profile=run["scored_profile"] or run["config_profile"],
        usage=usage,
        base_weights=run["base_weights"],
        eval_limit=run["config_eval_limit"] if isinstance(run["config_eval_limit"], int) else None,
        mode=mode,
        scoring=progress.short() if progress is not None else None,
        mode_kept=None if mode == "free" else _mode_kept(run_dir),
    )


def _mode_kept(run_dir: Path) -> bool | None:
    """The report's verdict on a run in a mode (``review.adherence``): read only for such runs."""
    try:
        check = json.loads((run_dir / "report" / "report.json").read_text(encoding="utf-8")).get("mode_check")
    except (OSError, ValueError, AttributeError):
        return None
    verdict = check.get("verdict") if isinstance(check, dict) else None
    return {"kept": True, "outside": False}.get(verdict) if isinstance(verdict, str) else None


def _flag(data_json: str | None, key: str, *, started: bool) -> bool | None:
    """An event's boolean; with no event, False for a run whose agent started, else None."""
    if data_json:
        return bool(json.loads(data_json).get(key))
    return False if started else None


def _contaminated(data_json: str | None) -> bool | None:
    """The last contamination event's flag (ContaminationResult.event_data); None with no event,
    or one that cannot be read."""
    if not data_json:
        return None
    try:
        return ContaminationResult.from_dict(json.loads(data_json)).contaminated
    except ValueError:
        return None


def run_folders(root: Path | None = None) -> list[Path]:
    """Run folders under ``root``, newest first (run ids start with their UTC start time)."""
    root = root or default_root()
    if not root.is_dir():
        return []
    return sorted((db.parent for db in root.glob("*/run.db")), key=lambda p: p.name, reverse=True)


def summarize_many(folders: list[Path]) -> list[RunSummary]:
    out = []
    for folder in folders:
        try:
            out.append(summarize(folder))
        except (StoreError, OSError, sqlite3.Error) as exc:  # half-copied or foreign: skip it
            print(f"warning: skipping {folder}: {exc}", file=sys.stderr)
    return out


def list_runs(root: Path | None = None) -> list[RunSummary]:
    return summarize_many(run_folders(root))


def find_run(ref: str, root: Path | None = None) -> Path:
    """A run folder from a path, a run id, or a unique prefix/suffix of an id."""
    p = Path(ref).expanduser()
    if (p / "run.db").exists():
        return p.resolve()
    root = root or default_root()
    if p.is_dir() and not (root / ref / "run.db").exists():  # a folder, but not a run's: say what it is
        held = sorted(d.parent.name for d in p.glob("*/run.db"))
        if held:
            raise RunError(f"{p} is a folder of runs, not a run ({len(held)}: {', '.join(held[:3])}"
                           f"{', ...' if len(held) > 3 else ''}); `agent2rl-tui --root {p} runs` lists them, "
                           f"and a run of it is `--root {p} ... RUN` or its own folder")
        raise RunError(f"{p} is not a run folder (it has no run.db); `agent2rl-tui runs` lists the runs under {root}")
    if (root / ref / "run.db").exists():
        return (root / ref).resolve()
    matches = [d for d in root.glob("*/run.db") if ref in d.parent.name]
    if len(matches) == 1:
        return matches[0].parent.resolve()
    if not matches:
        raise RunError(f"no run {ref!r} under {root}; `agent2rl-tui runs` lists them")
    names = ", ".join(sorted(m.parent.name for m in matches))
    raise RunError(f"{ref!r} matches several runs ({names}); give more of the id")
