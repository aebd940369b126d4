"""Preparing WebShop: the sessions each side plays, and where the store is.

WebShop's goals are numbered sessions of its own data; the grader plays sessions 0-99 (as
AutoRL-Bench) and the agent gets the next ones to practise on. ``--from DIR`` names the
user's WebShop checkout (``web_agent_site/`` and its ``data/``), recorded in source.json
for the grader's in-process store; without it a run needs ``--webshop-url`` (a running
WebShop server).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent2rl_tui.tasks.registry import Task, TaskError, task_cache, write_jsonl
from agent2rl_tui.util.timeutil import iso, now


def prepare_webshop(task: Task, sources: list[Path]) -> dict[str, Any]:
    if len(sources) > 1:
        raise TaskError("webshop is prepared from one --from folder: the WebShop checkout")
    repo = None
    if sources:
        repo = sources[0].expanduser().resolve()
        if not (repo / "web_agent_site").is_dir():
            raise TaskError(f"--from {repo}: no web_agent_site/ in it; give the WebShop repository's folder "
                            "(git clone https://github.com/princeton-nlp/WebShop; ./setup.sh -d small)")
        if not any((repo / "data").glob("items_*.json")):
            raise TaskError(f"--from {repo}: its data/ holds no items_*.json; run WebShop's setup.sh -d small first")
    n_eval, n_train = int(task.data.get("eval_sessions", 100)), int(task.data.get("train_sessions", 1000))
    evals = [{"game": f"session:{i}"} for i in range(n_eval)]
    train = [{"game": f"session:{i}"} for i in range(n_eval, n_eval + n_train)]
    out = task_cache(task)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "train.jsonl", train)
    write_jsonl(out / "eval.jsonl", evals)
    meta = {"task": task.name, "source": str(repo) if repo else "sessions only: runs need --webshop-url URL",
            "webshop_dir": str(repo) if repo else None, "prepared_at": iso(now()), "train": len(train),
            "eval": len(evals)}
    (out / "source.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return meta
