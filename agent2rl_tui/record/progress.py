"""How far the evaluation under way has got: ``evals/<n>/progress.json``, written by the eval worker.

Scoring a baseline can take minutes (GSM8K's 1,319 items on a CPU: nine), and until now nothing
said how far it was. The worker writes this small file as it goes (at the start, then as prompts
finish, at most twice a second); the run header, the Runs list and a foreground ``run start`` read
it. It lives in the run folder beside results.jsonl, out of the agent's reach, and is read
size-capped all the same.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from agent2rl_tui.util.timeutil import human_duration

PROGRESS_FILE = "progress.json"
MAX_BYTES = 4096
PHASES = {"start": "starting the eval worker", "load": "loading the model", "generate": "generating",
          "score": "scoring the answers", "play": "playing the games", "done": "done"}


@dataclass(frozen=True)
class EvalProgress:
    phase: str
    done: int
    total: int
    started_at: float
    """When the worker took the job (UNIX seconds)."""
    at: float
    """When this was written."""
    counting_since: float | None = None
    """When items began to be counted (generation's start), for the estimate."""

    def eta_s(self) -> float | None:
        """Seconds left at the rate so far (None before the first item is done)."""
        if self.done <= 0 or self.counting_since is None or self.done >= self.total:
            return None
        return (self.at - self.counting_since) / self.done * (self.total - self.done)

    def text(self) -> str:
        """``generating: 40 of 100 items, about 30s left``."""
        what = PHASES.get(self.phase, self.phase)
        if self.phase in ("start", "load"):
            return f"{what} ({self.total:,} items to score)" if self.total else what
        eta = self.eta_s()
        left = f", about {human_duration(eta)} left" if eta is not None else ""
        unit = "games" if self.phase == "play" else "items"
        return f"{what}: {self.done:,} of {self.total:,} {unit}{left}"


    def short(self) -> str:
        """``40/100`` (or the phase alone before items are counted), for a table cell."""
        if self.phase in ("generate", "score", "done") or self.done:
            return f"{self.done:,}/{self.total:,}"
        return PHASES.get(self.phase, self.phase)


def write_progress(out_dir: Path, progress: EvalProgress) -> None:
    """Replace the file at once (a reader never sees half of it)."""
    tmp = out_dir / (PROGRESS_FILE + ".tmp")
    tmp.write_text(json.dumps(asdict(progress)), encoding="utf-8")
    os.replace(tmp, out_dir / PROGRESS_FILE)


def write_progress_quietly(out_dir: Path, progress: EvalProgress) -> None:
    """``write_progress``, where a full disk must not stop what goes on (progress is a courtesy)."""
    try:
        write_progress(out_dir, progress)
    except OSError:
        pass


def read_progress(run_dir: Path, submission_id: int) -> EvalProgress | None:
    """The progress of submission ``submission_id``'s evaluation; None where there is none or it cannot be read."""
    path = Path(run_dir) / "evals" / str(submission_id) / PROGRESS_FILE
    try:
        with path.open("rb") as fh:
            data = json.loads(fh.read(MAX_BYTES))
        return EvalProgress(phase=str(data["phase"]), done=int(data["done"]), total=int(data["total"]),
                            started_at=float(data["started_at"]), at=float(data["at"]),
                            counting_since=None if data.get("counting_since") is None
                            else float(data["counting_since"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


class ProgressWriter:
    """The worker's side: the phase and the items done, written at most every ``every_s``."""

    def __init__(self, out_dir: Path, total: int, every_s: float = 0.5) -> None:
        self.out_dir, self.total, self.every_s = out_dir, total, every_s
        self.started_at = time.time()
        self.phase_name, self.done = "load", 0
        self.counting_since: float | None = None
        self.last_written = 0.0
        self._write()

    def phase(self, name: str) -> None:
        self.phase_name = name
        if name in ("generate", "play") and self.counting_since is None:
            self.counting_since = time.time()
        self._write()

    def advance(self, n: int = 1) -> None:
        self.done = min(self.total, self.done + n)
        if time.time() - self.last_written >= self.every_s or self.done >= self.total:
            self._write()

    def _write(self) -> None:
        self.last_written = time.time()
        write_progress_quietly(self.out_dir, EvalProgress(self.phase_name, self.done, self.total, self.started_at,
                                                          self.last_written, self.counting_since))
