"""Machine vitals: GPU, CPU, memory, disk and the agent's process group, sampled into run.db.

A thread in the supervisor samples every few seconds: per-GPU utilisation and memory
(NVML through nvidia-ml-py, when a GPU is there), CPU use, RAM, free disk under the run
folder, and the agent group's process count and resident memory (CPU, RAM and processes
through psutil). It records an event when something is wrong: GPU memory nearly full,
disk nearly full, the agent's process group gone. On a machine without a GPU the GPU part
reads "no GPU". A second thread, the process watch, looks at the agent's process group every
second (a walk of /proc: about 5 ms among 300 processes, half a percent of a core) and notes each
process (``record.seen_processes``): command line, when seen, CPU time. It is apart from the
sampler so that a sample waiting on run.db's lock cannot make it miss a short training process;
the log is written as the ``agent_processes`` event while new processes appear (a minute apart at
most) and, by ``stop``, once more at the end.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from agent2rl_tui.record.seen_processes import ProcessLog
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.util.diskfull import disk_full_message, is_disk_full
from agent2rl_tui.util.gpus import Gpus, GpuSample
from agent2rl_tui.util.procs import group_members
from agent2rl_tui.util.timeutil import now

log = logging.getLogger("agent2rl.vitals")
GPU_MEM_ALERT = 0.95
DISK_ALERT_FRACTION = 0.05
DISK_ALERT_BYTES = 2 << 30
PROCESSES_EVERY = 12
"""Samples between two ``agent_processes`` events when new processes were seen (a minute at the
default interval); ``PROCESSES_ANYWAY`` when none were (their last-seen times move on)."""
PROCESSES_ANYWAY = 120


@dataclass
class Sample:
    at: float
    cpu_pct: float | None
    mem_used: int
    mem_total: int
    disk_free: int
    disk_total: int
    agent_procs: int
    agent_rss: int
    gpus: list[GpuSample] = field(default_factory=list)
    gpu_note: str = ""


class CpuMeter:
    """CPU use between two reads of psutil.cpu_times(), in percent of all cores.

    Each meter keeps its own last read: ``psutil.cpu_percent(interval=None)`` keeps one for
    the whole process, which any other caller would move.
    """

    def __init__(self) -> None:
        self.last = self._read()

    @staticmethod
    def _read() -> tuple[float, float] | None:
        """(total, idle) CPU seconds since boot, all cores together."""
        try:
            t = psutil.cpu_times()
        except (OSError, psutil.Error):
            return None
        # guest time is already counted in user and nice (Linux); iowait is idle time
        total = sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
        return total, t.idle + getattr(t, "iowait", 0.0)

    def percent(self) -> float | None:
        cur = self._read()
        if cur is None or self.last is None:
            return None
        total, idle = cur[0] - self.last[0], cur[1] - self.last[1]
        self.last = cur
        return min(100.0, max(0.0, 100.0 * (1 - idle / total))) if total > 0 else 0.0


def memory() -> tuple[int, int]:
    """(used, total) bytes of RAM, used being what is not available to new programs."""
    try:
        vm = psutil.virtual_memory()
    except (OSError, psutil.Error):
        return 0, 0
    return vm.total - vm.available, vm.total


def group_usage(procs: list[psutil.Process]) -> tuple[int, int]:
    """(process count, resident bytes) of a process group's live members (``group_members``)."""
    rss = 0
    for proc in procs:
        try:
            rss += proc.memory_info().rss
        except psutil.Error:  # gone since it was listed (still counted), or not ours to read
            pass
    return len(procs), rss


class VitalsSampler:
    """Samples every ``interval_s`` into run.db's samples table, raising events on trouble."""

    def __init__(self, run_dir: Path, interval_s: float = 5.0, process_interval_s: float = 1.0) -> None:
        self.run_dir = run_dir
        self.interval_s = interval_s
        self.process_interval_s = process_interval_s
        self.agent_pgid: int | None = None
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None
        self.watch: threading.Thread | None = None
        self.gpus = Gpus()
        self.cpu = CpuMeter()
        self._alerted: set[str] = set()
        self.processes = ProcessLog()
        self._samples = 0
        self._written = (0, 0)  # (processes, sample) at the last ``agent_processes`` event

    def take(self) -> Sample:
        used, total = memory()
        st = os.statvfs(self.run_dir)
        procs, rss = group_usage(group_members(self.agent_pgid) if self.agent_pgid else [])
        try:
            gpus = self.gpus.sample()
            note = self.gpus.note
        except Exception as exc:  # noqa: BLE001 - a GPU falling off the bus must not stop sampling
            gpus, note = [], f"GPU read failed: {exc}"
        return Sample(at=now(), cpu_pct=self.cpu.percent(), mem_used=used, mem_total=total,
                      disk_free=st.f_bavail * st.f_frsize, disk_total=st.f_blocks * st.f_frsize,
                      agent_procs=procs, agent_rss=rss, gpus=gpus, gpu_note=note)

    def record(self, store: RunStore, s: Sample) -> None:
        store.add_sample(s.at, cpu_pct=s.cpu_pct, mem_used=s.mem_used, mem_total=s.mem_total, disk_free=s.disk_free,
                         disk_total=s.disk_total, agent_procs=s.agent_procs, agent_rss=s.agent_rss,
                         gpus=[asdict(g) for g in s.gpus], gpu_note=s.gpu_note)
        self._check(store, s)
        self._samples += 1
        seen, since = len(self.processes), self._samples - self._written[1]
        if since >= PROCESSES_ANYWAY or (since >= PROCESSES_EVERY and seen > self._written[0]):
            self.write_processes(store)

    def write_processes(self, store: RunStore) -> None:
        """The processes seen so far as the ``agent_processes`` event (the last one is what counts:
        a run of hours writes one a minute only while new processes appear, not a copy a minute)."""
        seen = len(self.processes)
        if seen:
            store.event("processes", "agent_processes", f"{seen} agent process(es) seen", self.processes.record())
        self._written = (seen, self._samples)

    def _alert(self, store: RunStore, key: str, active: bool, message: str, data: dict[str, Any]) -> None:
        """One event when a condition starts; none again until it has cleared."""
        if active and key not in self._alerted:
            self._alerted.add(key)
            store.event("vitals", key.split(":")[0], message, data)
        elif not active:
            self._alerted.discard(key)

    def _check(self, store: RunStore, s: Sample) -> None:
        for g in s.gpus:
            frac = g.mem_used / g.mem_total if g.mem_total else 0.0
            self._alert(store, f"gpu_memory_full:{g.index}", frac >= GPU_MEM_ALERT,
                        f"GPU {g.index} memory {frac:.0%} full ({g.mem_used >> 20} of {g.mem_total >> 20} MiB)",
                        {"gpu": g.index, "used": g.mem_used, "total": g.mem_total})
        low = s.disk_free < DISK_ALERT_BYTES or (s.disk_total and s.disk_free / s.disk_total < DISK_ALERT_FRACTION)
        self._alert(store, "disk_full", bool(low), f"disk nearly full: {s.disk_free >> 20} MiB free under the run folder",
                    {"free": s.disk_free, "total": s.disk_total})
        if self.agent_pgid:
            self._alert(store, "agent_group_gone", s.agent_procs == 0,
                        "the agent's process group has no live process", {"pgid": self.agent_pgid})

    def start(self) -> None:
        self.thread = threading.Thread(target=self._loop, name="vitals", daemon=True)
        self.watch = threading.Thread(target=self._watch, name="process-watch", daemon=True)
        self.thread.start()
        self.watch.start()

    def stop(self, store: RunStore | None = None) -> None:
        """Stop both threads, then write the processes seen, with ``store`` (the caller's) or a
        store of its own: written here, not by the sampler's thread, so that a sampler still
        waiting on the record cannot leave the last processes out of it."""
        self.stop_event.set()
        for thread in (self.thread, self.watch):
            if thread:
                thread.join(timeout=10)
        try:
            if store is not None:
                self.write_processes(store)
            else:
                with RunStore.of_run(self.run_dir) as own:
                    self.write_processes(own)
        except Exception:  # noqa: BLE001 - the record's trouble must not stop the run's end
            log.exception("could not record the agent's processes")

    def _watch(self) -> None:
        while not self.stop_event.is_set():
            pgid = self.agent_pgid
            if pgid:
                try:
                    self.processes.update(group_members(pgid), now())
                except Exception:  # noqa: BLE001 - best effort, like the samples
                    log.exception("process watch failed")
            self.stop_event.wait(self.process_interval_s)

    def _loop(self) -> None:
        store = RunStore.of_run(self.run_dir)
        failing = False
        try:
            while True:
                try:
                    self.record(store, self.take())
                    failing = False
                except Exception as exc:  # noqa: BLE001 - sampling is best effort; the run goes on
                    if is_disk_full(exc):
                        if not failing:  # once a spell, not every sample
                            log.warning("vitals samples are not written: %s", disk_full_message(self.run_dir))
                    else:
                        log.exception("vitals sample failed")
                    failing = True
                if self.stop_event.wait(self.interval_s):
                    return
        finally:
            store.close()
