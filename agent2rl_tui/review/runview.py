"""What a viewer of one run needs, read from its folder: Textual-free, so tests need no UI.

The TUI's Run screen is a view over this: the run row and its effective status, the budget
as of a clock, the submissions (baseline first) and revisions, and the per-item comparison
of two evaluations (which items a submission solved or broke against another). Live and
finished runs, here or copied to a laptop, are read the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent2rl_tui.record.progress import EvalProgress, read_progress
from agent2rl_tui.record.results import ItemRow
from agent2rl_tui.record.revisions import Revision, list_revisions
from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.store import (
    ACTIVE_STATUSES,
    RunStore,
    Submission,
    SubStatus,
    best_of,
    decoding_row_of,
    previous_scored,
    prompt_profile_of,
    scored_score,
)
from agent2rl_tui.review.index import budget_end, effective_status


@dataclass(frozen=True)
class Budget:
    started: bool
    live: bool
    elapsed_s: float
    remaining_s: float
    fraction: float
    scoring_s: float
    total_s: float


@dataclass
class RunView:
    path: Path
    run: RunRecord
    status: str
    baseline: Submission | None
    submissions: list[Submission]  # agent submissions, in order
    revisions: list[Revision]
    progress: tuple[int, EvalProgress] | None = None
    """The evaluation under way (its submission's id) and how far it has got, for a live run."""

    @property
    def live(self) -> bool:
        return self.status in ACTIVE_STATUSES

    @property
    def best(self) -> Submission | None:
        return best_of(self.submissions)

    @property
    def baseline_score(self) -> float | None:
        return scored_score(self.baseline)

    @property
    def prompt_profile(self) -> str | None:
        """How the grader prompted and read answers (``store.prompt_profile_of``)."""
        return prompt_profile_of(self.run.config, self.baseline, *self.submissions)

    @property
    def decoding_row(self) -> str | None:
        """The model-table row that set the decoding, if the profile uses one (``store.decoding_row_of``)."""
        return decoding_row_of(self.run.config, self.baseline, *self.submissions)

    def budget(self, t: float) -> Budget:
        run = self.run
        start = run.budget_start
        total = float(run.budget_s)
        scoring = sum(s.eval_seconds or 0.0 for s in self.submissions)
        if start is None:
            return Budget(False, self.live, 0.0, total, 0.0, scoring, total)
        end = budget_end(start, run.agent_ended_at, run.ended_at, run.heartbeat_at, live=self.live)
        elapsed = max(0.0, min(t - start, total) if end is None else end - start)
        return Budget(True, self.live and end is None, elapsed, max(0.0, total - elapsed),
                      min(1.0, elapsed / total) if total else 1.0, scoring, total)

    def submission(self, sub_id: int) -> Submission | None:
        if self.baseline is not None and sub_id == self.baseline.id:
            return self.baseline
        return next((s for s in self.submissions if s.id == sub_id), None)

    def previous_scored(self, sub_id: int) -> Submission | None:
        """The last scored agent submission before ``sub_id``."""
        return previous_scored(self.submissions, sub_id)


def load_run_view(run_dir: Path) -> RunView:
    with RunStore.of_run(run_dir) as store:
        run = store.run()
        baseline = store.baseline()
        subs = store.submissions(kind="agent")
    status = effective_status(run)
    evaluating = next((s.id for s in ([baseline] if baseline else []) + subs if s.status == SubStatus.EVALUATING), None)
    found = read_progress(run_dir, evaluating) if evaluating is not None and status in ACTIVE_STATUSES else None
    return RunView(path=run_dir, run=run, status=status, baseline=baseline, submissions=subs,
                   revisions=list_revisions(run_dir), progress=(evaluating, found) if found and evaluating is not None
                   else None)


def read_rows(run_dir: Path, sub_id: int) -> list[ItemRow]:
    """Per-item results of an evaluation (evals/<n>/results.jsonl), typed; [] if there are none. A
    line that is not an item's outcome (not JSON, not an object, a field mistyped:
    ``ItemRow.from_dict``) is skipped."""
    path = Path(run_dir) / "evals" / str(sub_id) / "results.jsonl"
    if not path.exists():
        return []
    out = []
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.strip() and (row := ItemRow.parse(line)) is not None:
                out.append(row)
    return out


@dataclass(frozen=True)
class ItemComparison:
    """How one evaluation's items compare with another's, item by item."""

    solved: list[ItemRow]  # correct now, wrong in the other
    broken: list[ItemRow]  # wrong now, correct in the other
    kept: int              # correct in both
    still_wrong: int       # wrong in both


def compare_items(current: list[ItemRow], other: list[ItemRow]) -> ItemComparison:
    """Item by item, paired by index."""
    by_index = {row.index: row for row in other}
    solved, broken, kept, still_wrong = [], [], 0, 0
    for row in current:
        before = by_index.get(row.index)
        was = bool(before and before.correct)
        now_ok = row.correct
        if now_ok and not was:
            solved.append(row)
        elif was and not now_ok:
            broken.append(row)
        elif now_ok:
            kept += 1
        else:
            still_wrong += 1
    return ItemComparison(solved, broken, kept, still_wrong)
