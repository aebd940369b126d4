"""What one run counts for in statistics over runs: the one rule compare, campaigns and reports share.

The paper scores a run by its best of budget: the best valid submission, or the baseline when
there is none, so a run that never submitted a valid model improved by 0. Averaging only the
runs that submitted (as a mean over ``best is not None`` does) reports the survivors of a cell
where half the runs failed; here such a run counts, at 0, and the cell's valid-submission rate
stands beside its mean.

Not counted, and said why: a run still going (its number is not known yet), a run whose agent
never started (the machine failed it, not the agent: a job that died, a baseline that could not
be scored), and a run without a baseline score (nothing to measure an improvement from).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent2rl_tui.record.store import ACTIVE_STATUSES
from agent2rl_tui.review.index import RunSummary

STILL_RUNNING = "still running"
AGENT_NEVER_STARTED = "its agent never started"
NO_BASELINE = "no baseline score"


@dataclass(frozen=True)
class Outcome:
    """One run as statistics take it."""

    run_id: str
    counted: bool
    valid: bool
    """It had a scored agent submission."""
    best: float | None
    """Best of budget: the best valid submission, else the baseline (None when not counted)."""
    improvement: float | None
    """``best`` - baseline: 0 for a counted run without a valid submission (None when not counted)."""
    why_not_counted: str | None = None
    outside_mode: bool = False
    """It trained outside its training mode (counted all the same, and said)."""


def outcome(run: RunSummary) -> Outcome:
    if run.status in ACTIVE_STATUSES:
        return Outcome(run.id, False, False, None, None, STILL_RUNNING)
    if run.budget_start is None:
        return Outcome(run.id, False, False, None, None, AGENT_NEVER_STARTED)
    if run.baseline is None:
        return Outcome(run.id, False, run.best is not None, None, None, NO_BASELINE)
    outside = run.mode_kept is False
    if run.best is None:
        return Outcome(run.id, True, False, run.baseline, 0.0, outside_mode=outside)
    return Outcome(run.id, True, True, run.best, run.best - run.baseline, outside_mode=outside)


@dataclass(frozen=True)
class Tally:
    """A group's runs as statistics take them."""

    counted: list[Outcome]
    not_counted: dict[str, int]
    """How many runs were left out, by why."""

    @property
    def bests(self) -> list[float]:
        return [o.best for o in self.counted if o.best is not None]

    @property
    def improvements(self) -> list[float]:
        return [o.improvement for o in self.counted if o.improvement is not None]

    @property
    def valid(self) -> int:
        return sum(1 for o in self.counted if o.valid)

    @property
    def valid_rate(self) -> float | None:
        return self.valid / len(self.counted) if self.counted else None

    def valid_text(self) -> str:
        """"3 of 4 valid" and what was left out, for a table cell."""
        text = f"{self.valid} of {len(self.counted)} valid" if self.counted else "no run counted"
        outside = sum(1 for o in self.counted if o.outside_mode)
        if outside:
            text += f", {outside} trained outside its mode"
        left = ", ".join(f"{n} {why}" for why, n in sorted(self.not_counted.items()))
        return text + (f"; {left}, not counted" if left else "")


def tally(runs: list[RunSummary], left_out: Sequence[str] = ()) -> Tally:
    """The runs' outcomes; ``left_out``: why each of the group's runs with no run folder to read is left out."""
    outcomes = [outcome(r) for r in runs]
    not_counted: dict[str, int] = {}
    for why in left_out:
        not_counted[why] = not_counted.get(why, 0) + 1
    for o in outcomes:
        if not o.counted and o.why_not_counted:
            not_counted[o.why_not_counted] = not_counted.get(o.why_not_counted, 0) + 1
    return Tally([o for o in outcomes if o.counted], not_counted)
