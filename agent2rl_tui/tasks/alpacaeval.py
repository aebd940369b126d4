"""Preparing AlpacaEval 2.0's data: the reference outputs, the agent's Alpaca rows, the LC model's data.

Three pieces, each from local files (``--from``, files or folders, recognised by content)
or else from the hub:

- eval: the 805 instructions with the reference outputs of gpt-4-1106-preview
  (``tatsu-lab/alpaca_eval``'s ``alpaca_eval_gpt4_baseline.json``; rows with ``instruction``,
  ``output``, ``generator``);
- train: the first 2,000 rows of ``tatsu-lab/alpaca`` (``instruction``, ``input``, ``output``),
  given ``question``/``answer`` as AutoRL-Bench does;
- ``df_gamed.csv`` (``tatsu-lab/alpaca_eval``), which alpaca-eval's length-controlled GLM
  fits on. It goes into a hub-cache folder (``<cache>/hub``) where the package finds it
  offline. Optional: without it the score is the plain win rate, and source.json says so.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from agent2rl_tui.tasks.registry import Task, TaskError, task_cache, write_jsonl
from agent2rl_tui.util.timeutil import iso, now

LC_REPO = "tatsu-lab/alpaca_eval"
LC_FILE = "df_gamed.csv"
HUB_FOLDER = "datasets--tatsu-lab--alpaca_eval"
ROW_SUFFIXES = (".json", ".jsonl", ".gz", ".parquet")


def train_row(row: dict[str, Any]) -> dict[str, str]:
    """An Alpaca row as the agent gets it (AutoRL-Bench's ``_convert_row``)."""
    instruction, extra, output = str(row.get("instruction", "")), str(row.get("input") or ""), str(row.get("output", ""))
    question = instruction if not extra else f"{instruction}\n\n{extra}"
    return {"instruction": instruction, "input": extra, "output": output, "question": question, "answer": output}


def eval_row(row: dict[str, Any]) -> dict[str, str]:
    return {"instruction": str(row["instruction"]), "output": str(row["output"]),
            "generator": str(row.get("generator", "")), "dataset": str(row.get("dataset", ""))}


def _files(sources: list[Path]) -> list[Path]:
    found: list[Path] = []
    for source in sources:
        if source.is_dir():
            found += sorted(p for p in source.rglob("*") if p.is_file())
        elif source.is_file():
            found.append(source)
        else:
            raise TaskError(f"--from {source}: no such file or folder")
    return found


def _classify(files: list[Path]) -> dict[str, Any]:
    """Local pieces by content: reference outputs have a generator, Alpaca rows an input field."""
    from agent2rl_tui.tasks.data import read_rows

    pieces: dict[str, Any] = {}
    for path in files:
        if path.name == LC_FILE:
            pieces["lc"] = path
            continue
        if not path.name.endswith(ROW_SUFFIXES):
            continue
        try:
            rows = read_rows(path)
        except (OSError, ValueError, TaskError):
            continue
        first = rows[0] if rows and isinstance(rows[0], dict) else {}
        if {"instruction", "output", "generator"} <= set(first):
            pieces.setdefault("eval", (rows, path))
        elif {"instruction", "output"} <= set(first):
            pieces.setdefault("train", (rows, path))
    return pieces


def _hub_eval(task: Task) -> tuple[list[dict[str, Any]], str]:
    from huggingface_hub import hf_hub_download

    repo, name = task.data["eval_hf_id"], task.data["eval_hf_file"]
    try:
        path = hf_hub_download(repo_id=repo, filename=name, repo_type="dataset")
    except Exception as exc:  # noqa: BLE001 - offline, moved file, ...: say what to do instead
        raise TaskError(f"could not fetch {name} from the hub ({repo}: {type(exc).__name__}: {exc}); offline, "
                        "give the reference outputs with --from FILE (a JSON list of instruction, output, "
                        "generator rows, e.g. alpaca_eval's gpt4_1106_preview model_outputs.json)") from exc
    return json.loads(Path(path).read_text(encoding="utf-8")), f"huggingface hub: {repo}/{name}"


def _hub_train(task: Task, n: int) -> tuple[list[dict[str, Any]], str]:
    repo = task.data["train_hf_id"]
    try:
        from datasets import load_dataset

        rows = load_dataset(repo, split=f"train[:{n}]").to_list()
    except Exception as exc:  # noqa: BLE001
        raise TaskError(f"could not load {repo} from the hub ({type(exc).__name__}: {exc}); offline, give the "
                        "agent's rows with --from FILE (Alpaca's instruction/input/output JSON or JSONL)") from exc
    return rows, f"huggingface hub: {repo} (first {n})"


def install_lc_file(source: Path, hub_cache: Path) -> Path:
    """Put a local ``df_gamed.csv`` where ``hf_hub_download`` finds it offline (the hub cache layout:
    ``snapshots/<revision>/FILE`` and ``refs/main`` naming the revision)."""
    revision = hashlib.sha1(source.read_bytes()).hexdigest()
    folder = hub_cache / HUB_FOLDER
    snapshot = folder / "snapshots" / revision
    snapshot.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, snapshot / LC_FILE)
    (folder / "refs").mkdir(exist_ok=True)
    (folder / "refs" / "main").write_text(revision, encoding="utf-8")
    return snapshot / LC_FILE


def _lc(hub_cache: Path, local: Path | None) -> str:
    if local is not None:
        install_lc_file(local, hub_cache)
        return str(local.resolve())
    try:
        from huggingface_hub import hf_hub_download

        hf_hub_download(repo_id=LC_REPO, filename=LC_FILE, repo_type="dataset", cache_dir=str(hub_cache))
    except Exception as exc:  # noqa: BLE001 - optional: the win rate stands without it
        return (f"unavailable ({type(exc).__name__}); scores will be the plain win rate. Give {LC_FILE} with "
                f"--from, or prepare where the hub is reachable")
    return f"huggingface hub: {LC_REPO}/{LC_FILE}"


def prepare_alpacaeval(task: Task, sources: list[Path]) -> dict[str, Any]:
    pieces = _classify(_files(sources))
    n = int(task.data.get("train_rows", 2000))
    if "eval" in pieces:
        raw_eval, eval_origin = pieces["eval"][0], str(pieces["eval"][1].resolve())
    else:
        raw_eval, eval_origin = _hub_eval(task)
    if "train" in pieces:
        raw_train, train_origin = pieces["train"][0][:n], str(pieces["train"][1].resolve())
    else:
        raw_train, train_origin = _hub_train(task, n)
    evals = [eval_row(r) for r in raw_eval]
    train = [train_row(r) for r in raw_train]
    out = task_cache(task)
    out.mkdir(parents=True, exist_ok=True)
    lc_origin = _lc(out / "hub", pieces.get("lc"))
    write_jsonl(out / "train.jsonl", train)
    write_jsonl(out / "eval.jsonl", evals)
    meta = {"task": task.name, "source": eval_origin, "train_source": train_origin, "lc_source": lc_origin,
            "prepared_at": iso(now()), "train": len(train), "eval": len(evals),
            "generators": sorted({r["generator"] for r in evals})}
    (out / "source.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return meta
