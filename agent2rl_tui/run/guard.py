"""The run's guard: what a dead supervisor started ends, and its record is closed, within seconds.

The supervisor starts the grader, the meter, the train-environment service and the agent, each
in a session of its own so that a terminal's Ctrl-C reaches the supervisor only. None of them is
killed with it, then: after a ``kill -9`` (or the OOM killer, or a crash in C) they ran on, a
GPU's memory held, until someone closed the record. The services now die with it
(``util.procs.die_with_launcher``) and a contained agent's sandbox too (bubblewrap's
``--die-with-parent``); an agent that is not contained is a program of anyone's, and nothing in
it asks to end. So the supervisor starts this guard first, holding the other end of a pipe: the
kernel closes the pipe when the supervisor dies, however it dies, and the guard then ends the
agent's process group (TERM, then KILL after a grace: an agent may save a checkpoint), ends
whatever else of the run still runs, and closes the record as ``lost``, saying why
(``lifecycle.reconcile``). A supervisor that ends well writes ``done`` first, and the guard leaves.

``python -m agent2rl_tui.run.guard RUN_DIR SUPERVISOR_PID`` (its stdin: the pipe). Its own lines go
to ``logs/guard.log``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DONE = b"done\n"
GRACE_S = 3.0


class Guard:
    """The supervisor's side: the guard process and the pipe's write end (only the supervisor's)."""

    def __init__(self, run_dir: Path) -> None:
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)
        with (run_dir / "logs" / "guard.log").open("ab") as log:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "agent2rl_tui.run.guard", str(run_dir), str(os.getpid())],
                stdin=subprocess.PIPE, stdout=log, stderr=log, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def release(self) -> None:
        """The run is closed: the guard leaves without doing anything."""
        try:
            assert self.popen.stdin is not None
            self.popen.stdin.write(DONE)
            self.popen.stdin.close()
            self.popen.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.popen.kill()


def wait_for_supervisor() -> bool:
    """Block until the pipe closes; whether the supervisor said it was done (else it died)."""
    seen = b""
    while chunk := os.read(0, 64):
        seen = (seen + chunk)[-len(DONE):]
    return seen == DONE


def end_agent_group(run_dir: Path) -> str:
    """TERM the agent's process group, KILL it after ``GRACE_S``; what was done, in words."""
    from agent2rl_tui.record.store import RunStore
    from agent2rl_tui.util import procs

    with RunStore.of_run(run_dir) as store:
        pgid = store.run().agent_pid
    if not pgid or not procs.group_alive(pgid):
        return "no agent process was left"
    if procs.end_group(pgid, GRACE_S):
        return f"the agent's processes (group {pgid}) were killed"
    return f"the agent's processes (group {pgid}) ended on TERM"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m agent2rl_tui.run.guard RUN_DIR SUPERVISOR_PID", file=sys.stderr)
        return 2
    run_dir, supervisor_pid = Path(args[0]), args[1]
    if wait_for_supervisor():
        return 0
    from agent2rl_tui.run.lifecycle import reconcile
    from agent2rl_tui.util.timeutil import iso, now

    died = now()
    print(f"{iso(died)} the supervisor (pid {supervisor_pid}) died without closing the run", file=sys.stderr,
          flush=True)
    (run_dir / ".room").unlink(missing_ok=True)  # the supervisor's reserve: room to close the record
    done = end_agent_group(run_dir)
    why = (f"the supervisor (pid {supervisor_pid}) died at {iso(died)} without closing the run: it was killed "
           "(kill -9, the OOM killer) or crashed (see logs/supervisor.log); the run's guard ended what it had "
           f"started ({done})")
    status = reconcile(run_dir, why=why)
    print(f"{iso(now())} {done}; the record reads {status}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
