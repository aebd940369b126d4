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

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from functools import cached_property
from pathlib import Path

from agent2rl_tui.grader.client import GraderClient, GraderUnavailable
from agent2rl_tui.grader.launch import GraderProcess, spawn_grader
from agent2rl_tui.record.contamination import check_run, write_contamination
from agent2rl_tui.record.revisions import SnapshotError, Snapshotter
from agent2rl_tui.record.root import default_root
from agent2rl_tui.record.runconfig import RunConfig
from agent2rl_tui.record.store import RunStatus, RunStore, SubStatus
from agent2rl_tui.review.report import write_report
from agent2rl_tui.review.report_model import Report
from agent2rl_tui.run import containment
from agent2rl_tui.run.agent_output import AgentOutput
from agent2rl_tui.run.lifecycle import AGENT_ENV_VAR
from agent2rl_tui.run.metering import RESTARTS as METER_RESTARTS
from agent2rl_tui.run.metering import MeterError, MeterProcess, plan_meter
from agent2rl_tui.run.profiles import AgentProfile, DriverSetup, driver_setup, get_profile
from agent2rl_tui.run.prompt import build_prompt
from agent2rl_tui.run.summarizer import SummarizerSettings, describe, write_narrative
from agent2rl_tui.run.train_envs import RESTARTS as TRAIN_ENV_RESTARTS
from agent2rl_tui.run.train_envs import URL_VAR as TRAIN_ENV_URL
from agent2rl_tui.run.train_envs import TrainEnvError, TrainEnvProcess
from agent2rl_tui.run.vitals import VitalsSampler
from agent2rl_tui.run.watcher import RevisionWatcher
from agent2rl_tui.run.workspace import make_run_folder, populate_workspace, write_run_meta
from agent2rl_tui.tasks.data import source_paths
from agent2rl_tui.tasks.registry import Task, cache_root, load_task
from agent2rl_tui.util import procs as procs
from agent2rl_tui.util.logsetup import configure_logging
from agent2rl_tui.util.timeutil import human_duration, iso, now

log = logging.getLogger("agent2rl.supervisor")
HEARTBEAT_S = 2.0
GRADER_STOP_S = 10.0
GRADER_RESTARTS = 5
NAMESPACE_EXIT_S = 10.0


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
        self.grader: subprocess.Popen[bytes] | None = None
        self.grader_process: GraderProcess | None = None
        self.grader_restarts = 0
        self.agent: subprocess.Popen[bytes] | None = None
        self.grader_url: str | None = None
        self._announced: set[int] = set()
        self.snapshotter = Snapshotter(self.run_dir)
        self.watcher: RevisionWatcher | None = None
        self.output: AgentOutput | None = None
        self.vitals = VitalsSampler(self.run_dir)
        self.containment: containment.Containment | None = None
        self.profile: AgentProfile | None = None
        self.meter: MeterProcess | None = None
        self.train_envs: TrainEnvProcess | None = None

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

    def _heartbeat(self) -> None:
        store = RunStore.of_run(self.run_dir)
        try:
            while not self.done.wait(HEARTBEAT_S):
                try:
                    store.heartbeat()
                except Exception:  # noqa: BLE001 - a busy db must not kill the heartbeat
                    log.exception("heartbeat failed")
        finally:
            store.close()

    # -- the run ----------------------------------------------------------------------
    def main(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        subreaper = procs.become_subreaper()
        self.store.update_run(supervisor_pid=os.getpid(), status=RunStatus.PREPARING, heartbeat_at=now())
        self.store.event("supervisor", "start", f"supervisor started (pid {os.getpid()})",
                         {"subreaper": subreaper})
        beat = threading.Thread(target=self._heartbeat, name="heartbeat", daemon=True)
        beat.start()
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
            final_status, error = RunStatus.FAILED, f"supervisor error: {type(exc).__name__}: {exc}"
            log.exception("supervisor crashed")
        finally:
            try:
                self.store.update_run(status=RunStatus.ENDING, heartbeat_at=now())
            except Exception:  # noqa: BLE001 - the record's trouble must not keep the agent running
                log.exception("could not mark the run as ending")
            self.shutdown_agent()
            self.stop_meter()
            self.stop_train_envs()
            self.stop_watcher()
            self.stop_grader()
            self.vitals.stop()
            self.fail_unfinished()
            self.check_contamination()
            AgentOutput.record_peak_memory(self.store)  # bounded whatever the agent printed
            self.store.update_run(ended_at=now(), error=error, heartbeat_at=now())
            self.store.event("supervisor", "end", f"run {final_status}", {"error": error})
            try:  # the report first: whoever sees the run ended finds its report
                report = write_report(self.run_dir, status=final_status)
                self._print_result(report)
            except Exception:  # noqa: BLE001
                log.exception("could not write the report")
                self.store.event("supervisor", "report_failed", "could not write report/report.json")
            self.write_narrative(final_status)
            self.store.update_run(status=final_status, heartbeat_at=now())
            self.done.set()
            self.store.close()
        return 0 if final_status in (RunStatus.FINISHED, RunStatus.STOPPED) else 1

    def write_narrative(self, final_status: RunStatus) -> None:
        """The optional narrative (``--summarizer-*``) after the final report, then the report again
        with it; whatever fails is an event, never the run's failure."""
        if not self.cfg.summarizer:
            return
        try:
            narrative = write_narrative(self.run_dir, SummarizerSettings.from_dict(self.cfg.summarizer))
            log.info("%s", describe(narrative))
            failed = bool(narrative.failed or narrative.error)
            self.store.event("supervisor", "narrative_failed" if failed else "narrative", describe(narrative))
            write_report(self.run_dir, status=final_status)
        except Exception as exc:  # noqa: BLE001
            log.exception("could not write the narrative")
            self.store.event("supervisor", "narrative_failed",
                             f"could not write report/narrative.json: {type(exc).__name__}: {exc}")

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
        )
        self.store.event("supervisor", "workspace", "workspace ready")

    def start_grader(self) -> None:
        started = spawn_grader(self.run_dir, self.run_dir / "logs" / "grader.log", keep_socket=True,
                               gpus=self.cfg.gpus)
        self.grader_process = started
        self.grader, self.grader_url, port = started.popen, started.url, started.port
        self.store.update_run(grader_pid=self.grader.pid, grader_port=port)
        log.info("grader started (pid %s, port %s); scoring the baseline", self.grader.pid, port)
        timeout = self.cfg.eval_timeout_s + 120.0
        grader = started.popen
        with GraderClient(self.grader_url) as client:
            try:
                info = client.wait_ready(
                    timeout, alive=lambda: grader.poll() is None and not self.stop_requested.is_set()
                )
            except GraderUnavailable as exc:
                if self.stop_requested.is_set():
                    raise RunFailed("stopped while the baseline was being scored") from exc
                raise RunFailed(f"the grader did not start: {exc}; see logs/grader.log") from exc
        baseline = info.get("baseline") or {}
        if baseline.get("status") != SubStatus.SCORED:  # the grader's answer has a code; the record the text
            recorded = self.store.baseline()
            raise RunFailed(
                f"the base model could not be scored: {(recorded.error if recorded else None) or 'unknown error'}"
            )
        log.info("baseline score %.2f", baseline["score"])

    def run_agent(self) -> str:
        profile = get_profile(self.run.agent, self._profiles_path())
        model = self.run.driver
        prompt = build_prompt(self.ws, self.run.budget_s)
        (self.run_dir / "prompt.md").write_text(prompt, encoding="utf-8")
        if profile.instructions_file:
            (self.ws / profile.instructions_file).write_text(prompt, encoding="utf-8")
        self.profile = profile
        env = self.agent_env(profile, model)
        if self.task.level == 3:  # the agent plays its train games through the service
            env[TRAIN_ENV_URL] = self.start_train_envs()
        # The driver URL as this CLI takes it (a variable, arguments, settings): the meter's, in
        # front of --driver-url or the CLI's own API, else --driver-url itself.
        agent_url = self.start_meter(profile) or self.cfg.driver_url
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
        self.prepare_home(profile, setup)
        self.containment = self.contain(profile, env)
        if profile.own_home and not self.containment.contained:  # its own home all the same
            env["HOME"] = str(self.run_dir / containment.AGENT_HOME)
        argv = self.containment.wrap(argv)
        self.take_snapshot("start")
        self.watcher = RevisionWatcher(self.snapshotter)
        self.watcher.start()
        shown = " ".join("PROMPT" if a == prompt else a for a in argv)
        log.info("starting agent %s: %s (budget %s, deadline %s)", profile.name, shown,
                 human_duration(self.run.budget_s), iso(deadline))
        output = AgentOutput(self.run_dir, profile.stream_format)
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
            output.close()
            self.output = None
        self.stop_watcher()
        return reason

    def contain(self, profile: AgentProfile, env: dict[str, str]) -> containment.Containment:
        """The agent's sandbox, or why there is none; either way it goes into the record."""
        if not self.cfg.contain:
            made = containment.not_contained("started with --no-contain", requested=False)
        else:
            made = containment.build(
                run_dir=self.run_dir, workspace=self.ws, runs_root=default_root(), data_cache=cache_root(),
                env=env, writable_paths=(*profile.writable_paths, *self.cfg.writable_paths),
                read_only_paths=(*profile.read_only_paths, *self.cfg.read_only_paths),
                sources=tuple(source_paths(self.task)),
                executable=profile.executable if profile.executable != "{python}" else None,
            )
        if made.contained:
            log.info("the agent runs contained: %s; hidden: %s", made.reason, ", ".join(made.hidden))
            message = f"agent contained by {made.reason}"
        else:
            log.warning("the agent runs NOT CONTAINED: %s", made.reason)
            message = f"agent not contained: {made.reason}"
        self.store.event("supervisor", "containment", message, made.record())
        return made

    def prepare_home(self, profile: AgentProfile, setup: DriverSetup) -> None:
        """The agent CLI's configuration and login copied into the run's own home (never its
        history or sessions), and the gateway's settings merged in; recorded by name."""
        if not profile.own_home:
            return
        home = Path(os.environ.get("HOME") or Path.home())
        copied = containment.prepare_home(
            self.run_dir / containment.AGENT_HOME, home=home, env=dict(os.environ), files=profile.home_files,
            logins=profile.login_files, config_dirs=profile.config_dirs, settings=setup.files)
        logins = [n for n in copied if n in profile.login_files]
        log.info("the agent's home is the run's own; copied in: %s", ", ".join(copied) or "nothing")
        self.store.event("supervisor", "agent_home",
                         f"agent home: {len(copied)} file(s) copied in" + (f", driver {setup.url}" if setup.url else ""),
                         {"copied": copied, "logins": logins, "driver_url": self.cfg.driver_url,
                          "agent_url": setup.url, "model": setup.model, "sessions": list(profile.session_dirs)})

    def start_meter(self, profile: AgentProfile) -> str | None:
        """The meter in front of the agent's driver API (``run/metering.py``); its URL, or None
        for a run without one (the record says why)."""
        user_env = {**os.environ, **json.loads(os.environ.get(AGENT_ENV_VAR, "{}"))}
        plan = plan_meter(profile, self.cfg.driver_url, user_env, enabled=self.cfg.meter)
        if plan is None:
            return None
        if plan.upstream is None:
            log.warning("the agent's calls are NOT METERED: %s", plan.reason)
            self.store.event("supervisor", "meter", f"not metered: {plan.reason}", plan.record())
            return None
        meter = MeterProcess(self.run_dir, plan.upstream, max_tokens=self.cfg.max_tokens,
                             max_cost_usd=self.cfg.max_cost_usd, prices=self.cfg.prices_path)
        try:
            url = meter.start()
        except (MeterError, OSError) as exc:
            raise RunFailed(f"the meter did not start: {exc}") from exc
        self.meter = meter
        log.info("the agent's calls are metered: %s -> %s", url, plan.upstream)
        return url

    def check_meter(self) -> None:
        """Start again, on the same port, a meter that died; the record says so."""
        meter = self.meter
        if meter is None or (code := meter.died()) is None:
            return
        meter.stop()
        if meter.restarts >= METER_RESTARTS:
            self.store.event("supervisor", "meter_died", f"the meter exited with code {code}; no restart left: "
                             "the agent's driver calls fail from here", {"exit_code": code})
            self.meter = None
            return
        meter.restarts += 1
        try:
            meter.start()
            message = f"the meter exited with code {code}; restarted on the same port"
        except (MeterError, OSError) as exc:
            message = f"the meter exited with code {code} and did not start again: {exc}"
            self.meter = None
        log.error("%s", message)
        self.store.event("supervisor", "meter_died", message, {"exit_code": code, "restarts": meter.restarts})

    def start_train_envs(self) -> str:
        """The run's train-environment service (``run/train_envs.py``), ready; its URL."""
        service = TrainEnvProcess(self.run_dir)
        self.train_envs = service
        try:
            url = service.start()
        except TrainEnvError as exc:
            raise RunFailed(f"the train-environment service did not start: {exc}") from exc
        log.info("train environments served at 127.0.0.1:%s (pid %s)", url.split(":")[2].split("/")[0], service.pid)
        self.store.event("supervisor", "train_envs", f"train-environment service started (pid {service.pid})",
                         {"pid": service.pid})
        return url

    def check_train_envs(self) -> None:
        """Start again, on the same URL, a service that died; the record says so."""
        service = self.train_envs
        if service is None or (code := service.died()) is None:
            return
        if service.restarts >= TRAIN_ENV_RESTARTS:
            self.store.event("supervisor", "train_envs_died", f"the train-environment service exited with code "
                             f"{code}; no restart left", {"exit_code": code})
            service.stop()
            self.train_envs = None
            return
        service.restarts += 1
        try:
            service.start()
            message = f"the train-environment service exited with code {code}; restarted on the same URL"
        except TrainEnvError as exc:
            message = f"the train-environment service exited with code {code} and did not start again: {exc}"
        log.error("%s", message)
        self.store.event("supervisor", "train_envs_died", message, {"exit_code": code, "restarts": service.restarts})

    def stop_train_envs(self) -> None:
        if self.train_envs is not None:
            service, self.train_envs = self.train_envs, None
            service.stop()

    def stop_meter(self) -> None:
        if self.meter is not None:
            meter, self.meter = self.meter, None
            meter.stop()

    def _stderr_tail(self) -> list[str]:
        """The agent's last stderr lines, from logs/agent.log (its last 64 KiB)."""
        path = self.run_dir / "logs" / "agent.log"
        try:
            with path.open("rb") as fh:
                fh.seek(max(0, path.stat().st_size - 65536))
                data = fh.read()
        except OSError:
            return []
        marker = b" [stderr] "
        return [line.split(marker, 1)[1].decode("utf-8", "replace") for line in data.splitlines() if marker in line]

    def check_contamination(self) -> None:
        """Scan what the agent wrote for eval items (record/contamination/); never fatal."""
        if self.store.run().budget_start is None:
            return
        try:
            result = check_run(self.run_dir, self.task)
            write_contamination(self.run_dir, result)
        except Exception as exc:  # noqa: BLE001 - the record closes whatever the scan does
            log.exception("the contamination check failed")
            self.store.event("supervisor", "contamination_failed", f"contamination check failed: {exc}")
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
        self.store.event("supervisor", "contamination", message, result.event_data())

    def _profiles_path(self) -> Path | None:
        path = self.cfg.profiles_path
        return Path(path) if path else None

    def take_snapshot(self, trigger: str) -> None:
        try:
            rev, new = self.snapshotter.snapshot(trigger)
            if new:
                log.info("revision %d (%s): %d file(s) changed", rev.seq, trigger, rev.files_changed)
        except SnapshotError as exc:
            log.warning("%s snapshot failed: %s", trigger, exc)
            self.store.event("supervisor", "snapshot_failed", f"{trigger} snapshot failed: {exc}")

    def stop_watcher(self) -> None:
        """Stop watching and take the final snapshot of the workspace."""
        if self.watcher is None:
            return
        watcher, self.watcher = self.watcher, None
        watcher.stop()
        self.take_snapshot("final")

    def _report_new_results(self) -> None:
        """Log each submission once it is finished, so a foreground run shows progress."""
        for sub in self.store.submissions(kind="agent"):
            if sub.id in self._announced or sub.status in (SubStatus.QUEUED, SubStatus.EVALUATING):
                continue
            self._announced.add(sub.id)
            if sub.status == SubStatus.SCORED:
                log.info("submission %d scored %.2f (%s)", sub.id, sub.score, sub.model_path)
            else:
                log.info("submission %d %s: %s", sub.id, sub.status, (sub.error or "")[:200])

    def _wait_agent(self, deadline: float) -> str:
        assert self.agent is not None
        ticks = 0
        while True:
            ticks += 1
            if ticks % 5 == 0:
                self._report_new_results()
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
                self.check_grader()
                self.check_meter()
                self.check_train_envs()
            time.sleep(0.2)
        self.store.update_run(end_reason=reason)
        log.info("agent phase over: %s", reason)
        return reason

    def check_grader(self) -> None:
        """Start a successor of a grader that died, on the same URL; the record says so.

        The successor re-queues whatever was queued or being evaluated, so a submission the
        agent made is scored, not lost.
        """
        old = self.grader_process
        if old is None or self.grader is None or self.grader.poll() is None:
            return
        code = self.grader.returncode
        # Its eval workers die with it (PR_SET_PDEATHSIG); anything else waits for the end of
        # the run, where stop_grader() sweeps every process left under us.
        if self.grader_restarts >= GRADER_RESTARTS:
            log.error("the grader died (exit code %s) and has been restarted %d times; not again",
                      code, self.grader_restarts)
            self.store.event("supervisor", "grader_died", f"grader exited with code {code}; no restart left")
            self.grader_process = None
            return
        self.grader_restarts += 1
        log.error("the grader died (exit code %s); starting it again on the same URL", code)
        started = spawn_grader(self.run_dir, self.run_dir / "logs" / "grader.log", successor_of=old,
                               gpus=self.cfg.gpus)
        self.grader_process, self.grader = started, started.popen
        self.store.update_run(grader_pid=started.popen.pid)
        self.store.event("supervisor", "grader_restarted",
                         f"grader exited with code {code}; restarted (pid {started.popen.pid})",
                         {"exit_code": code, "restarts": self.grader_restarts})

    def _popen_pids(self) -> set[int]:
        meter = self.meter.popen if self.meter is not None else None
        envs = self.train_envs.process.popen if self.train_envs is not None and self.train_envs.process else None
        return {p.pid for p in (self.agent, self.grader, meter, envs) if p is not None}

    def shutdown_agent(self) -> None:
        """End the agent's group (TERM, grace, KILL) and any descendant that escaped it."""
        if self.agent is None:
            return
        agent, self.agent = self.agent, None
        grace = float(self.run.grace_s)
        if procs.group_alive(agent.pid):
            log.info("ending the agent's process group (SIGTERM, then SIGKILL after %s)", human_duration(grace))
            killed = procs.end_group(agent.pid, grace, keep=self._popen_pids() | {agent.pid})
            if killed:
                self.store.event("supervisor", "agent_killed", "the agent ignored SIGTERM and was killed")
        if self.watcher is not None:  # its git must not be among the strays killed next
            self.watcher.stop()
        keep = {p for p in (self.grader.pid if self.grader else None, self.meter.pid if self.meter else None,
                            self.train_envs.pid if self.train_envs else None) if p}
        strays = self._strays(exclude=keep, agent_pid=agent.pid)
        if strays:
            procs.kill_pids(strays)
            self.store.event("supervisor", "strays_killed", f"killed {len(strays)} processes that left the agent's group",
                             {"pids": strays})
        try:
            code = agent.wait(timeout=30)
        except subprocess.TimeoutExpired:
            agent.kill()
            code = agent.wait()
        code = containment.exit_code(code, contained=bool(self.containment and self.containment.contained))
        normalizer = self.output.recorder.normalizer if self.output is not None else None
        if normalizer is not None and hasattr(normalizer, "agent_exited"):  # an agent failing silently: an error step
            normalizer.agent_exited(code, self._stderr_tail, now())
        if self.profile is not None and self.profile.login_files:
            removed = containment.forget_logins(self.run_dir / containment.AGENT_HOME, self.profile.login_files)
            if removed:
                log.info("login files removed from the run's home: %s", ", ".join(removed))
        self.stop_meter()  # the calls the agent left under way are recorded as they stood
        self.stop_train_envs()  # no training after the deadline
        self.vitals.agent_pgid = None  # gone by design from here on: not an "agent group gone" event
        shutil.rmtree(self.run_dir / containment.AGENT_TMP, ignore_errors=True)
        self.store.update_run(agent_exit_code=code, agent_ended_at=now())
        self.store.event("supervisor", "agent_end", f"agent exited with code {code}")
        log.info("agent exit code %s", code)

    def _strays(self, exclude: set[int], agent_pid: int) -> list[int]:
        """Descendants left once the agent's group has ended. In the sandbox, the kernel kills every
        process of the namespace when its init dies, but a loaded machine takes a while to let them
        exit: they are waited for (up to ``NAMESPACE_EXIT_S``) before anything left is a stray. The
        agent's own zombie is never reaped here: its Popen must read its exit status."""
        strays = procs.descendants(os.getpid(), exclude=exclude)
        if self.containment is not None and self.containment.contained:
            settle = time.monotonic() + NAMESPACE_EXIT_S
            while strays and time.monotonic() < settle:
                time.sleep(0.1)
                procs.reap_zombie_children(self._popen_pids() | {agent_pid})
                strays = procs.descendants(os.getpid(), exclude=exclude)
        return strays

    def drain_grader(self) -> None:
        """Let submissions received before the deadline be scored (a second stop cuts this)."""
        timeout = self.cfg.eval_timeout_s
        last, waited_since = -1, time.monotonic()
        while self.grader:
            self.check_grader()
            if self.grader.poll() is not None:
                return
            pending = self.store.pending_count()
            self._report_new_results()
            if pending == 0:
                return
            if pending != last:
                log.info("waiting for %d submission(s) to be scored", pending)
                last, waited_since = pending, time.monotonic()
            if self.stop_count >= 2 or time.monotonic() - waited_since > timeout + 60:
                return
            time.sleep(0.5)

    def stop_grader(self) -> None:
        """Stop the grader, then every process still under us: its eval workers (they run in
        sessions of their own, and re-parent to this subreaper if the grader is killed)."""
        if self.grader_process is not None and self.grader_process.sock is not None:
            self.grader_process.sock.close()
        self.grader_process = None
        if not self.grader:
            return
        grader, self.grader = self.grader, None
        if grader.poll() is None:
            grader.terminate()
            try:
                grader.wait(timeout=GRADER_STOP_S)
            except subprocess.TimeoutExpired:
                procs.signal_group(grader.pid, signal.SIGKILL)
                grader.wait()
        procs.signal_group(grader.pid, signal.SIGKILL)
        left = procs.descendants(os.getpid(), other_sessions=True)
        if left:
            procs.kill_pids(left)
            self.store.event("supervisor", "workers_killed", f"killed {len(left)} process(es) left by the grader",
                             {"pids": left})

    def fail_unfinished(self) -> None:
        for sub in self.store.submissions():
            if sub.status in (SubStatus.QUEUED, SubStatus.EVALUATING):
                self.store.update_submission(
                    sub.id, status=SubStatus.FAILED, finished_at=now(), error_code="run_ended",
                    error="run_ended: the run ended before this submission was evaluated",
                )

    def agent_env(self, profile: AgentProfile, model: str | None) -> dict[str, str]:
        """The profile's environment, the benchmark's variables, the run's --env and GPUs."""
        source = {k: v for k, v in os.environ.items() if not k.startswith("AGENT2RL_")}
        env = profile.agent_env(source, model)
        if profile.own_home:  # its folders are those of its own home: not moved elsewhere
            for var in (*containment.XDG_DIRS.values(), *profile.config_dirs):
                env.pop(var, None)
        assert self.grader_url is not None
        env.update(
            TASK=self.run.task,
            BASE_MODEL=self.run.base_model,
            WORKSPACE=str(self.ws),
            MODEL_PATH=str(self.ws / "models" / self.run.base_model),
            DATA_PATH=str(self.ws / "data"),
            OUTPUT_DIR=str(self.ws / "output"),
            GRADING_SERVER_URL=self.grader_url,
            PYTHONUNBUFFERED="1",
        )
        env.update(json.loads(os.environ.get(AGENT_ENV_VAR, "{}")))
        if self.cfg.gpus:
            env["CUDA_VISIBLE_DEVICES"] = self.cfg.gpus
        return env

    def _print_result(self, report: Report) -> None:
        def f(x: float | None) -> str:
            return "-" if x is None else f"{x:.2f}"

        log.info(
            "result: baseline %s, best %s, improvement %s, %d submission(s)",
            f(report.baseline.score),
            f(report.best.score if report.best else None),
            f(report.improvement),
            len(report.submissions),
        )


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
