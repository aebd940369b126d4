"""What one run's grader is set up with: the run's settings from run.db, the command line
and the secret from the environment, read in one place."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent2rl_tui.grader.launch import SECRET_ENV
from agent2rl_tui.record.store import RunStore

DESCRIPTION = "The grader service: DESIGN.md's HTTP API on 127.0.0.1, one evaluation at a time."
DEFAULT_EVAL_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class GraderConfig:
    run_dir: Path
    workspace: Path
    task_folder: Path
    base_model_dir: Path
    eval_timeout_s: float
    eval_limit: int | None = None
    engine: dict[str, Any] = field(default_factory=dict)
    """The run's engine settings over the task's (``run start --engine``, ``--engine-option``)."""
    prompt_profile: str | None = None
    """The task's prompt profile for this run (``run start --prompt-profile``); None: the task's default."""
    judge: dict[str, Any] | None = None
    """The judge of a judge-graded task (``run start --judge-url`` ...): URL, model, key variable, mode."""
    seed: int = 0
    search: dict[str, Any] | None = None
    """A searching task's backend (``run start --search-url`` / ``--search-corpus``)."""
    store: dict[str, Any] | None = None
    """A shopping task's store (``run start --webshop-url``)."""

    @classmethod
    def from_run(cls, run_dir: Path) -> GraderConfig:
        with RunStore.of_run(run_dir) as store:
            run = store.run()
        cfg = json.loads(run["config_json"])
        workspace = (run_dir / "workspace").resolve()
        return cls(
            run_dir=run_dir.resolve(),
            workspace=workspace,
            task_folder=Path(cfg["task_folder"]),
            base_model_dir=workspace / "models" / run["base_model"],
            eval_timeout_s=float(cfg.get("eval_timeout_s", DEFAULT_EVAL_TIMEOUT_S)),
            eval_limit=cfg.get("eval_limit"),
            engine=dict(cfg.get("engine") or {}),
            prompt_profile=cfg.get("prompt_profile"),
            judge=cfg.get("judge"),
            search=cfg.get("search"),
            store=cfg.get("store"),
            seed=int(run["seed"] or 0),
        )


def build_parser() -> argparse.ArgumentParser:
    """``--run-dir DIR`` and where to listen: an inherited socket or a port."""
    parser = argparse.ArgumentParser(prog="python -m agent2rl_tui.grader.server", description=DESCRIPTION)
    parser.add_argument("--run-dir", type=Path, required=True)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--fd", type=int, help="an inherited listening socket")
    where.add_argument("--port", type=int, help="bind 127.0.0.1:PORT (0 picks a free one)")
    return parser


def secret_from_env() -> str | None:
    """The run's secret path prefix (spawn_grader puts it in the environment, not on argv)."""
    return os.environ.get(SECRET_ENV) or None
