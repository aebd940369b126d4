"""One submission's per-item results together with those it is compared with, read at once.

Scores shows what a submission solved or broke against the previous scored submission and
the baseline; Items browses them all. Both need the same three files, so a reader (a
thread worker) reads them in one call and hands the screen data, never file handles.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent2rl_tui.record.results import ItemRow
from agent2rl_tui.record.store import Submission, SubStatus
from agent2rl_tui.review.runview import RunView, read_rows
from agent2rl_tui.review.significance import Comparison, compare


@dataclass(frozen=True)
class OtherItems:
    """The items of an evaluation a submission is compared with."""

    sub_id: int
    items: list[ItemRow]


@dataclass(frozen=True)
class SubmissionItems:
    """Submission ``sub_id``'s items; for an agent submission, also the previous scored
    submission's and the baseline's (None where there is none)."""

    sub_id: int
    items: list[ItemRow]
    previous: OtherItems | None
    baseline: OtherItems | None
    vs_previous: Comparison | None = None
    vs_baseline: Comparison | None = None


def read_submission_items(view: RunView, sub: Submission) -> SubmissionItems:
    """The items, and how they compare (``significance``) with the previous scored submission's and the baseline's."""
    agent = sub.kind == "agent"
    prev = view.previous_scored(sub.id) if agent else None
    base = view.baseline if agent else None
    items = read_rows(view.path, sub.id)
    previous = OtherItems(prev.id, read_rows(view.path, prev.id)) if prev is not None else None
    baseline = OtherItems(base.id, read_rows(view.path, base.id)) if base is not None else None
    return SubmissionItems(
        sub_id=sub.id, items=items, previous=previous, baseline=baseline,
        vs_previous=significance(items, previous.items) if previous and items else None,
        vs_baseline=significance(items, baseline.items) if baseline and items else None,
    )


def item_value(item: ItemRow) -> float | None:
    """What an item adds to its score: a judged preference as the model's win (0 to 1, a tie
    0.5; None where the judge failed), else correct or not. Episode tasks count games won (a
    WebShop game at reward >= 0.5), so their items are binary too."""
    if item.judged:
        pref = item.preference
        return float(pref) - 1.0 if isinstance(pref, int | float) else None
    return 1.0 if item.correct else 0.0


def significance(items: list[ItemRow], other: list[ItemRow]) -> Comparison | None:
    """``items`` against ``other`` (the baseline's, the previous best's) on the items both
    scored, paired by index: correct or not by the exact McNemar test, judged preferences by a
    paired bootstrap. None without a common item."""
    before = {item.index: item_value(item) for item in other}
    values = [(before[item.index], item_value(item)) for item in items if item.index in before]
    pairs = [(b, a) for b, a in values if b is not None and a is not None]
    if not pairs:
        return None
    graded = any(item.judged for item in items)
    return compare([b for b, _ in pairs], [a for _, a in pairs], binary=not graded, draws=REPORT_DRAWS)


REPORT_DRAWS = 2_000
"""Bootstrap draws for a run's comparisons: enough for a 95% interval to a point, and quick
(the report compares every submission twice while the run's end waits for it)."""


def baseline_labels(view: RunView) -> dict[int, str]:
    """Each scored agent submission's label against the baseline (better, worse, within noise)."""
    base = view.baseline
    if base is None or base.status != SubStatus.SCORED:
        return {}
    base_items = read_rows(view.path, base.id)
    labels = {}
    for sub in view.submissions:
        if sub.status == SubStatus.SCORED and (c := significance(read_rows(view.path, sub.id), base_items)) is not None:
            labels[sub.id] = c.label
    return labels
