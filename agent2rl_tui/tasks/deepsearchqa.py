"""Preparing DeepSearchQA: the 900 questions, split as AutoRL-Bench splits them.

``google/deepsearchqa`` (its one split, ``eval``; a CSV on the hub) or ``--from FILE`` (CSV,
JSON or JSONL with ``problem``, ``answer`` and ``answer_type``), shuffled with
``datasets``' ``shuffle(seed=42)``: the first 100 for the agent, the next 200 for the grader,
the rest unused. Each row gets its game id (``train:i`` / ``eval:i``), which the search
environment plays.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from agent2rl_tui.tasks.registry import Task, TaskError, task_cache, write_jsonl
from agent2rl_tui.util.timeutil import iso, now

FIELDS = ("problem", "answer")


def read_questions(path: Path) -> list[dict[str, Any]]:
    if path.is_dir():
        found = sorted(p for p in path.rglob("*") if p.suffix in (".csv", ".jsonl", ".json", ".parquet"))
        if not found:
            raise TaskError(f"--from {path}: no .csv/.json/.jsonl/.parquet file in it")
        path = found[0]
    if not path.is_file():
        raise TaskError(f"--from {path}: no such file or folder")
    if path.suffix == ".csv":
        with path.open(encoding="utf-8", newline="") as fh:
            return list(csv.DictReader(fh))
    from agent2rl_tui.tasks.data import read_rows

    return read_rows(path)


def split(rows: list[dict[str, Any]], seed: int, n_train: int, n_eval: int) -> tuple[list[dict], list[dict]]:
    """``datasets``' own shuffle (as the reference calls it), then train and eval slices."""
    from datasets import Dataset

    shuffled = Dataset.from_list(rows).shuffle(seed=seed).to_list()
    return shuffled[:n_train], shuffled[n_train:n_train + n_eval]


def prepare_deepsearchqa(task: Task, sources: list[Path]) -> dict[str, Any]:
    if len(sources) > 1:
        raise TaskError("deepsearchqa is prepared from one --from file")
    if sources:
        rows, origin = read_questions(sources[0]), str(sources[0].resolve())
    else:
        hub_id = task.data["hf_id"]
        try:
            from datasets import load_dataset

            rows = load_dataset(hub_id, split=task.data.get("hf_split", "eval")).to_list()
        except Exception as exc:  # noqa: BLE001
            raise TaskError(f"could not load {hub_id} from the hub ({type(exc).__name__}: {exc}); offline, give "
                            "the questions with --from FILE (the DeepSearchQA CSV)") from exc
        origin = f"huggingface hub: {hub_id}"
    missing = [f for f in FIELDS if rows and f not in rows[0]]
    if not rows or missing:
        raise TaskError(f"{origin}: rows need the fields {list(FIELDS)} (and answer_type); missing {missing}")
    rows = [{k: ("" if v is None else v) for k, v in r.items()} for r in rows]
    train, evals = split(rows, int(task.data.get("split_seed", 42)), int(task.data.get("train_rows", 100)),
                         int(task.data.get("eval_rows", 200)))
    for prefix, part in (("train", train), ("eval", evals)):
        for i, row in enumerate(part):
            row["game"] = f"{prefix}:{i}"
            row.setdefault("answer_type", "Single Answer")
    out = task_cache(task)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "train.jsonl", train)
    write_jsonl(out / "eval.jsonl", evals)
    meta = {"task": task.name, "source": origin, "prepared_at": iso(now()), "train": len(train),
            "eval": len(evals), "total": len(rows), "split_seed": int(task.data.get("split_seed", 42))}
    (out / "source.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return meta
