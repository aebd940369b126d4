"""A run's settings, declared once: ``RunConfig``, what run.db's ``config_json`` holds.

``run start`` (run/lifecycle.py) writes it; the supervisor, the grader, the train-environment
service, the report, the run list and the TUI read it back, on this machine or years later
from a copied run folder. Every default of a run's settings lives in its fields, so no reader
re-states one.

Each field a person gives carries, in its metadata (``record.setting.setting``), its ``run
start`` flags with their help, its New Run field, its campaign key and where it is checked;
``run.options`` derives the CLI's options, the form and the campaign keys from the fields,
and `RunConfig.from_json` derives each field's reader from its type. So a new option is one
field here (plus the code that uses it). Fields without a ``Setting`` are decided by the run
itself (the task's folder, the decoding row, the profile as it was) or are knobs a person or
a test adds to a config by hand (``OPTIONAL``: written only where set).

Reading never raises on an old or damaged record: a key of the wrong type reads as its
default, and keys this release does not know are kept (``rest``) and written back as they
were. Writing gives the same JSON as every earlier release (same keys, same order).
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent2rl_tui.record.modes import FREE, MODES
from agent2rl_tui.record.setting import Flag, FormField, parse_pairs, paths_of, setting
from agent2rl_tui.tasks.eval_settings import DEFAULT_EVAL_TIMEOUT_S, EVAL_SEED_KEY

GIB = 1 << 30
DEFAULT_MAX_QUEUED = 4
"""Submissions that may wait for the grader at once, unless a run's config says otherwise."""

SCRIPTED_WORKER_ENV = "AGENT2RL_SCRIPTED_WORKER"
"""A scripted worker's script as JSON: in ``run start``'s environment it becomes the run's
``scripted_worker`` (recorded in its config); in a worker's, the script it answers by."""

READ = "agent2rl_tui.read"
"""A field's own reader of its JSON value, where the one its type gives does not fit."""
JSON_KEY = "agent2rl_tui.json_key"
"""A field's key in the JSON where it is not the field's name."""


def _opt(kind: type | tuple[type, ...]) -> Callable[[Any], Any]:
    """A reader that keeps a value of ``kind`` and gives None otherwise (JSON's true is no number)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return lambda value: value if isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool)) else None


def _number(value: Any) -> float | None:
    """An int or float as written (so a config reads back to the same JSON); None otherwise."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _dict(value: Any) -> dict[str, Any] | None:
    return dict(value) if isinstance(value, dict) else None


def _paths(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list | tuple) else ()


def _positive_timeout(value: Any) -> float:
    timeout = _number(value)
    return timeout if timeout is not None and timeout > 0 else DEFAULT_EVAL_TIMEOUT_S


def _engine(values: Mapping[str, Any]) -> dict[str, Any]:
    overrides: dict[str, Any] = dict(parse_pairs(values.get("engine_options") or (), "--engine-option"))
    if values.get("engine"):
        overrides["engine"] = values["engine"]
    return overrides


def _judge(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in (("base_url", values.get("judge_url")), ("model", values.get("judge_model")),
                              ("key_env", values.get("judge_key_env")), ("mode", values.get("judge_mode")),
                              ("concurrency", values.get("judge_concurrency"))) if v is not None}


def _search(values: Mapping[str, Any]) -> dict[str, Any] | None:
    corpus = values.get("search_corpus")
    return {k: v for k, v in (("url", values.get("search_url")), ("key_env", values.get("search_key_env")),
                              ("corpus", str(corpus) if corpus else None)) if v} or None


def _webshop(values: Mapping[str, Any]) -> dict[str, Any] | None:
    return {"url": values["webshop_url"]} if values.get("webshop_url") else None


def _summarizer(values: Mapping[str, Any]) -> dict[str, Any] | None:
    """The three flags as the summarizer's settings (the preflight checks and completes them)."""
    url, model, key_env = (values.get(k) for k in ("summarizer_url", "summarizer_model", "summarizer_key_env"))
    if not (url or model or key_env):
        return None
    if not url or not model:
        raise ValueError("a narrative needs both --summarizer-url URL and --summarizer-model MODEL")
    return {"base_url": url, "model": model, "key_env": key_env or None}


def _path_or_none(dest: str) -> Callable[[Mapping[str, Any]], str | None]:
    return lambda values: str(values[dest]) if values.get(dest) else None


JUDGE_FLAGS = (
    Flag("--judge-url", "judge_url",
         "Judge-graded tasks (alpacaeval): the judge's OpenAI-compatible API root, e.g. https://api.openai.com/v1 "
         "or http://127.0.0.1:8000/v1 (a local `vllm serve`).",
         form=FormField("judge URL (judge-graded tasks)", "http://127.0.0.1:8000/v1")),
    Flag("--judge-model", "judge_model", "The judge's model name at that endpoint.",
         form=FormField("judge model", "e.g. gpt-4.1")),
    Flag("--judge-key-env", "judge_key_env",
         "The environment variable holding the judge's API key (its name is recorded, never its value).",
         metavar="VAR", form=FormField("judge key variable", "e.g. OPENAI_API_KEY")),
    Flag("--judge-mode", "judge_mode",
         "ranking: a strict structured answer (AutoRL-Bench's judge; the task's default); weighted: the preference "
         "from the top-5 logprobs (judges that return logprobs).", kind="choice", choices=("ranking", "weighted")),
    Flag("--judge-concurrency", "judge_concurrency", "Judge calls in flight at once (default 8).", kind="int"),
)

SEARCH_FLAGS = (
    Flag("--search-url", "search_url",
         "Searching tasks (deepsearchqa): a web search API answering SerpAPI-shaped JSON (GET URL?q=...&num=K), "
         "e.g. https://serpapi.com/search."),
    Flag("--search-key-env", "search_key_env",
         "The environment variable holding the search API's key (its name is recorded, never its value).",
         metavar="VAR", form=FormField("search key variable", "e.g. SERPAPI_KEY")),
    Flag("--search-corpus", "search_corpus",
         "Searching tasks offline: a JSONL corpus (title, text, url rows) searched with BM25.", kind="path"),
)

SUMMARIZER_FLAGS = (
    Flag("--summarizer-url", "summarizer_url",
         "A narrative of the run: an OpenAI-compatible API root (e.g. https://api.openai.com/v1 or a local "
         "`vllm serve`, http://127.0.0.1:8000/v1) that writes 2-4 sentences per iteration into the report "
         "(optional; cached; its tokens and cost recorded).", metavar="URL"),
    Flag("--summarizer-model", "summarizer_model", "The narrative's model name at that endpoint.", metavar="MODEL"),
    Flag("--summarizer-key-env", "summarizer_key_env",
         "The environment variable holding the summarizer's API key (its name is recorded, never its value).",
         metavar="VAR"),
)


@dataclass(frozen=True)
class RunConfig:
    """A run's settings, as ``run start`` decided them (``run.config_json``).

    The fields are in the order the JSON has them. The last four before ``rest``
    (``OPTIONAL``) are written only where set: knobs a person or a test adds to a run's config,
    not options of ``run start``.
    """

    task_folder: str = ""
    """The task's folder (tasks/<name>), as resolved when the run was made."""
    agent_command: str | None = None
    """The agent's command line where ``--command`` replaced the profile's."""
    eval_timeout_s: float = field(default=DEFAULT_EVAL_TIMEOUT_S, metadata={READ: _positive_timeout})
    """The longest one evaluation may take (the task's ``[grader]``, or ``--eval-timeout``)."""
    eval_limit: int | None = setting(None, rank=160, group="eval", flags=(Flag(
        "--eval-limit", "eval_limit", "Grade only the first N eval items (quick checks).", kind="int"),),
        campaign="eval_limit")
    """The first N eval items only; None: all."""
    engine: dict[str, Any] = setting(default_factory=dict, rank=230, group="engine", flags=(
        Flag("--engine", "engine",
             "The grader's generation engine (default: the task's, normally auto: vLLM on a GPU; on a CPU vLLM for "
             "models of 50M parameters and more).", kind="choice", choices=("auto", "vllm", "transformers")),
        Flag("--engine-option", "engine_options",
             "An engine setting over the task's [engine], e.g. gpu_memory_utilization=0.3, max_model_len=4096, "
             "dtype=bfloat16, tensor_parallel_size=2 (repeatable).", multiple=True, metavar="KEY=VALUE"),
    ), campaign="engine", from_flags=_engine, check="preflight.check_engine")
    """The run's engine settings over the task's."""
    prompt_profile: str | None = setting(None, rank=240, group="engine", flags=(Flag(
        "--prompt-profile", "prompt_profile",
        "How the grader prompts the model and reads its answers (see `agent2rl-tui tasks`; default: the task's, "
        "`reference` for gsm8k and humaneval: AutoRL-Bench's own prompts and extraction)."),),
        campaign="prompt_profile", check="preflight.check_prompt_profile")
    """The task's prompt profile (how the grader asks and reads answers); None: the task's default."""
    decoding_row: str | None = field(default=None, metadata={READ: lambda v: _opt(str)(v) or None})
    """The base model's row of the reference's model table, where the profile uses it."""
    judge: dict[str, Any] | None = setting(None, rank=250, group="judge", flags=JUDGE_FLAGS, campaign="judge",
                                           from_flags=_judge, check="preflight.check_judge")
    """A judge-graded task's judge (base_url, model, key_env, mode, concurrency), as its check
    returned it (never a key's value)."""
    search: dict[str, Any] | None = setting(None, rank=260, group="search", flags=SEARCH_FLAGS, campaign="search",
                                            from_flags=_search, check="preflight.check_search")
    """A searching task's backend: ``url`` (+ ``key_env``) of a web search API, or ``corpus`` (a JSONL file)."""
    webshop: dict[str, Any] | None = setting(None, rank=270, group="webshop store", flags=(Flag(
        "--webshop-url", "webshop_url",
        "Shopping tasks (webshop): a running WebShop server (AgentGym's environment-server protocol), instead of "
        "the WebShop checkout `data prepare webshop --from` recorded.",
        form=FormField("WebShop server URL (webshop)", "http://127.0.0.1:36001")),),
        campaign="store", from_flags=_webshop, check="preflight.check_webshop", metadata={JSON_KEY: "store"})
    """A shopping task's WebShop server: ``url`` (else the prepared checkout). Its key in the
    JSON and in campaign files is ``store``, the name runs have always been recorded with."""
    keep_submissions: bool = setting(False, rank=280, group="eval", flags=(Flag(
        "--keep-submissions", "keep_submissions",
        "Keep the grader's copy of each submission (RUN/intake/N/) after it is scored.", kind="flag"),),
        campaign="keep_submissions", from_flags=lambda v: bool(v.get("keep_submissions")))
    eval_memory_gib: float | None = setting(None, rank=290, group="eval", flags=(Flag(
        "--eval-memory", "eval_memory",
        "The eval worker's memory limit in GiB (default: six times the base model, at least 8, at most half the "
        "machine's memory); an evaluation over it fails as out_of_memory.", kind="float", metavar="GIB"),),
        campaign="eval_memory_gib", check="preflight.preflight_run")
    """The eval worker's memory limit (all its processes); None: the grader's default for the model's size."""
    driver_url: str | None = setting(None, rank=60, group="driver", flags=(Flag(
        "--driver-url", "driver_url",
        "The driver API's root, e.g. http://127.0.0.1:8000 (a gateway, a proxy, a local server): each agent CLI is "
        "pointed at it its own way (docs/agent-clis.md); recorded. Default: the CLI's own.", metavar="URL"),),
        campaign="driver_url", check="preflight.check_agent_starts (profiles.driver_setup)")
    """The driver API's root, which the agent's profile points its CLI at; None: the CLI's defaults."""
    meter: bool = setting(True, rank=70, group="meter", flags=(Flag(
        "--no-meter", "no_meter",
        "Let the agent call its driver API directly, for an endpoint the loopback meter cannot stand in front of: "
        "tokens and cost are then the agent's own account (the report says 'not metered').", kind="flag"),),
        campaign="meter", from_flags=lambda v: not v.get("no_meter"), check="preflight.check_metering")
    """Put the loopback meter between the agent and its driver API; False is recorded as "not metered"."""
    max_tokens: int | None = setting(None, rank=80, group="meter", flags=(Flag(
        "--max-tokens", "max_tokens",
        "Refuse the agent's driver calls once the run has used N tokens (input + output, metered).", kind="int",
        metavar="N"),), campaign="max_tokens", check="preflight.check_metering (metering.check_caps)")
    max_cost_usd: float | None = setting(None, rank=90, group="meter", flags=(Flag(
        "--max-cost", "max_cost",
        "Refuse the agent's driver calls once the run has cost USD dollars (metered, by the price table).",
        kind="float", metavar="USD"),), campaign="max_cost_usd",
        check="preflight.check_metering (metering.check_caps)")
    prices_path: str | None = setting(None, rank=100, group="meter", flags=(Flag(
        "--prices", "prices",
        "A price file (TOML, as agent2rl_tui/llm/prices.toml) over the package's table and your own.", kind="path",
        exists=True, dir_okay=False),), campaign="prices_path", from_flags=_path_or_none("prices"),
        check="preflight.check_metering")
    """A price file over the package's table and the user's own (recorded resolved)."""
    summarizer: dict[str, Any] | None = setting(None, rank=300, group="summarizer", flags=SUMMARIZER_FLAGS,
                                                from_flags=_summarizer, check="preflight.check_summarizer")
    """The narrative's summarizer settings (``run.summarizer.SummarizerSettings``), asked after the
    final report; None: no narrative."""
    gpus: str | None = setting(None, rank=170, group="engine", flags=(Flag(
        "--gpus", "gpus", "CUDA devices the run expects, e.g. 0 or 0,1 (checked before the run).",
        form=FormField("GPUs (e.g. 0 or 0,1)", "none checked")),), check="preflight.check_gpus")
    """CUDA device indices for the run (``CUDA_VISIBLE_DEVICES``)."""
    contain: bool = setting(True, rank=220, group="containment", flags=(Flag(
        "--no-contain", "no_contain", "Run the agent without its sandbox (the record marks the run 'not contained').",
        kind="flag"),), campaign="contain", from_flags=lambda v: not v.get("no_contain"),
        check="preflight.check_agent_starts")
    """Run the agent in its sandbox (run/containment.py); False is recorded as "not contained"."""
    read_only_paths: tuple[str, ...] = setting((), rank=200, group="containment", flags=(Flag(
        "--read-only-path", "read_only_paths",
        "A path outside the workspace the contained agent may read, e.g. its own script (repeatable).",
        kind="path", multiple=True, exists=True),), campaign="read_only_paths",
        from_flags=paths_of("read_only_paths"), from_campaign=tuple)
    writable_paths: tuple[str, ...] = setting((), rank=210, group="containment", flags=(Flag(
        "--writable-path", "writable_paths",
        "A path outside the workspace the contained agent may write (repeatable).", kind="path", multiple=True,
        exists=True),), campaign="writable_paths", from_flags=paths_of("writable_paths"), from_campaign=tuple)
    """Extra paths the contained agent sees, on top of its profile's (recorded resolved)."""
    profiles_path: str | None = setting(None, rank=190, group="agent", flags=(Flag(
        "--profiles", "profiles", "Agent profiles TOML file.", kind="path"),),
        from_flags=_path_or_none("profiles"), check="run.profiles.get_profile")
    agent_env: dict[str, str] = field(default_factory=dict, metadata={
        READ: lambda v: {k: str(x) for k, x in (_dict(v) or {}).items()}})
    """The variables given to the agent (``--env``), by name only: each value reads ``<not recorded>``."""
    profile: dict[str, Any] = field(default_factory=dict)
    """The agent profile as it was when the run was made (secrets redacted)."""
    eval_seed: int | None = setting(None, rank=110, group="eval", flags=(Flag(
        "--eval-seed", "eval_seed",
        "Grade on the eval draw of this seed (another run's, from `run show --eval-seed`, to compare two agents on "
        "the same items). Default: a new secret draw. An agent that knows the seed can compute its eval items: "
        "keep it from the agent.", kind="int", bounds=(0, (1 << 63) - 1), metavar="N"),), campaign="eval_seed",
        metadata={JSON_KEY: EVAL_SEED_KEY})
    """The seed of the run's eval draw (key ``tasks.eval_settings.EVAL_SEED_KEY``): here only; None in a
    request: drawn afresh when the run is made."""
    mode: str | None = setting(None, rank=185, group="agent", flags=(Flag(
        "--mode", "mode",
        "How the agent may train: free (anything goes, the default), sft-only or rl-only (the paper's modes); "
        "stated in its instructions, and checked against the training seen running.", kind="choice",
        choices=MODES),), campaign="mode", from_flags=lambda v: v.get("mode") if v.get("mode") not in (None, FREE)
        else None, metadata={READ: lambda v: v if v in MODES and v != FREE else None})
    """The training mode (``record.modes``); None: free. Written only where set."""
    max_submission_gib: float | None = None
    """The largest submission the grader takes; None: by the base model's size."""
    max_queued: int | None = None
    """Submissions that may wait at once; None: ``DEFAULT_MAX_QUEUED`` (``queue_limit``)."""
    train_env: dict[str, Any] | None = field(default=None, metadata={READ: _dict})
    """The train-environment service's limits over its defaults."""
    scripted_worker: dict[str, Any] | None = field(default=None, metadata={READ: _dict})
    """Score every submission from this script instead of a model (``grader.scripted_worker``):
    for tests of what happens around evaluations; each score's engine then reads ``scripted``."""
    rest: dict[str, Any] = field(default_factory=dict)
    """Keys this release does not know, kept as they were."""

    OPTIONAL: typing.ClassVar[tuple[str, ...]] = ("mode", "max_submission_gib", "max_queued", "train_env",
                                                  "scripted_worker")

    # -- in ---------------------------------------------------------------------------
    @classmethod
    def from_json(cls, text: str | bytes | dict[str, Any] | None) -> RunConfig:
        """The config of ``run.config_json``; the defaults for what is missing, unreadable or mistyped."""
        raw: Any = text
        if not isinstance(text, dict):
            try:
                raw = json.loads(text or "{}")
            except (ValueError, RecursionError, TypeError):
                raw = {}
        if not isinstance(raw, dict):
            raw = {}
        readers = _readers(cls)
        values = {f.name: reader(raw.get(key)) for f, key, reader in readers}
        known = {key for _, key, _ in readers}
        return cls(**values, rest={k: v for k, v in raw.items() if k not in known})

    # -- out --------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The object ``run.config_json`` holds (the keys ``run start`` has always written, in order)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "rest" or (f.name in self.OPTIONAL and value is None):
                continue
            out[f.metadata.get(JSON_KEY, f.name)] = list(value) if isinstance(value, tuple) else value
        out.update(self.rest)
        return out

    def dumps(self) -> str:
        return json.dumps(self.to_json())

    def replace(self, **changes: Any) -> RunConfig:
        return dataclasses.replace(self, **changes)

    # -- derived ----------------------------------------------------------------------
    @property
    def max_submission_bytes(self) -> int | None:
        return int(self.max_submission_gib * GIB) if self.max_submission_gib else None

    @property
    def queue_limit(self) -> int:
        return DEFAULT_MAX_QUEUED if self.max_queued is None else self.max_queued

    @property
    def eval_memory_bytes(self) -> int | None:
        return int(self.eval_memory_gib * GIB) if self.eval_memory_gib else None


def _reader_of_type(hint: Any, default: Any) -> Callable[[Any], Any]:
    """A JSON value's reader for a field of this type: the value where it has the type, else the default."""
    if hint is bool:
        return (lambda v: v is True) if default is False else (lambda v: v is not False)
    args = set(typing.get_args(hint))
    origin = typing.get_origin(hint) or hint
    if origin is tuple:
        return _paths
    if origin is dict or dict in {typing.get_origin(a) for a in args}:
        return (lambda v: _dict(v) or None) if default is None else (lambda v: _dict(v) or {})
    if hint is float or float in args:
        return (lambda v: _number(v)) if default is None else (lambda v: d if (d := _number(v)) is not None else default)
    kind = next((a for a in (str, int) if a is hint or a in args), None)
    if kind is None:
        raise TypeError(f"RunConfig: no reader for a field of type {hint!r}; give it metadata {READ!r}")
    return (lambda v: _opt(kind)(v)) if default is None else (lambda v: r if (r := _opt(kind)(v)) is not None else default)


Reader = tuple[dataclasses.Field[Any], str, Callable[[Any], Any]]
_READERS: dict[type[RunConfig], tuple[Reader, ...]] = {}


def _readers(cls: type[RunConfig]) -> tuple[Reader, ...]:
    """Each field of ``cls`` but ``rest``: its JSON key and reader (its own, or its type's), found once."""
    if cls not in _READERS:
        _READERS[cls] = _find_readers(cls)
    return _READERS[cls]


def _find_readers(cls: type[RunConfig]) -> tuple[Reader, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if f.name == "rest":
            continue
        default = f.default_factory() if callable(f.default_factory) else f.default
        reader = f.metadata.get(READ) or _reader_of_type(hints[f.name], default)
        out.append((f, f.metadata.get(JSON_KEY, f.name), reader))
    return tuple(out)
