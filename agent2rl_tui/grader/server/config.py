"""What one run's grader is set up with: the run's settings from run.db, the command line
and the secret from the environment, read in one place."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent2rl_tui.grader.launch import SECRET_ENV
from agent2rl_tui.record.runconfig import DEFAULT_MAX_QUEUED, GIB
from agent2rl_tui.record.store import AFTER_KIND, RunStore

DESCRIPTION = "The grader service: one run's HTTP API on 127.0.0.1, one evaluation at a time."


def folder_bytes(folder: Path) -> int:
    """Bytes of the regular files directly in a folder (a model folder of ours)."""
    try:
        return sum(e.stat(follow_symlinks=False).st_size for e in os.scandir(folder) if e.is_file(follow_symlinks=False))
    except OSError:
        return 0


def default_limits(base_bytes: int) -> tuple[int, int]:
    """(the largest submission taken, the eval worker's memory limit) for a base model of this size.

    A submission may be up to four times the base model and a GiB (a float32 save of a bf16
    model, added tokens); the worker may hold six times it and at least 8 GiB (weights in
    float32, activations, the KV cache; vLLM's processes with CUDA hold a few GiB of host memory
    each), never more than half the machine's memory. The limit is there to stop a model that
    eats the machine, not to be tight.
    """
    import psutil

    memory = min(max(8 * GIB, 6 * base_bytes), psutil.virtual_memory().total // 2)
    return 4 * base_bytes + GIB, memory


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
    decoding_row: str | None = None
    """The base model's row of the reference's model table (``tasks.decoding``), decided when the
    run was made; it sets the decoding where the profile uses the table. None: the profile's own."""
    judge: dict[str, Any] | None = None
    """The judge of a judge-graded task (``run start --judge-url`` ...): URL, model, key variable, mode."""
    search: dict[str, Any] | None = None
    """A searching task's backend (``run start --search-url`` / ``--search-corpus``)."""
    store: dict[str, Any] | None = None
    """A shopping task's store (``run start --webshop-url``)."""
    keep_submissions: bool = False
    """Keep the grader's copy of each submission after scoring (``run start --keep-submissions``)."""
    max_submission_bytes: int = 4 * GIB
    """The largest submission the intake takes (all the files an engine loads)."""
    eval_memory_bytes: int | None = None
    """The eval worker's memory limit (all its processes, resident; ``run start --eval-memory``)."""
    max_queued: int = DEFAULT_MAX_QUEUED
    """Submissions that may wait to be evaluated at once; more are refused (429) until they are scored."""
    eval_seed: int | None = None
    """The seed of the run's eval draw (``tasks.eval_settings.EVAL_SEED_KEY``), from the record only."""
    scripted_worker: dict[str, Any] | None = None
    """Evaluations answered by a script, not a model (``grader.scripted_worker``; the run's config only)."""
    after_the_run: bool = False
    """A grader a person starts on an ended run (``run grade``): no deadline, and what it grades is
    recorded as graded after the run (kind ``after``), outside its budget and its best."""

    @property
    def submission_kind(self) -> str:
        return AFTER_KIND if self.after_the_run else "agent"

    @classmethod
    def from_run(cls, run_dir: Path, *, after_the_run: bool = False) -> GraderConfig:
        with RunStore.of_run(run_dir) as store:
            run = store.run()
        cfg = run.config
        workspace = (run_dir / "workspace").resolve()
        base_dir = workspace / "models" / run.base_model
        max_bytes, memory = default_limits(folder_bytes(base_dir))
        return cls(
            run_dir=run_dir.resolve(),
            workspace=workspace,
            task_folder=Path(cfg.task_folder),
            base_model_dir=base_dir,
            eval_timeout_s=float(cfg.eval_timeout_s),
            eval_limit=cfg.eval_limit,
            engine=dict(cfg.engine),
            prompt_profile=cfg.prompt_profile,
            decoding_row=cfg.decoding_row,
            judge=cfg.judge,
            search=cfg.search,
            store=cfg.webshop,
            keep_submissions=cfg.keep_submissions,
            max_submission_bytes=cfg.max_submission_bytes or max_bytes,
            eval_memory_bytes=cfg.eval_memory_bytes or memory,
            max_queued=cfg.queue_limit,
            eval_seed=cfg.eval_seed,
            scripted_worker=cfg.scripted_worker,
            after_the_run=after_the_run,
        )


def build_parser() -> argparse.ArgumentParser:
    """``--run-dir DIR`` and where to listen: an inherited socket or a port."""
    parser = argparse.ArgumentParser(prog="python -m agent2rl_tui.grader.server", description=DESCRIPTION)
    parser.add_argument("--run-dir", type=Path, required=True)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--fd", type=int, help="an inherited listening socket")
    where.add_argument("--port", type=int, help="bind 127.0.0.1:PORT (0 picks a free one)")
    parser.add_argument("--after-the-run", action="store_true",
                        help="grade checkpoints of an ended run, recorded as graded after it (agent2rl-tui run grade)")
    return parser


def secret_from_env() -> str | None:
    """The run's secret path prefix (spawn_grader puts it in the environment, not on argv)."""
    return os.environ.get(SECRET_ENV) or None
