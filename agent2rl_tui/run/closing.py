"""What the supervisor does once the agent's phase is over, to close the record.

Each step is never fatal: submissions left unscored failed with ``run_ended``, the contamination
check (record/contamination/), the sweep that keeps the run's secrets out of its record
(record/redact.py), the report with its result line in the supervisor's log, and the optional
narrative (``--summarizer-*``) followed by the report again with it. Whatever fails becomes an
event in the record, and the run's status is written after them all, so whoever sees the run
ended finds its report.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from agent2rl_tui.record.contamination import check_run, write_contamination
from agent2rl_tui.record.redact import Redactor, redact_db, redact_tree
from agent2rl_tui.record.runconfig import RunConfig
from agent2rl_tui.record.store import RunStore, SubStatus
from agent2rl_tui.review.report import write_report
from agent2rl_tui.review.report_model import Report
from agent2rl_tui.run.summarizer import SummarizerSettings, describe, write_narrative
from agent2rl_tui.tasks.registry import Task
from agent2rl_tui.util.diskfull import disk_full_message, is_disk_full
from agent2rl_tui.util.timeutil import now

log = logging.getLogger("agent2rl.supervisor")


def check_contamination(run_dir: Path, store: RunStore, task: Task) -> None:
    """Scan what the agent wrote for eval items (a run whose agent never started has nothing to scan)."""
    if store.run().budget_start is None:
        return
    try:
        result = check_run(run_dir, task)
        write_contamination(run_dir, result)
    except Exception as exc:  # noqa: BLE001 - the record closes whatever the scan does
        log.exception("the contamination check failed")
        store.event("supervisor", "contamination_failed", f"contamination check failed: {exc}")
        return
    items = result.items
    if items:
        files = ", ".join(h.path for h in result.hits[:5])
        log.warning("contamination check: %d eval item(s) found in what the agent wrote (%s)", len(items), files)
        message = f"{len(items)} eval item(s) found in what the agent wrote"
    elif not result.checkable_items:
        log.info("contamination check: nothing checked (no eval item long enough to be told apart from other text)")
        message = "not checked: no checkable eval items"
    else:
        log.info("contamination check: no eval item found in %d file(s) (%d checkable items)",
                 result.files_scanned, result.checkable_items)
        message = "no eval item found in what the agent wrote"
    store.event("supervisor", "contamination", message, result.event_data())


def fail_unfinished(store: RunStore) -> None:
    """Submissions still queued or being scored when the run closes: failed, saying why."""
    for sub in store.submissions():
        if sub.status in (SubStatus.QUEUED, SubStatus.EVALUATING):
            store.update_submission(
                sub.id, status=SubStatus.FAILED, finished_at=now(), error_code="run_ended",
                error="run_ended: the run ended before this submission was evaluated",
            )


def write_final_report(run_dir: Path, store: RunStore, status: str) -> None:
    """report/ with the run's final status, and its result line in the log."""
    try:
        report = write_report(run_dir, status=status)
        log.info("%s", result_line(report))
    except Exception:  # noqa: BLE001
        log.exception("could not write the report")
        store.event("supervisor", "report_failed", "could not write report/report.json")


def result_line(report: Report) -> str:
    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    return (f"result: baseline {f(report.baseline.score)}, best {f(report.best.score if report.best else None)}, "
            f"improvement {f(report.improvement)}, {len(report.submissions)} submission(s)")


def write_run_narrative(run_dir: Path, store: RunStore, cfg: RunConfig, status: str) -> None:
    """The optional narrative after the final report, then the report again with it."""
    if not cfg.summarizer:
        return
    try:
        narrative = write_narrative(run_dir, SummarizerSettings.from_dict(cfg.summarizer))
        log.info("%s", describe(narrative))
        failed = bool(narrative.failed or narrative.error)
        store.event("supervisor", "narrative_failed" if failed else "narrative", describe(narrative))
        write_report(run_dir, status=status)
    except Exception as exc:  # noqa: BLE001
        log.exception("could not write the narrative")
        store.event("supervisor", "narrative_failed",
                    f"could not write report/narrative.json: {type(exc).__name__}: {exc}")


KEPT_APART = ("snapshots.git", "run.db", "run.db-wal", "run.db-shm", "run.db-journal")
"""What the end's sweep of the run folder leaves to others: snapshots.git (its blobs were written
through the redactor) and run.db (swept value by value, ``redact_db``)."""


def redact_record(run_dir: Path, store: RunStore, redactor: Redactor) -> None:
    """Sweep the run's secrets out of what its processes wrote, once they have ended (the
    workspace and the agent's home it keeps, the logs, the evaluations, run.db), and record how
    many were replaced; never fatal."""
    while_written = redactor.count
    try:
        swept = redact_tree(run_dir, redactor, skip=KEPT_APART)
        db_values = redact_db(run_dir / "run.db", redactor)
    except Exception as exc:  # noqa: BLE001 - the record closes whatever the sweep does
        log.exception("the sweep for secrets failed")
        store.event("supervisor", "redaction_failed", f"the sweep for secrets failed: {exc}")
        return
    total = while_written + swept.redactions + db_values
    if total:
        log.warning("%d secret(s) kept out of the record (%d as written, %d in files, %d run.db values)", total,
                    while_written, swept.redactions, db_values)
    store.event("supervisor", "redactions", f"{total} secret(s) replaced in the record", {
        "secrets": len(redactor.secrets), "total": total, "while_written": while_written,
        "in_files": swept.redactions, "files_changed": swept.changed, "run_db_values": db_values,
        "files_swept": swept.files, "too_large": swept.too_large})


class Attempts:
    """Closing steps tried one after the other, whatever the one before did: a step that fails is
    logged in one line (a full disk named, ``util.diskfull``; any other error with its traceback)
    and the next one runs, so a run whose disk an agent filled still ends its processes and,
    with the room its reserve gave back, says how it ended."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.disk_full: str | None = None  # the message, once a step met a full disk

    def __call__(self, what: str, step: Callable[[], object]) -> bool:
        try:
            step()
            return True
        except Exception as exc:  # noqa: BLE001 - the next step runs all the same
            if is_disk_full(exc):
                self.disk_full = self.disk_full or disk_full_message(self.run_dir.parent)
                log.error("could not %s: %s", what, self.disk_full)
            else:
                log.exception("could not %s", what)
            return False


def crash_error(exc: BaseException, run_dir: Path) -> str:
    """The run's error for an exception that ended the supervisor's work: a full disk in words."""
    if is_disk_full(exc):
        return (f"{disk_full_message(run_dir.parent)}: the run could not go on; its workspace is kept as it was, "
                f"and once there is room `agent2rl-tui run grade {run_dir.name} PATH` grades a checkpoint it left "
                "(recorded as graded after the run)")
    return f"supervisor error: {type(exc).__name__}: {exc}"
