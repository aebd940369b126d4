"""What the agent's processes ran: each command line seen in its sandbox, when, and its CPU time.

The diagnosis says a submission was trained with GRPO, or online, only with evidence that such
code ran (``review.iterations``): a file that exists, or a line the agent printed, is not that
evidence (an agent can write a GRPO script it never runs, or print a trainer's log lines). The
vitals sampler (``run.vitals``) hands this log the agent's process group at each sample; the
log keeps, per process, its command line (capped), when it was first and last seen and its CPU
seconds, and the sampler writes the heaviest ones to run.db as the ``agent_processes`` event.
It is sampled by the supervisor outside the sandbox, so the agent cannot forge it; a process
that lives less than the watch's interval (a second) may be missed.

A process can change its program (``exec``): a stage started with ``subprocess`` is, for a
moment after the fork, a copy of the agent with the agent's command line. A process first seen
in that moment is named by the program it then runs (the fork's copy was seen once only); one
that ran a program for longer and then another keeps both, each with its own span (else a
training stage first seen in its fork would be recorded under the agent's own command, and the
diagnosis would say it was written, not seen running).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import psutil

CMDLINE_CAP = 400
KEPT = 300
"""The most processes the event lists (the most CPU first); the rest are counted."""


@dataclass
class SeenProcess:
    cmd: str
    first: float
    last: float
    cpu_s: float

    def as_json(self) -> dict[str, Any]:
        return {"cmd": self.cmd, "first": round(self.first, 3), "last": round(self.last, 3),
                "cpu_s": round(self.cpu_s, 2)}


class ProcessLog:
    """The agent's processes seen so far, by (pid, start time), and the programs they left by exec."""

    def __init__(self) -> None:
        self.seen: dict[tuple[int, float], SeenProcess] = {}
        self.left: list[SeenProcess] = []
        """Programs a process ran for more than one sample before it exec'd another (at most ``KEPT``)."""
        self.lock = threading.Lock()  # updated by the watch, read by whoever writes the event

    def update(self, members: list[psutil.Process], at: float) -> None:
        with self.lock:
            self._update(members, at)

    def _update(self, members: list[psutil.Process], at: float) -> None:
        for proc in members:
            try:
                with proc.oneshot():
                    key = (proc.pid, proc.create_time())
                    times = proc.cpu_times()
                    cmd = " ".join(proc.cmdline())[:CMDLINE_CAP] or f"[{proc.name()}]"
            except (psutil.Error, OSError):
                continue
            cpu = times.user + times.system
            entry = self.seen.get(key)
            if entry is None:
                self.seen[key] = SeenProcess(cmd, at, at, cpu)
            elif entry.cmd != cmd:  # it exec'd another program
                ran_before = entry.last > entry.first  # seen in more than one sample: not just a fork's copy
                if ran_before and len(self.left) < KEPT:
                    self.left.append(entry)
                self.seen[key] = SeenProcess(cmd, at if ran_before else entry.first, at, cpu)
            else:
                entry.last, entry.cpu_s = at, max(entry.cpu_s, cpu)

    def record(self) -> dict[str, Any]:
        """The ``agent_processes`` event's data: the heaviest processes first, and how many more."""
        with self.lock:
            ordered = sorted([*self.seen.values(), *self.left], key=lambda p: p.cpu_s, reverse=True)
            return {"processes": [p.as_json() for p in ordered[:KEPT]], "more": max(0, len(ordered) - KEPT)}

    def __len__(self) -> int:
        return len(self.seen) + len(self.left)


def processes_between(data: dict[str, Any] | None, start: float, end: float) -> list[str]:
    """Command lines of the recorded processes seen alive in [start, end]."""
    out = []
    for p in (data or {}).get("processes") or []:
        if not isinstance(p, dict) or not isinstance(p.get("cmd"), str):
            continue
        first, last = p.get("first"), p.get("last")
        if isinstance(first, int | float) and isinstance(last, int | float) and first <= end and last >= start:
            out.append(p["cmd"])
    return out


def process_spans(data: dict[str, Any] | None) -> list[tuple[str, float, float]]:
    """Every recorded process as (command line, first seen, last seen)."""
    out = []
    for p in (data or {}).get("processes") or []:
        if not isinstance(p, dict) or not isinstance(p.get("cmd"), str):
            continue
        first, last = p.get("first"), p.get("last")
        if isinstance(first, int | float) and isinstance(last, int | float) and not isinstance(first, bool) \
                and not isinstance(last, bool) and last >= first:
            out.append((p["cmd"], float(first), float(last)))
    return out
