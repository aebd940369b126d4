"""The supervisor: one detached process that owns a run from preparation to report.

It builds the workspace, starts the grader and waits for the baseline score (before the
budget starts), launches the agent in its own process group with the task's environment,
stamps every agent output line into logs/agent.log, ends the agent at the deadline
(SIGTERM to the group, a grace period, SIGKILL), lets queued evaluations finish, and
writes the final status and report. It heartbeats into run.db throughout, so a reader
can tell a live run from a lost one. Whatever fails, the record is closed properly.

Run as ``python -m agent2rl_tui.run.supervisor RUN_DIR`` (``agent2rl-tui run start``
does this in a new session, so the run outlives the terminal).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from functools import cached_property
from pathlib import Path
from typing import Literal

from agent2rl_tui.record.redact import Redactor, redact_logging
from agent2rl_tui.record.revisions import Snapshotter
from agent2rl_tui.record.runconfig import RunConfig
from agent2rl_tui.record.store import RunStatus, RunStore
from agent2rl_tui.run import agent_end, agent_setup, closing, containment, neighbours, services
from agent2rl_tui.run.agent_output import AgentOutput
from agent2rl_tui.run.grader_service import BaselineFailed, GraderService
from agent2rl_tui.run.guard import Guard
from agent2rl_tui.run.metering import MeterProcess
from agent2rl_tui.run.profiles import AgentProfile, driver_setup, get_profile
from agent2rl_tui.run.progress import ResultLog, heartbeat
from agent2rl_tui.run.prompt import build_prompt
from agent2rl_tui.run.services import ServiceError
from agent2rl_tui.run.train_envs import URL_VAR as TRAIN_ENV_URL
from agent2rl_tui.run.train_envs import TrainEnvProcess
from agent2rl_tui.run.vitals import VitalsSampler
from agent2rl_tui.run.watcher import RevisionWatcher, take_snapshot
from agent2rl_tui.run.workspace import make_run_folder, populate_workspace, write_run_meta
from agent2rl_tui.tasks.registry import Task, load_task
from agent2rl_tui.util import procs as procs
from agent2rl_tui.util.diskfull import Reserve, is_disk_full
from agent2rl_tui.util.logsetup import configure_logging
from agent2rl_tui.util.timeutil import human_duration, iso, now

log = logging.getLogger("agent2rl.supervisor")
HEARTBEAT_S = 2.0
SERVICES = ("grader", "meter", "train_envs")
"""The supervisor's attributes that hold its long-running processes (``run.services.Service``)."""


STOP_REASONS = ("stopped", "time_limit")
"""End reasons of a run stopped before its deadline (status ``stopped``): asked to (SIGTERM: ``agent2rl-tui
stop``, scancel), or its Slurm job near its time limit."""


class RunFailed(Exception):
    """The run cannot go on; the message becomes the run's error."""


class Supervisor:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir.resolve()
        self.store = RunStore.of_run(self.run_dir)
        self.run = self.store.run()
        self.cfg: RunConfig = self.run.config
        self.ws = self.run_dir / "workspace"
        self.stop_requested = threading.Event()
        self.stop_count = 0
        self.done = threading.Event()
        self.grader: GraderService | None = None
        self.agent: subprocess.Popen[bytes] | None = None
        self.grader_url: str | None = None
        self.results = ResultLog(self.store)
        self.redactor = Redactor(agent_setup.user_secrets())  # more as the run makes them
        self.snapshotter = Snapshotter(self.run_dir, redact=self.redactor.data)
        self.watcher: RevisionWatcher | None = None
        self.output: AgentOutput | None = None
        self.vitals = VitalsSampler(self.run_dir)
        self.containment: containment.Containment | None = None
        self.profile: AgentProfile | None = None
        self.meter: MeterProcess | None = None
        self.train_envs: TrainEnvProcess | None = None
        self.guard: Guard | None = None
        self.waiting_output: AgentOutput | None = None  # what a full disk kept from the logs, till the end
        self.end_reason: str | None = None

    # -- signals and heartbeat --------------------------------------------------------
    def _on_signal(self, signum: int, frame: object) -> None:
        self.stop_count += 1
        self.stop_requested.set()
        log.info("received signal %s: stopping the run (%d)", signal.Signals(signum).name, self.stop_count)

    def _stop_reason(self) -> str:
        """``stopped``, or the end reason whoever asked for the stop recorded with it
        (``lifecycle.stop_run(reason=...)``: ``time_limit`` for a Slurm job near its time limit)."""
        given = (self.store.last_event_data("stop") or {}).get("end_reason")
        return given if given in STOP_REASONS else "stopped"

    # -- the run ----------------------------------------------------------------------
    def main(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        self.guard = guard = Guard(self.run_dir)  # first: whatever happens to us from here, the run is closed
        self.room = Reserve(self.run_dir / ".room")  # for closing the record on a disk the agent filled
        subreaper = procs.become_subreaper()
        redact_logging(self.redactor)  # logs/supervisor.log holds no secret either
        self.store.update_run(supervisor_pid=os.getpid(), status=RunStatus.PREPARING, heartbeat_at=now())
        self.store.event("supervisor", "start", f"supervisor started (pid {os.getpid()})",
                         {"subreaper": subreaper})
        if overlap := neighbours.announce(self.run_dir, self.store, self.cfg.gpus):
            log.warning("%s", overlap)
        threading.Thread(target=heartbeat, args=(self.run_dir, self.done, HEARTBEAT_S), name="heartbeat",
                         daemon=True).start()
        self.vitals.start()
        final_status, error = RunStatus.FINISHED, None
        try:
            self.prepare()
            self.start_grader()
            if self.stop_requested.is_set():
                raise RunFailed("stopped before the budget started")
            reason = self.run_agent()
            self.store.update_run(status=RunStatus.ENDING, heartbeat_at=now())  # the agent is done; grading ends
            self.drain_grader()
            if reason in STOP_REASONS:
                final_status = RunStatus.STOPPED
        except RunFailed as exc:
            final_status = RunStatus.STOPPED if self.stop_requested.is_set() else RunStatus.FAILED
            error = str(exc)
            log.error("run %s: %s", final_status, exc)
        except Exception as exc:  # noqa: BLE001 - record any crash, then close the record
            final_status, error = RunStatus.FAILED, closing.crash_error(exc, self.run_dir)
            full = is_disk_full(exc)
            log.error("%s: %s", "the run cannot go on" if full else "supervisor crashed", error, exc_info=not full)
        finally:
            if self.close(final_status, error):
                guard.release()  # else the guard closes the record as lost, saying why
        return 0 if final_status in (RunStatus.FINISHED, RunStatus.STOPPED) else 1

    def close(self, final_status: str, error: str | None) -> bool:
        """End what the run started and close its record, each step tried whatever the one before
        did (``closing.Attempts``); whether the record now says how the run ended."""
        self.room.release()  # the room kept for these steps, on a disk the agent may have filled
        attempt = closing.Attempts(self.run_dir)
        if (waiting := self.waiting_output) is not None:
            attempt("write the agent's output that waited for room", waiting.close)
        attempt("mark the run as ending", lambda: self.store.update_run(status=RunStatus.ENDING, heartbeat_at=now()))
        for what, step in (
                ("end the agent", self.shutdown_agent), ("stop the meter", lambda: self.stop_service("meter")),
                ("stop the train environments", lambda: self.stop_service("train_envs")), ("stop the watcher", self.stop_watcher),
                ("stop the grader", self.stop_grader), ("stop the vitals", lambda: self.vitals.stop(self.store)),
                ("close unfinished submissions", lambda: closing.fail_unfinished(self.store)),
                ("check for contamination", lambda: closing.check_contamination(self.run_dir, self.store, self.task)),
                ("sweep secrets", lambda: closing.redact_record(self.run_dir, self.store, self.redactor)),
                ("record peak memory", lambda: AgentOutput.record_peak_memory(self.store))):
            attempt(what, step)
        error = error or attempt.disk_full
        ended = {"end_reason": self.end_reason} if self.end_reason else {}

        def record_end() -> None:
            self.store.update_run(ended_at=now(), error=error, heartbeat_at=now(), **ended)
            self.store.event("supervisor", "end", f"run {final_status}", {"error": error})

        attempt("record the end", record_end)
        # The report first: whoever sees the run ended finds its report.
        attempt("write the report", lambda: closing.write_final_report(self.run_dir, self.store, final_status))
        attempt("write the narrative", lambda: closing.write_run_narrative(self.run_dir, self.store, self.cfg, final_status))
        closed = attempt("record the status", lambda: self.store.update_run(status=final_status, heartbeat_at=now()))
        self.done.set()
        self.store.close()
        return closed

    @cached_property
    def task(self) -> Task:
        return load_task(self.cfg.task_folder)

    def prepare(self) -> None:
        log.info("preparing the workspace in %s", self.ws)
        make_run_folder(self.run_dir)
        populate_workspace(
            self.run_dir,
            self.task,
            Path(self.run.base_model_source),
            self.run.base_model,
            budget_s=self.run.budget_s,
            grace_s=self.run.grace_s,
            prompt_profile=self.cfg.prompt_profile,
            mode=self.cfg.mode,
        )
        self.store.event("supervisor", "workspace", "workspace ready")

    def start_grader(self) -> None:
        self.grader = service = GraderService(self.run_dir, self.cfg.gpus)
        self.grader_url = service.start()
        assert service.process is not None
        self.redactor.add(service.process.secret)
        grader, port = service.process.popen, service.process.port
        self.store.update_run(grader_pid=grader.pid, grader_port=port)
        log.info("grader started (pid %s, port %s); scoring the baseline", grader.pid, port)
        try:
            score = service.wait_baseline(self.cfg.eval_timeout_s + 120.0, self.stop_requested, self.store)
        except BaselineFailed as exc:
            raise RunFailed(str(exc)) from exc
        log.info("baseline score %.2f", score)

    def run_agent(self) -> str:
        profile = get_profile(self.run.agent, self._profiles_path())
        model = self.run.driver
        prompt = build_prompt(self.ws, self.run.budget_s, self.cfg.mode)
        (self.run_dir / "prompt.md").write_text(prompt, encoding="utf-8")
        if profile.instructions_file:
            (self.ws / profile.instructions_file).write_text(prompt, encoding="utf-8")
        self.profile = profile
        assert self.grader_url is not None
        env = agent_setup.agent_env(self.run, self.ws, profile, model, self.grader_url)
        self.redactor.add(*agent_setup.agent_secrets(profile, env))
        if self.task.level == 3:  # the agent plays its train games through the service
            env[TRAIN_ENV_URL] = self.start_train_envs()
        # The driver URL as this CLI takes it (a variable, arguments, settings): the meter's, in
        # front of --driver-url or the CLI's own API, else --driver-url itself.
        agent_url = self.start_meter(profile, env) or self.cfg.driver_url
        setup = driver_setup(profile, agent_url, model, env)
        env.update(setup.env)
        if profile.model_env and setup.model:
            env[profile.model_env] = setup.model
        argv = profile.argv(prompt=prompt, model=setup.model, workspace=self.ws,
                            command=self.cfg.agent_command, driver_args=setup.args)
        start = now()
        deadline = start + self.run.budget_s
        self.store.update_run(budget_start=start, deadline=deadline, status=RunStatus.RUNNING)
        write_run_meta(
            self.ws,
            {"task": self.run.task, "base_model": self.run.base_model, "start_time": start,
             "timeout_s": self.run.budget_s, "end_time": deadline},
        )
        agent_setup.prepare_home(self.run_dir, self.store, self.cfg, profile, setup,
                                 keys_held=self.meter is not None and self.meter.keys.holds)
        self.containment = agent_setup.contain(self.run_dir, self.store, self.cfg, self.task, profile, env)
        if profile.own_home and not self.containment.contained:  # its own home all the same
            env["HOME"] = str(self.run_dir / containment.AGENT_HOME)
        argv = self.containment.wrap(argv)
        take_snapshot(self.snapshotter, self.store, "start")
        self.watcher = RevisionWatcher(self.snapshotter)
        self.watcher.start()
        shown = " ".join("PROMPT" if a == prompt else a for a in argv)
        log.info("starting agent %s: %s (budget %s, deadline %s)", profile.name, shown,
                 human_duration(self.run.budget_s), iso(deadline))
        output = AgentOutput(self.run_dir, profile.stream_format, self.redactor)
        self.output = output
        self.agent = subprocess.Popen(
            argv,
            cwd=self.ws,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.vitals.agent_pgid = self.agent.pid
        self.store.update_run(agent_pid=self.agent.pid)
        self.store.event("supervisor", "agent_start", f"agent started (pid {self.agent.pid})")
        output.attach(self.agent.stdout, self.agent.stderr)
        try:
            reason = self._wait_agent(deadline)
            self.shutdown_agent()
        finally:
            if not output.close(final=False):  # a full disk: the rest is written once the record closes
                self.waiting_output = output
            self.output = None
        self.stop_watcher()
        return reason

    def start_meter(self, profile: AgentProfile, env: dict[str, str]) -> str | None:
        """The meter in front of the agent's driver API (``run/metering.py``); its URL, or None
        for a run without one (the record says why). The keys it holds leave the agent's
        environment ``env``: it gets their tokens."""
        meter = agent_setup.meter(self.run_dir, self.store, self.cfg, profile, env)
        if meter is None:
            return None
        try:
            url = meter.start()
        except (ServiceError, OSError) as exc:
            raise RunFailed(f"the meter did not start: {exc}") from exc
        self.meter = meter
        env.update({held.name: held.token for held in meter.keys.held})
        self.redactor.add(*meter.keys.secrets)
        log.info("the agent's calls are metered: %s -> %s", url, meter.upstream)
        return url

    def start_train_envs(self) -> str:
        """The run's train-environment service (``run/train_envs.py``), ready; its URL."""
        service = TrainEnvProcess(self.run_dir)
        self.train_envs = service
        try:
            url = service.start()
        except ServiceError as exc:
            raise RunFailed(f"the train-environment service did not start: {exc}") from exc
        self.redactor.add(url.rstrip("/").rsplit("/", 1)[-1])  # its secret path
        log.info("train environments served at 127.0.0.1:%s (pid %s)", url.split(":")[2].split("/")[0], service.pid)
        self.store.event("supervisor", "train_envs", f"train-environment service started (pid {service.pid})",
                         {"pid": service.pid})
        return url

    def check_services(self) -> None:
        """The grader, the meter and the train-environment service in one loop (``services.check``):
        one that died is started again on the same URL, or dropped when it cannot be."""
        for attr in SERVICES:
            service = getattr(self, attr)
            if service is None:
                continue
            before = service.pid
            if not services.check(service, self.store):
                setattr(self, attr, None)
            elif attr == "grader" and service.pid != before:
                self.store.update_run(grader_pid=service.pid)

    def stop_service(self, attr: Literal["meter", "train_envs"]) -> None:
        """Stop the meter or the train-environment service, once."""
        service = getattr(self, attr)
        setattr(self, attr, None)
        if service is not None:
            service.stop()

    def _profiles_path(self) -> Path | None:
        path = self.cfg.profiles_path
        return Path(path) if path else None

    def stop_watcher(self) -> None:
        """Stop watching and take the final snapshot of the workspace."""
        if self.watcher is None:
            return
        watcher, self.watcher = self.watcher, None
        watcher.stop()
        take_snapshot(self.snapshotter, self.store, "final")

    def _wait_agent(self, deadline: float) -> str:
        assert self.agent is not None
        ticks = 0
        while True:
            ticks += 1
            if ticks % 5 == 0:
                self.results.report_new()
            if self.agent.poll() is not None:
                # Killed by the same signal as we were (Slurm's scancel signals every process of
                # the job): a stop, not an agent that finished.
                reason = self._stop_reason() if self.stop_requested.is_set() else "agent_exited"
                break
            if now() >= deadline:
                reason = "deadline"
                break
            if self.stop_requested.is_set():
                reason = self._stop_reason()
                break
            procs.reap_zombie_children(self._popen_pids())
            if self.output is not None:
                self.output.tick()
            if ticks % 5 == 0:
                self.check_services()
            time.sleep(0.2)
        self.end_reason = reason
        try:
            self.store.update_run(end_reason=reason)
        except sqlite3.OperationalError as exc:  # a full disk: written with the end, in the room kept for it
            if not is_disk_full(exc):
                raise
        log.info("agent phase over: %s", reason)
        return reason

    def _service_pids(self) -> set[int]:
        return {pid for attr in (*SERVICES, "guard") if (s := getattr(self, attr)) is not None
                and (pid := s.pid) is not None}  # the guard too: in a session of its own, it is no stray

    def _popen_pids(self) -> set[int]:
        return self._service_pids() | ({self.agent.pid} if self.agent is not None else set())

    def shutdown_agent(self) -> None:
        """End the agent's group (TERM, grace, KILL) and any descendant that escaped it (``run/agent_end.py``)."""
        if self.agent is None:
            return
        agent, self.agent = self.agent, None
        contained = bool(self.containment and self.containment.contained)
        agent_end.end_group(agent.pid, float(self.run.grace_s), self._popen_pids() | {agent.pid}, self.store)
        if self.watcher is not None:  # its git must not be among the strays killed next
            self.watcher.stop()
        agent_end.kill_strays(self._service_pids(), lambda: self._popen_pids() | {agent.pid}, contained, self.store)
        code = agent_end.exit_code(agent, contained)
        agent_end.after_exit(self.run_dir, code, self.output, self.profile)
        self.stop_service("meter")  # the calls the agent left under way are recorded as they stood
        self.stop_service("train_envs")  # no training after the deadline
        self.vitals.agent_pgid = None  # gone by design from here on: not an "agent group gone" event
        shutil.rmtree(self.run_dir / containment.AGENT_TMP, ignore_errors=True)
        self.store.update_run(agent_exit_code=code, agent_ended_at=now())
        self.store.event("supervisor", "agent_end", f"agent exited with code {code}")
        log.info("agent exit code %s", code)

    def drain_grader(self) -> None:
        """Let submissions received before the deadline be scored (a second stop cuts this)."""
        timeout = self.cfg.eval_timeout_s
        last, waited_since = -1, time.monotonic()
        while self.grader:
            self.check_services()
            if self.grader is None or self.grader.died() is not None:
                return
            pending = self.store.pending_count()
            self.results.report_new()
            if pending == 0:
                return
            if pending != last:
                log.info("waiting for %d submission(s) to be scored", pending)
                last, waited_since = pending, time.monotonic()
            if self.stop_count >= 2 or time.monotonic() - waited_since > timeout + 60:
                return
            time.sleep(0.5)

    def stop_grader(self) -> None:
        """Stop the grader and its eval workers (``GraderService.stop``)."""
        grader, self.grader = self.grader, None
        left = grader.stop() if grader is not None else []
        if left:
            self.store.event("supervisor", "workers_killed", f"killed {len(left)} process(es) left by the grader",
                             {"pids": left})


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 1:
        print("usage: python -m agent2rl_tui.run.supervisor RUN_DIR", file=sys.stderr)
        return 2
    configure_logging()
    # OpenMP threads that wait by sleeping, not spinning, in every process of the run (the
    # grader, its workers and the agent inherit it): on a busy CPU spinning threads steal each
    # other's cores. Tiny model, 60 training steps on 2 loaded cores: 22 s spinning, 2.5 s
    # passive; 1.6 s either way when idle (docs/containment.md, "Sharing the CPU").
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return Supervisor(Path(args[0])).main()


if __name__ == "__main__":
    sys.exit(main())
