"""What the supervisor does once the agent's phase is over, to close the record.

Each step is never fatal: the contamination check (record/contamination/), the report with its
result line in the supervisor's log, and the optional narrative (``--summarizer-*``) followed by
the report again with it. Whatever fails becomes an event in the record, and the run's status
is written after them all, so whoever sees the run ended finds its report.
"""

from __future__ import annotations

import logging
from pathlib import Path

from agent2rl_tui.record.contamination import check_run, write_contamination
from agent2rl_tui.record.runconfig import RunConfig
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.review.report import write_report
from agent2rl_tui.review.report_model import Report
from agent2rl_tui.run.summarizer import SummarizerSettings, describe, write_narrative
from agent2rl_tui.tasks.registry import Task

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
    else:
        log.info("contamination check: no eval item found in %d file(s) (%d checkable items)",
                 result.files_scanned, result.checkable_items)
        message = "no eval item found in what the agent wrote"
    store.event("supervisor", "contamination", message, result.event_data())


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
