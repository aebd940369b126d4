"""The reference's decoding by base model: AutoRL-Bench's OpenCompass model table.

Why: AutoRL-Bench grades GSM8K and HumanEval through OpenCompass with decoding taken from a
per-model table (RD-Agent's ``rdagent/components/benchmark/configs/models.yaml``), the row
chosen by the *base* model's hub id for every submission (``OpenCompassEvaluator.run_eval``
gets ``model_name=base_model``; ``_get_model_inference_config`` picks the row). Qwen3 bases are
sampled at 0.6 with thinking on and a long output budget, Llama-3.1-8B-Instruct and
Mistral-7B-v0.3 at 0.7, the rest greedily. A prompt profile with ``model_table = true``
measures the same way: the run decides the row once, when it is created, from the base model's
folder (``model_row``), records its name in the run's config (``decoding_row``), and the grader
and the workspace's grading kit apply it (``run_settings``); every score records the settings
as applied.

The rule, as the reference's: the row whose key is the name exactly, else the longest key the
name starts with, keys of more than 5 characters only; no match: ``default``. A row is the
``default`` row with the model's entries over it (``{**default, **model}``); only the fields that
change a measurement are kept here (batch size, GPU share, dtype, tensor parallelism do not).

Where a row and a profile meet:

- temperature, top_p, top_k: the row's.
- enable_thinking: ``True`` where the row says true (the reference then passes
  ``chat_template_kwargs=dict(enable_thinking=True)``); where it says false the reference passes
  nothing, so neither do we (``None``), and the chat template's own default holds.
- max_new_tokens (``max_out_len``): OpenCompass puts a dataset config's ``max_out_len`` over the
  model config's. A profile states the limit its dataset sets; a profile whose limit is the
  ``default`` row's ``max_out_len`` (8192) states none of its own, but the model config's
  default, so the row's ``max_out_len`` takes its place. Hence: **the profile's max_new_tokens
  stays unless it equals 8192, in which case the row's max_out_len replaces it.** GSM8K's
  reference profile (``gsm8k_gen_1d7fe4``: ``max_out_len=512``) keeps 512 under every row;
  HumanEval's (the dataset sets none; 8192, the default row's) gets 38912 under Qwen3's row and
  4096 under Llama-3.1's. Nothing was added to ``InferenceSettings`` for this.
- max_seq_len: the engine's context (``EngineSettings.max_model_len``). ``row_engine`` raises
  the task's ``max_model_len`` to the row's where the row's is larger and the run did not set
  one itself; the engine still caps it at the model's own context. It is never lowered (the
  task's value is a memory cap, and a shorter context only cuts completions short).

The base model's hub id comes from local files only (``hub_id``): a hub-cache folder
(``models--Org--Name/snapshots/<sha>``) names it outright; else a folder laid out as
``.../Org/Name`` counts where that name picks a row, or a folder ``.../Name`` where ``Org/Name``
picks a row for one of the table's organisations; else ``config.json``'s ``_name_or_path``
where it reads ``Org/Name`` (or is a path read by the same rules). The model folder is untrusted input:
config.json is read only as a regular file inside the folder, at most ``CONFIG_CAP`` bytes, and
anything unreadable or malformed gives no name (so the ``default`` row), never an error.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from agent2rl_tui.tasks.registry import EngineSettings, InferenceSettings, Task, TaskError


@dataclass(frozen=True)
class DecodingRow:
    """One row of the reference's model table: the fields that change a measurement."""

    temperature: float
    top_p: float
    top_k: int
    max_seq_len: int
    max_out_len: int
    enable_thinking: bool

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


DEFAULT = "default"
DEFAULT_ROW = DecodingRow(temperature=0.0, top_p=1.0, top_k=1, max_seq_len=32768, max_out_len=8192,
                          enable_thinking=False)
_GREEDY = DEFAULT_ROW
_QWEN3 = DecodingRow(temperature=0.6, top_p=0.95, top_k=20, max_seq_len=40960, max_out_len=38912,
                     enable_thinking=True)

MODEL_ROWS: dict[str, DecodingRow] = {
    # models.yaml's ``models:``, each over ``default:``, in the file's order.
    "Qwen/Qwen3-8B": _QWEN3,
    "Qwen/Qwen3-32B": _QWEN3,
    "Qwen/Qwen3-1.7B": _QWEN3,
    "Qwen/Qwen2.5-0.5B-Instruct": _GREEDY,
    "Qwen/Qwen2.5-0.5B": _GREEDY,
    "Qwen/Qwen2.5-7B-Instruct": _GREEDY,
    "Qwen/Qwen2.5-32B-Instruct": _GREEDY,
    "meta-llama/Llama-3.1-8B-Instruct": DecodingRow(temperature=0.7, top_p=0.95, top_k=40, max_seq_len=32768,
                                                    max_out_len=4096, enable_thinking=False),
    "mistralai/Mistral-7B-Instruct-v0.3": DecodingRow(temperature=0.7, top_p=0.95, top_k=50, max_seq_len=32768,
                                                      max_out_len=8192, enable_thinking=False),
    "deepseek-ai/deepseek-coder-33b-instruct": DecodingRow(temperature=0.0, top_p=1.0, top_k=1, max_seq_len=16384,
                                                           max_out_len=4096, enable_thinking=False),
}
"""The reference's per-model rows (RD-Agent ``configs/models.yaml``), as the reference merges them."""

PREFIX_MIN_KEY = 5
"""A key is matched as a prefix only when it is longer than this (the reference's ``best_match_len = 5``)."""
CONFIG_CAP = 1 << 20
"""The most bytes of a model folder's config.json read for its ``_name_or_path``."""

_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}")


def match(name: str, table: dict[str, DecodingRow] | None = None) -> str:
    """The key of the row for a model named ``name``: the exact key, else the longest key of more
    than ``PREFIX_MIN_KEY`` characters that ``name`` starts with, else ``"default"``."""
    rows = MODEL_ROWS if table is None else table
    if name in rows:
        return name
    best, best_len = DEFAULT, PREFIX_MIN_KEY
    for key in rows:
        if name.startswith(key) and len(key) > best_len:
            best, best_len = key, len(key)
    return best


def row_named(name: str) -> DecodingRow:
    """The row recorded under ``name`` (a key of ``MODEL_ROWS``, or ``"default"``)."""
    if name == DEFAULT:
        return DEFAULT_ROW
    try:
        return MODEL_ROWS[name]
    except KeyError:
        raise TaskError(f"decoding row {name!r} is not in the reference's model table; known: "
                        f"{DEFAULT}, {', '.join(MODEL_ROWS)}") from None


def _hub_cache_id(path: PurePath) -> str | None:
    """``Org/Name`` of a hub-cache snapshot folder (``models--Org--Name/snapshots/<sha>``)."""
    parts = path.parts
    for i, part in enumerate(parts):
        if part.startswith("models--") and parts[i + 1:i + 2] == ("snapshots",) and len(parts) == i + 3:
            org, sep, name = part[len("models--"):].partition("--")
            candidate = f"{org}/{name}"
            if sep and _HUB_ID.fullmatch(candidate):
                return candidate
    return None


def _folder_id(path: PurePath) -> str | None:
    """``Org/Name`` from a folder laid out as ``.../Org/Name`` (any two last parts)."""
    if len(path.parts) < 3:
        return None
    candidate = f"{path.parent.name}/{path.name}"
    return candidate if _HUB_ID.fullmatch(candidate) else None


def _path_id(path: PurePath) -> str | None:
    """A hub id a path names: its hub-cache form; else ``.../Org/Name`` where that picks a row;
    else ``.../Name`` where ``Org/Name`` picks a row for an organisation of the table (a folder
    ``/data/Qwen3-8B`` holds ``Qwen/Qwen3-8B``)."""
    named = _hub_cache_id(path)
    if named:
        return named
    folder = _folder_id(path)
    if folder and match(folder) != DEFAULT:
        return folder
    for org in dict.fromkeys(key.split("/", 1)[0] for key in MODEL_ROWS):
        candidate = f"{org}/{path.name}"
        if _HUB_ID.fullmatch(candidate) and match(candidate) != DEFAULT:
            return candidate
    return None


def read_config(model_dir: Path) -> dict[str, Any] | None:
    """config.json of a model folder, or None: only a regular file inside the folder (a link out
    of it is not followed), at most ``CONFIG_CAP`` bytes, a JSON object."""
    try:
        root = model_dir.resolve(strict=True)
        real = (model_dir / "config.json").resolve(strict=True)
        if not real.is_relative_to(root):
            return None
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None
            data = fh.read(CONFIG_CAP + 1)
    except (OSError, RuntimeError, ValueError):
        return None
    if len(data) > CONFIG_CAP:
        return None
    try:
        config = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return config if isinstance(config, dict) else None


def hub_id(model_dir: Path) -> str | None:
    """The base model's hub id from local files (see the module's docstring), or None."""
    model_dir = Path(model_dir)
    paths = [model_dir.absolute()]
    try:
        paths.append(model_dir.resolve())
    except (OSError, RuntimeError):
        pass
    for path in paths:
        named = _path_id(path)
        if named:
            return named
    config = read_config(model_dir)
    given = config.get("_name_or_path") if config else None
    if not isinstance(given, str) or not given or len(given) > 4096:
        return None
    if _HUB_ID.fullmatch(given):
        return given
    pure = PurePath(given)
    return _path_id(pure) if pure.is_absolute() else None


def model_row(model_dir: Path) -> tuple[str, DecodingRow]:
    """(row name, row) for a base model folder: ``("default", DEFAULT_ROW)`` where no row matches."""
    named = hub_id(model_dir)
    name = match(named) if named else DEFAULT
    return name, row_named(name)


def apply_row(settings: InferenceSettings, name: str, row: DecodingRow) -> InferenceSettings:
    """``settings`` decoded as the row says (the module's docstring gives the rule for each field)."""
    max_new = row.max_out_len if settings.max_new_tokens == DEFAULT_ROW.max_out_len else settings.max_new_tokens
    return dataclasses.replace(settings, temperature=row.temperature, top_p=row.top_p, top_k=row.top_k,
                               enable_thinking=True if row.enable_thinking else None, decoding_row=name,
                               max_new_tokens=max_new)


def run_settings(task: Task, prompt_profile: str | None, decoding_row: str | None) -> InferenceSettings:
    """A run's prompt profile with its recorded row applied where the profile uses the table
    (a run recorded without a row keeps the profile's own decoding)."""
    settings = task.settings_for(prompt_profile)
    if not settings.model_table or not decoding_row:
        return settings
    return apply_row(settings, decoding_row, row_named(decoding_row))


def row_engine(engine: EngineSettings, decoding_row: str | None, overrides: dict[str, Any] | None = None,
               ) -> EngineSettings:
    """The engine's ``max_model_len`` raised to the row's ``max_seq_len`` where that is larger, the
    task set one and the run did not (``--engine-option max_model_len=...`` stays as given)."""
    if not decoding_row or "max_model_len" in (overrides or {}) or engine.max_model_len is None:
        return engine
    wanted = row_named(decoding_row).max_seq_len
    return dataclasses.replace(engine, max_model_len=wanted) if wanted > engine.max_model_len else engine


def describe(settings: InferenceSettings) -> str:
    """One line on a row's decoding as applied, for ``run start`` and the agent's description."""
    if settings.temperature <= 1e-5:
        how = "greedy (temperature 0)"
    else:
        how = f"sampling at temperature {settings.temperature:g}, top_p {settings.top_p:g}, top_k {settings.top_k}"
    thinking = ", thinking on (enable_thinking=True to the chat template)" if settings.enable_thinking else ""
    return (f"row {settings.decoding_row!r} of the reference's model table (by the base model's name): {how}"
            f"{thinking}, at most {settings.max_new_tokens} new tokens")
