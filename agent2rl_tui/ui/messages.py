"""Every message the UI's parts send each other, in one place.

Panes ask their screen to show something (a revision, a diff, a moment of the transcript),
screens ask the app to open a run, and thread workers hand what they read back to the
widget that asked: always by posting one of these, never by calling into another part or
touching widgets from a worker thread. A handler is found by type (``@on(ShowRevision)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual.message import Message

from agent2rl_tui.record.transcripts import StepRow
from agent2rl_tui.record.watch import RunWatch, Stamp
from agent2rl_tui.review.compare import Pairing
from agent2rl_tui.review.index import RunSummary
from agent2rl_tui.review.items import SubmissionItems
from agent2rl_tui.review.iterations import Diagnosis
from agent2rl_tui.review.runview import RunView
from agent2rl_tui.review.scaling import RunCurve
from agent2rl_tui.review.steplist import StepListing

# -- requests: a pane to its screen, a screen to the app -----------------------------------


@dataclass
class ShowRevision(Message):
    """Show revision ``seq`` in the Revisions pane, diffed against the one before."""

    seq: int


@dataclass
class ShowSubmissionDiff(Message):
    """Show the diff from the previous submission's revision to submission ``sub_id``'s."""

    sub_id: int


@dataclass
class ShowTranscriptAt(Message):
    """Show the transcript at time ``at``: the last step at or before it."""

    at: float


@dataclass
class OpenRun(Message):
    """Open the Run screen on the run folder ``run_dir``."""

    run_dir: Path


# -- results: a thread worker to the widget that asked ------------------------------------


@dataclass
class RunOpenFailed(Message):
    """The run folder could not be read (gone, not a run, a broken run.db)."""

    run_dir: Path
    error: str


@dataclass
class RunOpened(Message):
    """A run read off the UI thread, ready for its screen: the view and the watch on its record
    (made before the view was read, so a write after the read is seen as a change)."""

    view: RunView
    watch: RunWatch


@dataclass
class RunsLoaded(Message):
    """Summaries of the runs under the root, with the stamps their run.db had when read."""

    runs: list[RunSummary]
    stamps: dict[Path, Stamp]
    complete: bool = True


@dataclass
class ViewLoaded(Message):
    """The run view as it is now in run.db."""

    view: RunView


@dataclass
class RunStopped(Message):
    """A stop (or the closing of a lost run's record) was done: the run is now ``status``."""

    run_dir: Path
    status: str


@dataclass
class RunStarted(Message):
    """A new run was created and its supervisor started."""

    run_dir: Path


@dataclass
class RunStartFailed(Message):
    """Pre-flight or the start failed; nothing was created."""

    reason: str


@dataclass
class StepsCounted(Message):
    """A transcript listing (filter, search, count, totals) read for request ``generation``."""

    generation: int
    listing: StepListing


@dataclass
class StepsPage(Message):
    """Page ``page`` of the transcript listing of request ``generation``."""

    generation: int
    page: int
    rows: list[StepRow]


@dataclass
class ItemsLoaded(Message):
    """A submission's per-item results and those it is compared with."""

    items: SubmissionItems


@dataclass
class DiffReady(Message):
    """The diff between two revisions, ``key`` being (old seq, new seq)."""

    text: str
    title: str
    key: tuple[int | None, int]


@dataclass
class IterationsBuilt(Message):
    """The run's iterations and route; ``start``: the budget's start (iteration times count from it)."""

    diagnosis: Diagnosis
    start: float


@dataclass
class ReportBuilt(Message):
    """The report of the run, as Markdown."""

    text: str


@dataclass
class PairsRead(Message):
    """The best submissions of runs graded on the same items, paired (the Compare screen)."""

    pairing: Pairing


@dataclass
class ScalingRead(Message):
    """Each group's runs as curves of best improvement (the Compare screen's plot)."""

    curves: dict[str, list[RunCurve]]


@dataclass
class CompareReadFailed(Message):
    """A Compare screen's read that failed: what it was (``what``) and why."""

    what: str
    error: str
