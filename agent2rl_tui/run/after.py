"""Grading a checkpoint after its run ended: ``agent2rl-tui run grade RUN PATH``.

A run can end with a checkpoint it never got graded: its disk filled before the grader could
take a copy, the deadline came while the agent saved it, the supervisor was killed. A person
grades it afterwards with the run's own grader, started for this alone: the same intake, eval
worker, items (the run's eval draw), prompts and settings as every submission of the run. What it
grades is recorded as graded after the run (kind ``after``, ``record.store.AFTER_KIND``): beside the
run's submissions in run.db and in the report, never among them, nor in the run's best, its
score history or its budget.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

from agent2rl_tui.grader.client import GraderClient, GraderUnavailable
from agent2rl_tui.grader.launch import spawn_grader
from agent2rl_tui.record.root import RunError
from agent2rl_tui.record.store import ACTIVE_STATUSES, RunStore
from agent2rl_tui.review.report import write_report
from agent2rl_tui.util import procs

READY_S = 300.0


def grade_after(run_dir: Path, model_path: str) -> dict[str, Any]:
    """Grade ``model_path`` (a folder of the run's workspace, as the agent would name it) for an
    ended run; the grader's answer (``status``, ``score`` ... or ``error``, ``detail``)."""
    with RunStore.of_run(run_dir) as store:
        run = store.run()
    if run.status in ACTIVE_STATUSES:
        raise RunError(f"run {run_dir.name} is {run.status}: its agent submits through its own grader; "
                       "grade a checkpoint once the run has ended (or `run stop` it)")
    timeout = float(run.config.eval_timeout_s) + 120.0
    process = spawn_grader(run_dir, run_dir / "logs" / "grader.log", after_the_run=True)
    client = GraderClient(process.url, timeout=timeout)
    try:
        client.wait_ready(READY_S, alive=lambda: process.popen.poll() is None)
        answer: dict[str, Any] = client.submit(model_path).json()
    except GraderUnavailable as exc:
        raise RunError(f"the run's grader did not start: {exc} (see {run_dir / 'logs' / 'grader.log'})") from None
    finally:
        client.close()
        _stop(process.popen)
    with RunStore.of_run(run_dir) as store:
        store.event("cli", "graded_after", f"{model_path} graded after the run: "
                    f"{answer.get('status') or answer.get('error')} {answer.get('score', '')}".rstrip(),
                    {"model_path": model_path, "submission_id": answer.get("submission_id")})
    write_report(run_dir)
    return answer


def _stop(grader: subprocess.Popen[bytes]) -> None:
    procs.stop_process(grader, 30.0)
    procs.signal_group(grader.pid, signal.SIGKILL)  # whatever of its group is left
