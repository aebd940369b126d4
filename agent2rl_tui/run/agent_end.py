"""Ending the agent at its deadline: its process group, the processes that escaped it, its exit code.

The supervisor ends the agent in three moves, each recorded when it had to use force: SIGTERM to
the agent's group, a grace period, SIGKILL (``agent_killed``); then every descendant of the
supervisor that left the group (a double fork, a ``setsid``) and is none of the supervisor's own
services (``strays_killed``); then the agent's exit status, read once through its Popen. Kept
apart from the supervisor so the order of these moves, which decides what survives a deadline,
reads in one place. What follows the exit is here too (``after_exit``): the error step of a CLI
that failed silently, and its login files leaving the run's home.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Callable, Set
from pathlib import Path

from agent2rl_tui.record.store import RunStore
from agent2rl_tui.run import agent_setup, containment
from agent2rl_tui.run.agent_output import AgentOutput
from agent2rl_tui.run.profiles import AgentProfile
from agent2rl_tui.util import procs
from agent2rl_tui.util.timeutil import human_duration, now

log = logging.getLogger("agent2rl.supervisor")

NAMESPACE_EXIT_S = 10.0
"""How long the processes of a sandbox's namespace get to exit after its init died, on a loaded machine."""


def end_group(agent_pid: int, grace_s: float, keep: Set[int], store: RunStore) -> None:
    """SIGTERM to the agent's group, ``grace_s`` to exit, then SIGKILL; ``keep`` are never signalled."""
    if not procs.group_alive(agent_pid):
        return
    log.info("ending the agent's process group (SIGTERM, then SIGKILL after %s)", human_duration(grace_s))
    if procs.end_group(agent_pid, grace_s, keep=keep):
        store.event("supervisor", "agent_killed", "the agent ignored SIGTERM and was killed")


def kill_strays(exclude: Set[int], keep_unreaped: Callable[[], set[int]], contained: bool, store: RunStore) -> None:
    """Kill the supervisor's descendants left once the agent's group has ended, but ``exclude``.

    In the sandbox, the kernel kills every process of the namespace when its init dies, but a loaded
    machine takes a while to let them exit: they are waited for (up to ``NAMESPACE_EXIT_S``) before
    anything left is a stray. ``keep_unreaped()`` are the children whose zombies are never reaped here
    (the agent's and the services' Popens must read their exit status)."""
    strays = procs.descendants(os.getpid(), exclude=set(exclude))
    if contained:
        settle = time.monotonic() + NAMESPACE_EXIT_S
        while strays and time.monotonic() < settle:
            time.sleep(0.1)
            procs.reap_zombie_children(keep_unreaped())
            strays = procs.descendants(os.getpid(), exclude=set(exclude))
    if strays:
        procs.kill_pids(strays)
        store.event("supervisor", "strays_killed", f"killed {len(strays)} processes that left the agent's group",
                    {"pids": strays})


def exit_code(agent: subprocess.Popen[bytes], contained: bool) -> int:
    """The agent's exit code as the record keeps it (``containment.exit_code``); kills it if it will not end."""
    try:
        code = agent.wait(timeout=30)
    except subprocess.TimeoutExpired:
        agent.kill()
        code = agent.wait()
    return containment.exit_code(code, contained=contained)


def after_exit(run_dir: Path, code: int, output: AgentOutput | None, profile: AgentProfile | None) -> None:
    """What follows the agent's exit: a CLI that failed silently gets an error step in its
    transcript, and the login files its profile names leave the run's home."""
    normalizer = output.recorder.normalizer if output is not None else None
    if normalizer is not None and hasattr(normalizer, "agent_exited"):
        normalizer.agent_exited(code, lambda: agent_setup.stderr_tail(run_dir), now())
    if profile is not None and profile.login_files:
        removed = containment.forget_logins(run_dir / containment.AGENT_HOME, profile.login_files)
        if removed:
            log.info("login files removed from the run's home: %s", ", ".join(removed))
