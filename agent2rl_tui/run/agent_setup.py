"""What the agent gets before it starts: its environment, its own home, its sandbox.

The supervisor calls these once per run, in this order: `agent_env` (the profile's variables,
the benchmark's, the run's ``--env`` and GPUs), `meter` (the meter in front of its driver API, or
why there is none), `prepare_home` (the CLI's configuration and login
copied into the run's own home), `contain` (the sandbox, or why there is none). Each decision
goes into the record as an event; no value of a secret does.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from agent2rl_tui.record.root import default_root, known_roots
from agent2rl_tui.record.runconfig import RunConfig
from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.run import containment
from agent2rl_tui.run.lifecycle import AGENT_ENV_VAR
from agent2rl_tui.run.metering import MeterProcess, hold_keys, plan_meter
from agent2rl_tui.run.profiles import AgentProfile, DriverSetup
from agent2rl_tui.run.run_secrets import login_secrets, secret_values
from agent2rl_tui.tasks.data import source_paths
from agent2rl_tui.tasks.registry import Task, cache_root

log = logging.getLogger("agent2rl.supervisor")


def meter(run_dir: Path, store: RunStore, cfg: RunConfig, profile: AgentProfile,
          env: dict[str, str]) -> MeterProcess | None:
    """The meter to put in front of the agent's driver API (``run/metering.py``), not started, holding
    the key variables of the agent's environment ``env``; None for a run without one, recorded with
    the reason when the user's setting leaves the calls unmetered."""
    user_env = {**os.environ, **json.loads(os.environ.get(AGENT_ENV_VAR, "{}"))}
    plan = plan_meter(profile, cfg.driver_url, user_env, enabled=cfg.meter)
    if plan is None:
        return None
    if plan.upstream is None:
        log.warning("the agent's calls are NOT METERED: %s", plan.reason)
        store.event("supervisor", "meter", f"not metered: {plan.reason}", plan.record())
        return None
    keys = hold_keys(profile, env)
    if not keys.holds:
        log.warning("the meter holds no key: %s", keys.note)
    return MeterProcess(run_dir, plan.upstream, max_tokens=cfg.max_tokens, max_cost_usd=cfg.max_cost_usd,
                        prices=cfg.prices_path, keys=keys)


def user_secrets() -> list[str]:
    """The secrets of the supervisor's environment and the run's ``--env`` (judge, search, driver keys)."""
    return secret_values(os.environ) + secret_values(json.loads(os.environ.get(AGENT_ENV_VAR, "{}")))


def agent_secrets(profile: AgentProfile, env: dict[str, str]) -> list[str]:
    """The secrets the agent's environment and its CLI's login files (in the user's home) hold."""
    home = Path(os.environ.get("HOME") or Path.home())
    sources = [containment.home_source(name, home, dict(os.environ), profile.config_dirs) for name in profile.login_files]
    return secret_values(env) + login_secrets(sources)


def agent_env(run: RunRecord, ws: Path, profile: AgentProfile, model: str | None, grader_url: str) -> dict[str, str]:
    """The profile's environment, the benchmark's variables, the run's --env and GPUs."""
    source = {k: v for k, v in os.environ.items() if not k.startswith("AGENT2RL_")}
    env = profile.agent_env(source, model)
    if profile.own_home:  # its folders are those of its own home: not moved elsewhere
        for var in (*containment.XDG_DIRS.values(), *profile.config_dirs):
            env.pop(var, None)
    env.update(
        TASK=run.task,
        BASE_MODEL=run.base_model,
        WORKSPACE=str(ws),
        MODEL_PATH=str(ws / "models" / run.base_model),
        DATA_PATH=str(ws / "data"),
        OUTPUT_DIR=str(ws / "output"),
        GRADING_SERVER_URL=grader_url,
        PYTHONUNBUFFERED="1",
    )
    env.update(json.loads(os.environ.get(AGENT_ENV_VAR, "{}")))
    if run.config.gpus:
        env["CUDA_VISIBLE_DEVICES"] = run.config.gpus
    return env


def prepare_home(run_dir: Path, store: RunStore, cfg: RunConfig, profile: AgentProfile, setup: DriverSetup, *,
                 keys_held: bool = False) -> None:
    """The agent CLI's configuration and login copied into the run's own home (never its
    history or sessions; no login when the meter holds the run's keys: the agent has its
    tokens), and the gateway's settings merged in; recorded by name."""
    if not profile.own_home:
        return
    home = Path(os.environ.get("HOME") or Path.home())
    copied = containment.prepare_home(
        run_dir / containment.AGENT_HOME, home=home, env=dict(os.environ), files=profile.home_files,
        logins=() if keys_held else profile.login_files, config_dirs=profile.config_dirs, settings=setup.files)
    logins = [n for n in copied if n in profile.login_files]
    log.info("the agent's home is the run's own; copied in: %s", ", ".join(copied) or "nothing")
    store.event("supervisor", "agent_home",
                f"agent home: {len(copied)} file(s) copied in" + (f", driver {setup.url}" if setup.url else ""),
                {"copied": copied, "logins": logins, "driver_url": cfg.driver_url,
                 "agent_url": setup.url, "model": setup.model, "sessions": list(profile.session_dirs)})


def contain(run_dir: Path, store: RunStore, cfg: RunConfig, task: Task, profile: AgentProfile,
            env: dict[str, str]) -> containment.Containment:
    """The agent's sandbox, or why there is none; either way it goes into the record."""
    if not cfg.contain:
        made = containment.not_contained("started with --no-contain", requested=False)
    else:
        made = containment.build(
            run_dir=run_dir, workspace=run_dir / "workspace", runs_root=default_root(), data_cache=cache_root(),
            env=env, writable_paths=(*profile.writable_paths, *cfg.writable_paths),
            read_only_paths=(*profile.read_only_paths, *cfg.read_only_paths),
            sources=tuple(source_paths(task)), other_roots=tuple(known_roots()),
            executable=profile.executable if profile.executable != "{python}" else None,
        )
    if made.contained:
        log.info("the agent runs contained: %s; hidden: %s", made.reason, ", ".join(made.hidden))
        message = f"agent contained by {made.reason}"
    else:
        log.warning("the agent runs NOT CONTAINED: %s", made.reason)
        message = f"agent not contained: {made.reason}"
    store.event("supervisor", "containment", message, made.record())
    return made


def stderr_tail(run_dir: Path) -> list[str]:
    """The agent's last stderr lines, from logs/agent.log (its last 64 KiB)."""
    path = run_dir / "logs" / "agent.log"
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - 65536))
            data = fh.read()
    except OSError:
        return []
    marker = b" [stderr] "
    return [line.split(marker, 1)[1].decode("utf-8", "replace") for line in data.splitlines() if marker in line]
