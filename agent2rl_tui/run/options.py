"""Every option of a run, declared once.

A run's options reach ``RunRequest`` three ways: ``run start``'s flags, the New Run form's
fields, and a campaign file's ``[options]`` table. Each used to map them by hand (a
31-parameter ``run_start``, the form's own dictionaries, campaign's own list of keys), so a
new option, or a change of one, had to be made three times and could drift. Here each
option is one ``RunOption``: the ``RunRequest`` field it fills, the group it belongs to,
its CLI flag(s) (``Flag``: name, type, help word for word, default), its campaign key, how
flags' values and a campaign value become the field's value, and where it is checked. The
front ends read this list: ``cli`` turns ``Flag``s into click options
(``cli._run_options``), ``request_from_flags`` turns click's values into a ``RunRequest``,
``campaign.RUN_OPTIONS`` and ``request_fields_from_campaign`` come from the campaign keys, and the
New Run form takes its fields' labels and placeholders from ``Flag.form``. (Harlequin
declares its adapters' options the same way, as objects its CLI turns into click options.)

This module is headless: it knows no click. A flag's type is a plain word (``kind``) with
its bounds, which ``cli`` renders as a click type.

Naming: the WebShop server of a shopping task (``--webshop-url``) fills ``RunRequest.webshop``,
and is recorded in the run's config as ``store`` (read there by the grader and the
train-environment service) and given in campaign files as ``store``, the names runs and
campaign files already hold.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from agent2rl_tui.util.timeutil import parse_duration


class OptionValueError(ValueError):
    """A flag's value that does not read (``--env X`` without ``=``); ``flag`` names it, so the
    CLI reports it as a bad parameter of that flag."""

    def __init__(self, message: str, flag: str) -> None:
        super().__init__(message)
        self.flag = flag


@dataclass(frozen=True)
class FormField:
    """How the New Run form shows a flag: its label and the empty input's placeholder (the
    widget's id is the flag's name without ``--``)."""

    label: str
    placeholder: str = ""


@dataclass(frozen=True)
class Flag:
    """One CLI flag of ``run start``; ``dest`` is the name click hands its value under."""

    name: str
    dest: str
    help: str | None = None
    kind: str = "text"
    """text, path, int, float, choice or flag (a boolean switch)."""
    default: Any = None
    show_default: bool = False
    required: bool = False
    multiple: bool = False
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    """The accepted values of a ``choice``."""
    bounds: tuple[int, int] | None = None
    """An ``int``'s accepted range, both ends included."""
    exists: bool = False
    """A ``path`` that must exist."""
    dir_okay: bool = True
    """A ``path`` that may be a folder."""
    form: FormField | None = None
    """Where the New Run form shows this flag: its field there."""

    @property
    def widget_id(self) -> str:
        return self.name.removeprefix("--")


@dataclass(frozen=True)
class RunOption:
    """One field of ``RunRequest`` and every way it is given."""

    field: str
    """The ``RunRequest`` field it fills."""
    group: str
    """task, agent, budget, driver, meter, eval, containment, engine, judge, search, webshop store, summarizer."""
    flags: tuple[Flag, ...]
    """Its ``run start`` flags, in the order ``--help`` lists them."""
    campaign: str | None = None
    """Its key in a campaign file's ``[options]``; None: a campaign sets it per cell or not at all."""
    from_flags: Callable[[Mapping[str, Any]], Any] | None = None
    """The field's value from the flags' values (keyed by ``Flag.dest``); None: the one flag's value as it is."""
    from_campaign: Callable[[Any], Any] | None = None
    """The field's value from the campaign value; None: the value as it is."""
    check: str | None = None
    """Where the value is checked before a run is made (for the reader; lifecycle calls it)."""

    def value_from_flags(self, values: Mapping[str, Any]) -> Any:
        if self.from_flags is not None:
            return self.from_flags(values)
        return values.get(self.flags[0].dest)

    def value_from_campaign(self, value: Any) -> Any:
        return value if self.from_campaign is None else self.from_campaign(value)


def parse_pairs(pairs: tuple[str, ...], flag: str) -> dict[str, str]:
    """``KEY=VALUE`` strings as a dict (the key stripped); a string without ``=`` is refused."""
    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise OptionValueError(f"{pair!r} is not KEY=VALUE", flag)
        key, value = pair.split("=", 1)
        out[key.strip()] = value
    return out


def _grace(text: str) -> float:
    return 0.0 if text.strip() in ("0", "0s") else parse_duration(text)


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


def _store(values: Mapping[str, Any]) -> dict[str, Any] | None:
    return {"url": values["webshop_url"]} if values.get("webshop_url") else None


def _summarizer(values: Mapping[str, Any]) -> dict[str, Any] | None:
    from agent2rl_tui.run.summarizer import SummarizerSettings

    settings = SummarizerSettings.from_options(values.get("summarizer_url"), values.get("summarizer_model"),
                                               values.get("summarizer_key_env"))
    return settings.to_dict() if settings else None


def _paths(dest: str) -> Callable[[Mapping[str, Any]], tuple[str, ...]]:
    return lambda values: tuple(map(str, values.get(dest) or ()))


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

OPTIONS: tuple[RunOption, ...] = (
    RunOption("task", "task", (Flag("--task", "task", "Task name (see `agent2rl-tui tasks`) or folder.",
                                    required=True),),
              check="tasks.registry.load_task, Task.check_data"),
    RunOption("agent", "agent", (Flag("--agent", "agent", "Agent profile (see `agent2rl-tui agents`).",
                                      required=True),),
              check="run.profiles.get_profile, run.profiles.preflight"),
    RunOption("model", "task", (Flag("--model", "model", "Base model folder.", kind="path", required=True,
                                     form=FormField("base model folder",
                                                    "/path/to/model (config.json, weights, tokenizer)")),),
              check="tasks.modelfiles.check_model_folder, check_model_loads"),
    RunOption("budget_s", "budget", (Flag("--budget", "budget", "Wall-clock budget: 90s, 5m, 12h.", default="5m",
                                          show_default=True),),
              from_flags=lambda v: parse_duration(v["budget"]), check="lifecycle.preflight_run"),
    RunOption("grace_s", "budget", (Flag("--grace", "grace", "Time between SIGTERM and SIGKILL at the deadline.",
                                         default="30s", show_default=True),),
              campaign="grace", from_flags=lambda v: _grace(v.get("grace") or "30s"),
              from_campaign=lambda v: parse_duration(str(v)) if v else 30.0, check="lifecycle.preflight_run"),
    RunOption("driver", "driver", (Flag("--driver", "driver", "The driver LLM of the agent, for the record.",
                                        form=FormField("driver LLM (passed to the CLI as its model, and recorded)",
                                                       "e.g. claude-sonnet-4-5")),)),
    RunOption("driver_url", "driver", (Flag(
        "--driver-url", "driver_url",
        "The driver API's root, e.g. http://127.0.0.1:8000 (a gateway, a proxy, a local server): each agent CLI is "
        "pointed at it its own way (docs/agent-clis.md); recorded. Default: the CLI's own.", metavar="URL"),),
        campaign="driver_url", check="lifecycle.check_agent_starts (profiles.driver_setup)"),
    RunOption("meter", "meter", (Flag(
        "--no-meter", "no_meter",
        "Let the agent call its driver API directly, for an endpoint the loopback meter cannot stand in front of: "
        "tokens and cost are then the agent's own account (the report says 'not metered').", kind="flag"),),
        campaign="meter", from_flags=lambda v: not v.get("no_meter"), check="lifecycle.check_metering"),
    RunOption("max_tokens", "meter", (Flag(
        "--max-tokens", "max_tokens",
        "Refuse the agent's driver calls once the run has used N tokens (input + output, metered).", kind="int",
        metavar="N"),), campaign="max_tokens", check="lifecycle.check_metering (metering.check_caps)"),
    RunOption("max_cost_usd", "meter", (Flag(
        "--max-cost", "max_cost",
        "Refuse the agent's driver calls once the run has cost USD dollars (metered, by the price table).",
        kind="float", metavar="USD"),), campaign="max_cost_usd",
        check="lifecycle.check_metering (metering.check_caps)"),
    RunOption("prices_path", "meter", (Flag(
        "--prices", "prices",
        "A price file (TOML, as agent2rl_tui/llm/prices.toml) over the package's table and your own.", kind="path",
        exists=True, dir_okay=False),), campaign="prices_path", check="lifecycle.check_metering"),
    RunOption("eval_seed", "eval", (Flag(
        "--eval-seed", "eval_seed",
        "Grade on the eval draw of this seed (another run's, from `run show --eval-seed`, to compare two agents on "
        "the same items). Default: a new secret draw. An agent that knows the seed can compute its eval items: "
        "keep it from the agent.", kind="int", bounds=(0, (1 << 63) - 1), metavar="N"),), campaign="eval_seed"),
    RunOption("seed", "task", (Flag("--seed", "seed", kind="int", default=0, show_default=True),)),
    RunOption("command", "agent", (Flag("--command", "command", "Shell command line for the 'command' agent.",
                                        form=FormField("command (only for the 'command' agent)",
                                                       "python code/train.py")),),
              check="run.profiles.preflight"),
    RunOption("agent_env", "agent", (Flag("--env", "env", "KEY=VALUE for the agent's environment (repeatable).",
                                          multiple=True),),
              campaign="env", from_flags=lambda v: parse_pairs(v.get("env") or (), "--env"),
              from_campaign=lambda v: dict(v or {})),
    RunOption("eval_timeout_s", "eval", (Flag("--eval-timeout", "eval_timeout",
                                              "Per-evaluation timeout (default: the task's)."),),
              campaign="eval_timeout_s",
              from_flags=lambda v: parse_duration(v["eval_timeout"]) if v.get("eval_timeout") else None),
    RunOption("eval_limit", "eval", (Flag("--eval-limit", "eval_limit",
                                          "Grade only the first N eval items (quick checks).", kind="int"),),
              campaign="eval_limit"),
    RunOption("gpus", "engine", (Flag("--gpus", "gpus",
                                      "CUDA devices the run expects, e.g. 0 or 0,1 (checked before the run).",
                                      form=FormField("GPUs (e.g. 0 or 0,1)", "none checked")),),
              check="lifecycle.check_gpus"),
    RunOption("allow_missing_key", "agent", (Flag("--allow-missing-key", "allow_missing_key",
                                                  "Start even if the agent's API key variable is unset.",
                                                  kind="flag", form=FormField("API key variable")),),
              campaign="allow_missing_key", from_flags=lambda v: bool(v.get("allow_missing_key")),
              check="run.profiles.preflight"),
    RunOption("profiles_path", "agent", (Flag("--profiles", "profiles", "Agent profiles TOML file.",
                                              kind="path"),),
              check="run.profiles.get_profile"),
    RunOption("read_only_paths", "containment", (Flag(
        "--read-only-path", "read_only_paths",
        "A path outside the workspace the contained agent may read, e.g. its own script (repeatable).",
        kind="path", multiple=True, exists=True),),
        campaign="read_only_paths", from_flags=_paths("read_only_paths"), from_campaign=tuple),
    RunOption("writable_paths", "containment", (Flag(
        "--writable-path", "writable_paths",
        "A path outside the workspace the contained agent may write (repeatable).", kind="path", multiple=True,
        exists=True),),
        campaign="writable_paths", from_flags=_paths("writable_paths"), from_campaign=tuple),
    RunOption("contain", "containment", (Flag(
        "--no-contain", "no_contain", "Run the agent without its sandbox (the record marks the run 'not contained').",
        kind="flag"),),
        campaign="contain", from_flags=lambda v: not v.get("no_contain"), check="lifecycle.check_agent_starts"),
    RunOption("engine", "engine", (
        Flag("--engine", "engine",
             "The grader's generation engine (default: the task's, normally auto: vLLM on a GPU; on a CPU vLLM for "
             "models of 50M parameters and more).", kind="choice", choices=("auto", "vllm", "transformers")),
        Flag("--engine-option", "engine_options",
             "An engine setting over the task's [engine], e.g. gpu_memory_utilization=0.3, max_model_len=4096, "
             "dtype=bfloat16, tensor_parallel_size=2 (repeatable).", multiple=True, metavar="KEY=VALUE"),
    ), campaign="engine", from_flags=_engine, check="lifecycle.check_engine"),
    RunOption("prompt_profile", "engine", (Flag(
        "--prompt-profile", "prompt_profile",
        "How the grader prompts the model and reads its answers (see `agent2rl-tui tasks`; default: the task's, "
        "`reference` for gsm8k and humaneval: AutoRL-Bench's own prompts and extraction)."),),
        campaign="prompt_profile", check="lifecycle.check_prompt_profile"),
    RunOption("judge", "judge", JUDGE_FLAGS, campaign="judge", from_flags=_judge, check="lifecycle.check_judge"),
    RunOption("search", "search", SEARCH_FLAGS, campaign="search", from_flags=_search,
              check="lifecycle.check_search"),
    RunOption("webshop", "webshop store", (Flag(
        "--webshop-url", "webshop_url",
        "Shopping tasks (webshop): a running WebShop server (AgentGym's environment-server protocol), instead of "
        "the WebShop checkout `data prepare webshop --from` recorded.",
        form=FormField("WebShop server URL (webshop)", "http://127.0.0.1:36001")),),
        campaign="store", from_flags=_store, check="lifecycle.check_webshop"),
    RunOption("keep_submissions", "eval", (Flag(
        "--keep-submissions", "keep_submissions",
        "Keep the grader's copy of each submission (RUN/intake/N/) after it is scored.", kind="flag"),),
        campaign="keep_submissions", from_flags=lambda v: bool(v.get("keep_submissions"))),
    RunOption("eval_memory_gib", "eval", (Flag(
        "--eval-memory", "eval_memory",
        "The eval worker's memory limit in GiB (default: six times the base model, at least 8, at most half the "
        "machine's memory); an evaluation over it fails as out_of_memory.", kind="float", metavar="GIB"),),
        campaign="eval_memory_gib", check="lifecycle.preflight_run"),
    RunOption("summarizer", "summarizer", SUMMARIZER_FLAGS, from_flags=_summarizer,
              check="run.summarizer.SummarizerSettings.from_options, lifecycle.check_summarizer"),
)
"""Every run option, in the order ``run start --help`` lists their flags."""

BY_FIELD: dict[str, RunOption] = {o.field: o for o in OPTIONS}
CAMPAIGN_OPTIONS: dict[str, RunOption] = {o.campaign: o for o in OPTIONS if o.campaign}
"""A campaign file's ``[options]`` keys and the options they give."""


def flags() -> list[Flag]:
    """Every flag of every option, in ``--help`` order."""
    return [f for o in OPTIONS for f in o.flags]


def flag(name: str) -> Flag:
    """The flag named ``name`` (``--judge-url``)."""
    return next(f for f in flags() if f.name == name)


def request_from_flags(values: Mapping[str, Any], **extra: Any) -> Any:
    """A ``RunRequest`` from flags' values keyed by ``Flag.dest`` (as click hands them; an absent
    one takes its declared default); ``extra`` sets fields no flag gives (``root``)."""
    from agent2rl_tui.run.lifecycle import RunRequest

    given = {**{f.dest: f.default for f in flags()}, **values}
    return RunRequest(**{o.field: o.value_from_flags(given) for o in OPTIONS}, **extra)


def request_fields_from_campaign(options: Mapping[str, Any]) -> dict[str, Any]:
    """The ``RunRequest`` fields a campaign's ``[options]`` give (known keys only: the file's
    reader refuses the others)."""
    return {CAMPAIGN_OPTIONS[k].field: CAMPAIGN_OPTIONS[k].value_from_campaign(v) for k, v in options.items()}


def _undeclared() -> list[str]:
    """``RunRequest`` fields no option declares (``root`` is where a run goes, not an option)."""
    from agent2rl_tui.run.lifecycle import RunRequest

    return [f.name for f in fields(RunRequest) if f.name not in BY_FIELD and f.name != "root"]

