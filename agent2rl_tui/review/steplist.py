"""The transcript as a reader lists it: a filtered, searched listing of steps, read by pages.

A front end shows a transcript of any length a page at a time and must not block while it
reads. These calls each open their own connection, so they can run in any thread (a
worker per read): ``list_steps`` answers what a filter or search selects (how many rows,
the matching steps, the totals, and where a moment in the run falls in that listing), and
``read_page`` the rows of one page of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent2rl_tui.record.store import RunStore
from agent2rl_tui.record.transcripts import (
    StepRow,
    count_steps,
    page_steps,
    position_of,
    search_steps,
    step_near,
    steps_by_seq,
    transcript_totals,
)
from agent2rl_tui.review.run_usage import RunUsage, run_usage

Kinds = tuple[str, ...] | None


@dataclass(frozen=True)
class StepListing:
    """What one filter (kinds) and search (query) select from the transcript."""

    kinds: Kinds
    query: str
    count: int  # rows in the listing
    search: list[int] | None  # the matching seqs, in order, while a search is active
    totals: dict[str, Any]  # transcript_totals of the whole transcript
    near: float | None = None  # the time asked for, if any
    row: int | None = None  # the row of the last step at or before ``near``, if any
    usage: RunUsage | None = None  # the run's tokens and cost (``review.run_usage``: metered, else the transcript's)


def list_steps(run_dir: Path, kinds: Kinds = None, query: str = "", near: float | None = None) -> StepListing:
    """The listing for ``kinds`` and ``query``; with ``near``, also the row of the last step
    at or before that time (what the agent was doing then)."""
    kinds = kinds or None
    with RunStore.of_run(run_dir) as store:
        search = search_steps(store, query, kinds, limit=1_000_000) if query.strip() else None
        count = len(search) if search is not None else count_steps(store, kinds)
        row = _row_near(store, near, kinds, search) if near is not None else None
        totals = transcript_totals(store)
        return StepListing(kinds, query, count, search, totals, near, row, run_usage(store, totals))


def _row_near(store: RunStore, at: float, kinds: Kinds, search: list[int] | None) -> int | None:
    seq = step_near(store, at)
    if seq is None:
        return None
    if search is not None:
        return next((i for i, s in enumerate(search) if s >= seq), max(0, len(search) - 1))
    return position_of(store, seq, kinds)


def read_page(run_dir: Path, page: int, size: int, kinds: Kinds = None,
              search: list[int] | None = None) -> list[StepRow]:
    """Rows ``page * size`` .. ``(page + 1) * size`` of a listing (its search results, if any)."""
    with RunStore.of_run(run_dir) as store:
        if search is not None:
            return steps_by_seq(store, search[page * size:(page + 1) * size])
        return page_steps(store, page * size, size, kinds or None)
