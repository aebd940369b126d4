"""Tasks as folders: ``tasks/<name>/task.toml`` + ``description.md``, found by a registry.

A task says which level it belongs to, which evaluator grades it, where its train and
eval splits come from and how the grader prompts the model. Adding a task is adding a
folder; nothing here knows a task by name (the offline tasks' data generators are in
``tasks.generators``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from agent2rl_tui.tasks.errors import TaskError as TaskError
from agent2rl_tui.tasks.eval_settings import DEFAULT_EVAL_TIMEOUT_S as DEFAULT_EVAL_TIMEOUT_S
from agent2rl_tui.tasks.eval_settings import EVAL_SEED_KEY as EVAL_SEED_KEY
from agent2rl_tui.tasks.eval_settings import InferenceSettings as InferenceSettings
from agent2rl_tui.tasks.generators import EVAL_DRAWS, EVAL_SPACES, GENERATORS, HELD_OUT_GAMES
from agent2rl_tui.tasks.held_out import read_held_out

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
BUILTIN_TASKS_DIR = PACKAGE_ROOT / "tasks"


def draw_eval_seed() -> int:
    """A new run's eval seed: 63 bits from ``secrets``, nothing the agent can predict."""
    return secrets.randbits(63)


GRADING_MARK = "<!-- grading -->"
"""The line of a task's description.md that the prompt profile's ``about`` replaces."""


@dataclass(frozen=True)
class EngineSettings:
    """Engine choices that change a score's cost, not its meaning; recorded with every score."""

    engine: str = "auto"
    """auto (vLLM when it is installed and a GPU is visible, else transformers), vllm, transformers."""
    dtype: str = "bfloat16"
    """vLLM's ``auto`` runs FP32-saved checkpoints (what TRL often writes) in FP16 while bf16
    ones run in BF16: one fixed dtype keeps every submission and the baseline comparable."""
    gpu_memory_utilization: float = 0.4
    """vLLM's share of each GPU: the agent's own training keeps the rest."""
    max_model_len: int | None = None
    tensor_parallel_size: int | None = None
    """None: 1. More only when asked: a small model's head count rarely divides 4 or 8 GPUs,
    and the other GPUs may belong to the agent's training."""
    enforce_eager: bool = False
    seed: int = 0
    sleep_between: bool = True
    """vLLM on a GPU: sleep mode between evaluations (weights and KV cache freed), so the agent's
    own training has the GPU while no submission is graded."""
    cpu_dtype: str = "float32"
    """vLLM on a CPU: bf16 needs AVX512-BF16 and gains nothing for small models."""
    cpu_kv_cache_gib: float = 1.0
    """vLLM on a CPU: KV-cache memory (RAM) of the engine; ``gpu_memory_utilization`` is a GPU share."""

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


ENGINES = ("auto", "vllm", "transformers")


def engine_settings(base: EngineSettings, overrides: dict[str, Any]) -> EngineSettings:
    """``base`` (a task's [engine]) with a run's overrides, each checked against its field's type."""
    fields = {f.name: f for f in dataclasses.fields(EngineSettings)}
    values: dict[str, Any] = {}
    for key, raw in overrides.items():
        if key not in fields:
            raise TaskError(f"unknown engine setting {key!r}; known: {', '.join(sorted(fields))}")
        values[key] = _engine_value(key, raw, getattr(base, key), fields[key].type)
    if values.get("engine", base.engine) not in ENGINES:
        raise TaskError(f"engine {values.get('engine', base.engine)!r}: use {', '.join(ENGINES)}")
    return dataclasses.replace(base, **values)


def _engine_value(key: str, raw: Any, current: Any, annotation: Any) -> Any:
    """A setting's value from TOML/JSON or from ``KEY=VALUE`` text."""
    kind = str(annotation)
    if raw is None or (isinstance(raw, str) and raw.lower() in ("none", "null", "")):
        if "None" in kind:
            return None
        raise TaskError(f"engine setting {key} needs a value")
    try:
        if kind.startswith("bool"):
            if isinstance(raw, bool):
                return raw
            if str(raw).lower() in ("true", "1", "yes", "on"):
                return True
            if str(raw).lower() in ("false", "0", "no", "off"):
                return False
            raise ValueError(raw)
        if kind.startswith("int"):
            return int(raw)
        if kind.startswith("float"):
            return float(raw)
    except (TypeError, ValueError):
        raise TaskError(f"engine setting {key}={raw!r}: expected {kind.split(' ')[0]}") from None
    return str(raw)


@dataclass(frozen=True)
class GraderSection:
    """A task's ``[grader]``: how long one evaluation may take, and how HumanEval's programs run."""

    eval_timeout_s: float = DEFAULT_EVAL_TIMEOUT_S
    sandbox_timeout_s: float = 5.0
    sandbox_memory_mb: int = 1024
    sandbox_mode: str | None = None
    """None: the strongest the machine allows (``grader.sandbox``)."""

    @classmethod
    def from_table(cls, table: dict[str, Any], where: Path) -> GraderSection:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(table) - known)
        if unknown:
            raise TaskError(f"{where} [grader]: unknown keys {unknown}; known: {sorted(known)}")
        try:
            return cls(eval_timeout_s=float(table.get("eval_timeout_s", DEFAULT_EVAL_TIMEOUT_S)),
                       sandbox_timeout_s=float(table.get("sandbox_timeout_s", 5.0)),
                       sandbox_memory_mb=int(table.get("sandbox_memory_mb", 1024)),
                       sandbox_mode=str(table["sandbox_mode"]) if table.get("sandbox_mode") else None)
        except (TypeError, ValueError) as exc:
            raise TaskError(f"{where} [grader]: {exc}") from exc


@dataclass(frozen=True)
class JudgeSection:
    """A task's ``[judge]``: its answers are graded by the LLM judge a run names, and these are the
    task's defaults under the run's judge options. A key the task leaves out is None: the judge's
    own default (``judge.JudgeSettings``, the one place they are kept) applies."""

    mode: str | None = None
    """``ranking`` or ``weighted`` (a pairwise judge; a verdict judge has no modes)."""
    timeout_s: float | None = None
    retries: int | None = None
    backoff_s: float | None = None
    concurrency: int | None = None
    ranking_template: str | None = None
    """The pairwise judge's prompt for ``ranking``, a file in the task folder."""
    weighted_template: str | None = None
    """The pairwise judge's prompt for ``weighted``, a file in the task folder."""

    RUN_DEFAULTS: ClassVar[tuple[str, ...]] = ("mode", "timeout_s", "retries", "backoff_s", "concurrency")
    """The keys that are defaults of the run's judge settings (the templates are the task's own)."""
    KINDS: ClassVar[dict[str, tuple[type, ...]]] = {
        "mode": (str,), "timeout_s": (int, float), "retries": (int,), "backoff_s": (int, float),
        "concurrency": (int,), "ranking_template": (str,), "weighted_template": (str,)}

    @classmethod
    def from_table(cls, table: dict[str, Any], where: Path) -> JudgeSection:
        """The table's keys, each of its type (kept as written: the judge's settings record them)."""
        unknown = sorted(set(table) - set(cls.KINDS))
        if unknown:
            raise TaskError(f"{where} [judge]: {unknown[0]!r} is not a [judge] key: remove it or fix its spelling; "
                            f"known: {', '.join(cls.KINDS)}")
        for key, value in table.items():
            kinds = cls.KINDS[key]
            if isinstance(value, bool) or not isinstance(value, kinds):
                want = " or ".join("a string" if k is str else f"an {k.__name__}" if k is int else f"a {k.__name__}"
                                   for k in kinds)
                raise TaskError(f"{where} [judge]: {key} = {value!r} is not {want}: write it as one")
        return cls(**table)

    def run_defaults(self, *, modes: bool = True) -> dict[str, Any]:
        """The task's defaults of the run's judge settings (``mode`` left out where ``modes`` is off)."""
        return {k: v for k in self.RUN_DEFAULTS if (v := getattr(self, k)) is not None and (modes or k != "mode")}

    def template(self, mode: str) -> str | None:
        """The prompt file of a pairwise judge's ``mode``, where the task has one."""
        return {"ranking": self.ranking_template, "weighted": self.weighted_template}.get(mode)


SectionCheck = Callable[["Task"], None]
SECTION_CHECKS: dict[str, SectionCheck] = {}
"""Checks of a task's sections that a layer above this one reads (``[env]``: ``envs`` registers the
check of its kinds' specs when imported, as every program that plays a task imports it); a task is
loaded only when every check of a section it has passes."""


def register_section_check(section: str, check: SectionCheck) -> None:
    """``check(task)`` runs on every task with a ``[section]`` that ``load_task`` loads; it raises
    ``TaskError`` naming the task file and the key."""
    SECTION_CHECKS[section] = check


@dataclass(frozen=True)
class Task:
    """One benchmark task as declared by its folder."""

    name: str
    folder: Path
    level: int
    evaluator: str
    title: str
    data: dict[str, Any]
    inference: InferenceSettings
    raw: dict[str, Any] = field(repr=False)
    engine: EngineSettings = field(default_factory=EngineSettings)
    prompt_profiles: dict[str, InferenceSettings] = field(default_factory=dict)
    """Every prompt profile by name; ``inference`` is the default one."""
    grader: GraderSection = field(default_factory=GraderSection)
    judge: JudgeSection | None = None
    """The task's ``[judge]``; None: its answers are not graded by a judge."""

    @property
    def eval_timeout_s(self) -> float:
        """Seconds one evaluation may take (the task's ``[grader]``)."""
        return self.grader.eval_timeout_s

    @property
    def env_table(self) -> dict[str, Any]:
        """The ``[env]`` table of an interactive task (``envs.EnvSpec`` reads it), else empty."""
        return dict(self.raw.get("env", {}))

    @property
    def env_kind(self) -> str | None:
        """The environment an interactive task plays (``webshop``, ``search-qa``, ...), else None."""
        kind = self.env_table.get("kind")
        return str(kind) if kind else None

    @property
    def judged(self) -> bool:
        """Whether the task's answers are graded by an LLM judge the run names (it has a ``[judge]``)."""
        return self.judge is not None

    @property
    def description(self) -> str:
        """description.md for the default prompt profile."""
        return self.description_for(None)

    def description_for(self, prompt_profile: str | None) -> str:
        """description.md with the profile's ``about`` in place of its ``<!-- grading -->`` line."""
        text = (self.folder / "description.md").read_text(encoding="utf-8")
        about = self.settings_for(prompt_profile).about.strip()
        return text.replace(GRADING_MARK, about) if about and GRADING_MARK in text else text

    def engine_for(self, settings: InferenceSettings, run: dict[str, Any] | None = None) -> EngineSettings:
        """The engine a score is made with: the task's ``[engine]``, the profile's ``engine`` over
        it, the run's ``--engine-option`` over both."""
        return engine_settings(self.engine, {**settings.engine, **(run or {})})

    def settings_for(self, prompt_profile: str | None) -> InferenceSettings:
        """The named prompt profile (None: the task's default)."""
        if prompt_profile is None:
            return self.inference
        try:
            return self.prompt_profiles[prompt_profile]
        except KeyError:
            raise TaskError(f"task {self.name} has no prompt profile {prompt_profile!r}; it has "
                            f"{', '.join(sorted(self.prompt_profiles))} (default {self.inference.prompt_profile})"
                            ) from None

    def shots(self, settings: InferenceSettings) -> list[dict[str, Any]]:
        """The worked examples put before each question: the profile's file, or train rows."""
        if settings.shots_file:
            path = self.folder / settings.shots_file
            try:
                shots = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise TaskError(f"task {self.name}: shots_file {path}: {exc}") from exc
            if not isinstance(shots, list) or not all(isinstance(s, dict) for s in shots):
                raise TaskError(f"task {self.name}: {path} must be a JSON list of objects (the items' fields)")
            return shots
        return self.load_split("train")[: settings.fewshot] if settings.fewshot and self.level != 3 else []

    def grading_spec(self, settings: InferenceSettings | None = None) -> dict[str, Any]:
        """A prompt profile as ``tasks.grading_rules`` reads it: settings, worked examples, the task."""
        settings = settings or self.inference
        return {"task": self.name, "level": self.level, **settings.to_dict(), "shots": self.shots(settings)}

    @property
    def draws_eval(self) -> bool:
        """Whether each run is graded on items drawn with its own eval seed (a generator task with a
        draw), rather than on the task's one fixed eval split (a published benchmark's test split)."""
        return self.data.get("source") == "generator" and self._generator_name() in EVAL_DRAWS

    @property
    def eval_size(self) -> int | None:
        """How many items a run is graded on: counted where this machine makes them (a generated
        task), else as the task states it (``[data] eval_items``: a benchmark's test split, known
        before ``data prepare``); None where neither."""
        if self.data.get("source") == "generator":
            return len(self.eval_items(None))
        stated = self.data.get("eval_items")
        return stated if isinstance(stated, int) and stated > 0 else None

    def eval_items(self, eval_seed: int | None) -> list[dict[str, Any]]:
        """The items the grader scores in a run whose record holds ``eval_seed`` (``EVAL_SEED_KEY``).

        A drawing task draws them from its eval space with that seed, so two runs are graded on
        different items and no run's items follow from what its agent has; the same seed always
        gives the same items. Without a seed (a run made before eval seeds, a benchmark script) or
        for a task with a fixed eval split: ``load_split("eval")``.
        """
        if eval_seed is None or not self.draws_eval:
            return self.load_split("eval")
        return EVAL_DRAWS[self._generator_name()](self.eval_space(), dict(self.data.get("params", {})),
                                                  int(eval_seed))

    def eval_space(self) -> list[dict[str, Any]]:
        """Every item a run's eval draw can hold (a drawing task), else the fixed eval split.

        A TextWorldExpress task's space is the test fold's games less those a train-fold game
        matches (``tasks.held_out``: the list in its folder's ``eval_space.json``)."""
        if not self.draws_eval:
            return self.load_split("eval")
        name = self._generator_name()
        space = EVAL_SPACES[name](int(self.data.get("seed", 0)), dict(self.data.get("params", {})))
        if name in HELD_OUT_GAMES:
            env = self.env_table
            held = set(read_held_out(self.folder, str(env.get("game", "")), str(env.get("params", "")),
                                     self.name).games)
            space = [row for row in space if row["game"] in held]
        return space

    def _generator_name(self) -> str:
        name = str(self.data.get("generator", self.name))
        if name not in GENERATORS:
            raise TaskError(f"task {self.name}: unknown generator {name!r}; known: {sorted(GENERATORS)}")
        return name

    def load_split(self, split: str) -> list[dict[str, Any]]:
        """Items of the ``train`` or ``eval`` split, in a fixed order.

        For a drawing task (``draws_eval``) the ``eval`` split is only the default draw, used where
        no run is concerned; the grader scores a run on ``eval_items(its eval seed)``.
        """
        if split not in ("train", "eval"):
            raise TaskError(f"unknown split {split!r}: use 'train' or 'eval'")
        source = self.data.get("source")
        if source == "generator":
            gen = GENERATORS[self._generator_name()]
            train, evals = gen(int(self.data.get("seed", 0)), dict(self.data.get("params", {})))
            if split == "train":
                return train
            return self.eval_space()[: len(evals)] if self.draws_eval else evals  # the default draw
        if source == "prepared":
            if not prepared(self):
                raise not_prepared_error(self)
            return read_jsonl(task_cache(self) / ("train.jsonl" if split == "train" else "eval.jsonl"))
        if source == "files":
            key = f"{split}_file"
            if key not in self.data:
                raise TaskError(f"task {self.name}: [data] needs {key}")
            path = Path(self.data[key])
            if not path.is_absolute():
                path = self.folder / path
            return read_jsonl(path)
        raise TaskError(f"task {self.name}: [data] source must be 'generator', 'files' or 'prepared', "
                        f"not {source!r}")

    def check_data(self) -> None:
        """Raise TaskError (naming the command to run) if the splits are not available."""
        if self.data.get("source") == "prepared":
            if not prepared(self):
                raise not_prepared_error(self)
        else:
            self.load_split("train")


def cache_root() -> Path:
    """Where prepared data lives: ``$AGENT2RL_DATA``, else ``~/.cache/agent2rl-tui/data``."""
    env = os.environ.get("AGENT2RL_DATA")
    return Path(env) if env else Path.home() / ".cache" / "agent2rl-tui" / "data"


def task_cache(task: Task) -> Path:
    return cache_root() / task.name


def prepared(task: Task) -> bool:
    d = task_cache(task)
    return (d / "train.jsonl").is_file() and (d / "eval.jsonl").is_file()


def not_prepared_error(task: Task) -> TaskError:
    return TaskError(
        f"the data of task {task.name} is not prepared in {task_cache(task)}: run "
        f"`agent2rl-tui data prepare {task.name}` (with --from PATH to use local files offline)"
    )


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        raise TaskError(f"data file {path} does not exist")
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def write_jsonl(path: Path, items: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for item in items:
            fh.write(json.dumps(item, ensure_ascii=False) + "\n")


def task_dirs() -> list[Path]:
    """Where tasks are looked up: ``$AGENT2RL_TASKS`` (os.pathsep-separated), then tasks/."""
    extra = [Path(p) for p in os.environ.get("AGENT2RL_TASKS", "").split(os.pathsep) if p]
    return [*extra, BUILTIN_TASKS_DIR]


def discover() -> dict[str, Path]:
    """Task name -> folder, earlier search dirs winning."""
    found: dict[str, Path] = {}
    for root in task_dirs():
        if not root.is_dir():
            continue
        for toml in sorted(root.glob("*/task.toml")):
            found.setdefault(toml.parent.name, toml.parent)
    return found


def load_task(name_or_path: str | Path) -> Task:
    """Load a task by registry name or by folder path."""
    folder = Path(name_or_path)
    if not (folder / "task.toml").is_file():
        known = discover()
        if str(name_or_path) not in known:
            raise TaskError(
                f"no task named {name_or_path!r}; known tasks: {', '.join(sorted(known)) or 'none'}"
            )
        folder = known[str(name_or_path)]
    try:
        raw = tomllib.loads((folder / "task.toml").read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(f"{folder / 'task.toml'} is not valid TOML: {exc}") from exc
    if not (folder / "description.md").is_file():
        raise TaskError(f"task folder {folder} needs a description.md for the agent")
    where = folder / "task.toml"
    for section in ("grader", "judge", "env", "engine", "inference", "data"):
        if not isinstance(raw.get(section, {}), dict):
            raise TaskError(f"{where}: {section} must be a table ([{section}] with its keys under it)")
    profiles = prompt_profiles_of(raw, folder / "task.toml")
    default = str(raw.get("prompt_profile", next(iter(profiles))))
    if default not in profiles:
        raise TaskError(f"{folder / 'task.toml'}: prompt_profile = {default!r} is not among its "
                        f"[prompt_profiles.*] ({', '.join(profiles)})")
    try:
        engine = engine_settings(EngineSettings(), dict(raw.get("engine", {})))
    except TaskError as exc:
        raise TaskError(f"{folder / 'task.toml'} [engine]: {exc}") from exc
    for name, profile in profiles.items():
        try:
            engine_settings(engine, profile.engine)
        except TaskError as exc:
            raise TaskError(f"{folder / 'task.toml'} [prompt_profiles.{name}] engine: {exc}") from exc
    grader = GraderSection.from_table(dict(raw.get("grader", {})), where)
    judge = JudgeSection.from_table(raw["judge"], where) if "judge" in raw else None
    task = Task(
        name=str(raw.get("name", folder.name)),
        folder=folder,
        level=int(raw.get("level", 1)),
        evaluator=str(raw.get("evaluator", "math_answer")),
        title=str(raw.get("title", folder.name)),
        data=dict(raw.get("data", {})),
        inference=profiles[default],
        grader=grader,
        raw=raw,
        engine=engine,
        prompt_profiles=profiles,
        judge=judge,
    )
    for section, check in SECTION_CHECKS.items():
        if section in raw:
            check(task)
    return task


def prompt_profiles_of(raw: dict[str, Any], where: Path) -> dict[str, InferenceSettings]:
    """``[inference]`` alone (one profile, ``default``), or each ``[prompt_profiles.NAME]`` over it."""
    base = dict(raw.get("inference", {}))
    named = raw.get("prompt_profiles") or {"default": {}}
    profiles: dict[str, InferenceSettings] = {}
    for name, over in named.items():
        values = {**base, **dict(over), "prompt_profile": name}
        values["stop"] = tuple(values.get("stop", ()))
        try:
            profiles[name] = InferenceSettings(**values)
        except TypeError as exc:
            known = ", ".join(f.name for f in dataclasses.fields(InferenceSettings))
            raise TaskError(f"{where} [inference] / [prompt_profiles.{name}]: {exc}; known keys: {known}") from exc
    return profiles
