"""A run's life from outside it: create, launch, stop, reconcile.

Creating a run validates everything that can be checked before the budget (run/preflight.py:
task, model folder, agent, budget and the rest) and leaves nothing behind when a check fails. A run is then a
folder with run.db; whoever reads it decides "lost" from the supervisor's heartbeat.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from agent2rl_tui.record.root import RunError, default_root, remember_root
from agent2rl_tui.record.runconfig import SCRIPTED_WORKER_ENV
from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.store import ACTIVE_STATUSES, PENDING_SUB_STATUSES, RunStatus, RunStore, SubStatus
from agent2rl_tui.review.report import write_report
from agent2rl_tui.run.preflight import preflight_run
from agent2rl_tui.run.profiles import AgentProfile
from agent2rl_tui.run.request import RunRequest
from agent2rl_tui.run.workspace import make_run_folder
from agent2rl_tui.tasks.registry import Task, TaskError, draw_eval_seed, load_task
from agent2rl_tui.util import procs
from agent2rl_tui.util.timeutil import compact_utc, iso, now

AGENT_ENV_VAR = "AGENT2RL_AGENT_ENV"  # carries RunRequest.agent_env to the supervisor
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")


def redacted(env: dict[str, str]) -> dict[str, str]:
    """A profile's fixed variables for the record, with secret-looking names' values hidden."""
    return {k: ("<redacted>" if any(w in k.upper() for w in SECRET_WORDS) else v) for k, v in env.items()}


def names_only(env: dict[str, str]) -> dict[str, str]:
    """Variables given on the command line (``--env``) for the record: names, never values."""
    return {k: "<not recorded>" for k in env}


def create_run(req: RunRequest, env: dict[str, str] | None = None) -> Path:
    """Pre-flight the request, then make the run folder with its run.db (status ``created``)."""
    env = dict(os.environ if env is None else env)
    task, profile, model, req, agent_version = preflight_run(req, env)
    req = scripted_from_env(req, env)
    decoding_row = decoding_row_for(task, req)
    root = (req.root or default_root()).resolve()
    root.mkdir(parents=True, exist_ok=True)
    remember_root(root)  # every contained agent is kept out of it (run/containment.py)
    stamp = compact_utc(now())
    base = f"{stamp}-{task.name}-{profile.name}"
    run_dir = root / base
    n = 1
    while True:
        try:
            run_dir.mkdir()
            break
        except FileExistsError:
            n += 1
            run_dir = root / f"{base}-{n}"
    try:
        _write_new_run(run_dir, req, task.name, profile, model, task.folder,
                       req.eval_timeout_s or task.eval_timeout_s, decoding_row, agent_version)
    except BaseException:
        shutil.rmtree(run_dir, ignore_errors=True)  # nothing half-made is left behind
        raise
    return run_dir


def scripted_from_env(req: RunRequest, env: dict[str, str]) -> RunRequest:
    """The request with ``$AGENT2RL_SCRIPTED_WORKER``'s script as its config's ``scripted_worker``
    (the test suite's way to grade a run started by the CLI without a model; recorded)."""
    text = env.get(SCRIPTED_WORKER_ENV)
    if not text or req.config.scripted_worker is not None:
        return req
    try:
        script = json.loads(text)
    except ValueError:
        raise RunError(f"${SCRIPTED_WORKER_ENV}: not JSON; unset it to grade with the model") from None
    if not isinstance(script, dict):
        raise RunError(f"${SCRIPTED_WORKER_ENV}: give a JSON object (grader/scripted_worker.py), or unset it")
    return req.with_config(scripted_worker=script)


def decoding_row_for(task: Task, req: RunRequest) -> str | None:
    """The base model's row of the reference's model table (``tasks.decoding``) where the run's
    prompt profile uses the table, decided here once for the whole run, as the reference decodes
    every submission by the base model's name; None where the profile decodes by itself."""
    from agent2rl_tui.tasks import decoding

    if not task.settings_for(req.config.prompt_profile).model_table:
        return None
    return decoding.model_row(req.model.expanduser())[0]


def decoding_note(run_dir: Path) -> str | None:
    """What ``run start`` says about the decoding where the run's profile uses the model table."""
    from agent2rl_tui.tasks import decoding

    with RunStore.of_run(run_dir) as store:
        cfg = store.config()
    if not cfg.decoding_row:
        return None
    try:
        settings = decoding.run_settings(load_task(cfg.task_folder), cfg.prompt_profile, cfg.decoding_row)
    except TaskError as exc:
        return f"decoding: {exc}"
    return f"decoding: {decoding.describe(settings)}"


def _write_new_run(run_dir: Path, req: RunRequest, task: str, profile: AgentProfile, model: Path,
                   task_folder: Path, eval_timeout_s: float, decoding_row: str | None = None,
                   agent_version: str | None = None) -> None:
    run_dir.chmod(0o700)  # the record is its owner's: sandboxed code (another uid) cannot read it
    make_run_folder(run_dir)
    agent = profile.name
    given = req.config

    def resolved(path: str) -> str:
        return str(Path(path).expanduser().resolve())

    config = given.replace(
        task_folder=str(task_folder),
        agent_command=req.command,
        eval_timeout_s=eval_timeout_s,
        # The reference's model-table row for the base model (tasks/decoding.py), where the profile uses it.
        decoding_row=decoding_row,
        judge=given.judge or None,
        search=given.search or None,
        webshop=given.webshop or None,
        summarizer=given.summarizer or None,
        prices_path=resolved(given.prices_path) if given.prices_path else None,
        read_only_paths=tuple(map(resolved, given.read_only_paths)),
        writable_paths=tuple(map(resolved, given.writable_paths)),
        profiles_path=str(given.profiles_path) if given.profiles_path else None,
        agent_env=names_only(req.agent_env),
        # The profile as it was, with what its CLI answered to --version in the pre-flight's sandbox.
        profile={**asdict(profile), "env": redacted(profile.env), **({"version": agent_version} if agent_version else {})},
        # The seed of the run's eval draw (tasks/registry.py): here only, never in the workspace.
        eval_seed=draw_eval_seed() if given.eval_seed is None else int(given.eval_seed),
    )
    with RunStore(run_dir / "run.db", create=True) as store:
        store.create_run(RunRecord(
            id=run_dir.name,
            task=task,
            agent=agent,
            driver=profile.driver(req.driver),
            base_model=model.name,
            base_model_source=str(model),
            budget_s=req.budget_s,
            grace_s=req.grace_s,
            seed=req.seed,
            status=RunStatus.CREATED,
            created_at=now(),
            config_json=config.dumps(),
        ))
        store.event("cli", "created", f"run created for task {task}, agent {agent}")


def launch_supervisor(run_dir: Path, agent_env: dict[str, str] | None = None) -> int:
    """Start the run's supervisor in a new session (it outlives this process); its pid.

    The supervisor inherits this environment (API keys included) and gets ``agent_env``
    through it too, so secret values never touch the record.
    """
    env = dict(os.environ)
    if agent_env:
        env[AGENT_ENV_VAR] = json.dumps(agent_env)
    log = (run_dir / "logs" / "supervisor.log").open("ab")
    with log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent2rl_tui.run.supervisor", str(run_dir)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            env=env,
        )
    with RunStore.of_run(run_dir) as store:
        store.update_run(supervisor_pid=proc.pid)
    return proc.pid


def start_run(req: RunRequest) -> tuple[Path, int]:
    """Pre-flight, make the run folder and start its detached supervisor: (run folder, pid).

    If the supervisor cannot be started the new folder is removed, so a failed start
    leaves nothing behind (no run stuck in ``created``).
    """
    run_dir = create_run(req)
    try:
        pid = launch_supervisor(run_dir, req.agent_env)
    except BaseException:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    return run_dir, pid


def stop_run(run_dir: Path, *, wait_s: float = 0.0, reason: str | None = None) -> str:
    """Ask the supervisor to stop (SIGTERM); reconcile a run whose supervisor is gone. ``reason``:
    the run's end reason if not ``stopped`` (``time_limit``: its Slurm job's time limit is near)."""
    with RunStore.of_run(run_dir) as store:
        run = store.run()
        if run.status not in ACTIVE_STATUSES:
            return run.status
        pid = run.supervisor_pid
        if pid is not None and procs.pid_alive(pid) and _is_supervisor_of(pid, run_dir):
            store.event("cli", "stop", f"stop requested ({reason})" if reason else "stop requested",
                        {"end_reason": reason} if reason else None)
            os.kill(pid, signal.SIGTERM)
        else:
            return reconcile(run_dir)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        with RunStore.of_run(run_dir) as store:
            status = store.run().status
        if status not in ACTIVE_STATUSES:
            return status
        time.sleep(0.25)
    return "stopping"


def _is_supervisor_of(pid: int, run_dir: Path) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True  # cannot check (not Linux): trust the record
    return b"agent2rl_tui.run.supervisor" in cmdline and any(
        Path(os.fsdecode(a)).resolve() == run_dir.resolve() for a in cmdline if a.startswith(b"/")
    )


def lost_without_a_word(run_dir: Path, run: RunRecord) -> str:
    """Why a run is lost when nothing saw its supervisor die: when it was last heard from."""
    heard = f", last heard from at {iso(run.heartbeat_at)}" if run.heartbeat_at else ""
    return (f"the supervisor (pid {run.supervisor_pid}) stopped without closing the run{heard}: it was killed or "
            f"crashed, and its guard did not close the record either (see {run_dir / 'logs' / 'supervisor.log'})")


def reconcile(run_dir: Path, *, gone: str | None = None, why: str | None = None) -> str:
    """Close the record of a run whose supervisor died: end its leftovers, mark it lost. ``gone``:
    the caller knows it died, and why (its Slurm job ended): its pids, another host's, are not looked at.
    ``why``: what the caller knows of its death (the run's guard: when, and what it ended)."""
    with RunStore.of_run(run_dir) as store:
        run = store.run()
        if run.status not in ACTIVE_STATUSES or (gone is None and procs.pid_alive(run.supervisor_pid)):
            return run.status
        for pgid in (run.agent_pid, run.grader_pid) if gone is None else ():
            if pgid and procs.group_alive(pgid):
                procs.signal_group(pgid, signal.SIGKILL)
        for sub in store.submissions():
            if sub.status in PENDING_SUB_STATUSES:
                store.update_submission(
                    sub.id, status=SubStatus.FAILED, finished_at=now(),
                    error="the run was lost before this submission was evaluated",
                )
        store.update_run(
            status="lost",
            ended_at=run.heartbeat_at or now(),
            error=run.error or gone or why or lost_without_a_word(run_dir, run),
        )
        store.event("cli", "reconciled", "run marked lost; leftovers ended")
    write_report(run_dir)
    return "lost"

