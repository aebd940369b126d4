"""Iterations: the run as attempts, each with what it trained, how, what changed and what failed.

The route of the whole run heads the pane ("SFT → GRPO (online, 3 iterations)"); the table
has one row per iteration (``review.iterations``: one per submission, and one for work after
the last submission that never reached the grader); the highlighted one's findings are shown
beside it with the file and line of each. Keys jump to its revision, the diff since the
previous submission and the transcript where it ended. The diagnosis reads the code of every
submission's revision and the whole transcript, so it is built in a thread worker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static

from agent2rl_tui.review.items import baseline_labels
from agent2rl_tui.review.iterations import Diagnosis, Iteration, build_iterations
from agent2rl_tui.review.runview import RunView
from agent2rl_tui.ui.format import fmt_score, literal, literal_line
from agent2rl_tui.ui.messages import IterationsBuilt, ShowRevision, ShowSubmissionDiff, ShowTranscriptAt
from agent2rl_tui.ui.widgets.virtual_table import Column, VirtualTable
from agent2rl_tui.util.timeutil import human_duration

COLUMNS = [Column("#", 4, right=True), Column("sub", 5, right=True), Column("status", 8), Column("score", 7, right=True),
           Column("Δ base", 7, right=True), Column("training", 18), Column("failure", 22),
           Column("train", 8, right=True), Column("eval", 8, right=True), Column("idle", 8, right=True)]


def _secs(x: float | None) -> str:
    return "-" if x is None else human_duration(x)


def iteration_cells(it: Iteration) -> list[str | Text]:
    status = Text(it.status, style="green" if it.status == "success" else "red")
    return [str(it.iteration), str(it.submission_id) if it.submission_id is not None else "-", status,
            fmt_score(it.score), fmt_score(it.improvement, signed=True),
            it.train_type + (" (online)" if it.online else ""), it.failure_type or "-",
            _secs(it.time.get("training_s")), _secs(it.time.get("evaluating_s")), _secs(it.time.get("idle_s"))]


def iteration_text(it: Iteration) -> Text:
    """The highlighted iteration's findings, every piece of the agent's text inert."""
    def where(e: Any) -> str:
        return f"{e.path}:{e.line}" if getattr(e, "line", 0) else str(e.path)

    sub = f"submission {it.submission_id}" if it.submission_id is not None else "no submission"
    lines = [Text(f"iteration {it.iteration}: {sub}, {it.train_type}, {it.status}"
                  + (f", {it.significance} vs the baseline" if it.significance else ""), style="bold")]
    lines.append(Text(f"{_secs(it.duration_s)} long; " + ", ".join(
        f"{k.removesuffix('_s')} {_secs(v)}" for k, v in it.time.items())))
    for ev in it.train_evidence[:3]:
        lines.append(literal_line(f"  trains: {where(ev)}  {ev.text}"))
    for ev in it.online_evidence[:2] if it.online else []:
        lines.append(literal_line(f"  online: {where(ev)}  {ev.text}"))
    if it.key_config:
        lines.append(Text("key configuration", style="bold"))
        lines += [literal_line(f"  {k} = {s.value}   ({where(s)})") for k, s in it.key_config.items()]
    lines.append(literal_line(f"changed: {it.changes.summary}"))
    if it.key_code:
        lines.append(Text("key code", style="bold"))
        lines += [literal_line(f"  {where(c)}  {c.text}") for c in it.key_code]
    if it.failure_type:
        lines.append(Text(f"failure: {it.failure_type}", style="bold red"))
    lines += [literal_line(f"  {p}", style="red") for p in it.problems]
    if it.commands:
        lines.append(Text("commands", style="bold"))
        lines += [literal_line(f"  $ {c}", style="dim") for c in it.commands[-5:]]
    if it.agent_summary:
        lines.append(Text("the agent's own summary.md about it (its words)", style="bold"))
        lines.append(literal(it.agent_summary, style="italic"))
    return Text("\n").join(lines)


class IterationsPane(Vertical):
    BINDINGS = [
        Binding("r", "revision", "Its revision", id="it-revision"),
        Binding("d", "diff", "Diff since previous", id="it-diff"),
        Binding("t", "transcript", "Transcript there", id="it-transcript"),
    ]

    def __init__(self, run_dir: Path) -> None:
        super().__init__(id="iterations-pane")
        self.run_dir = run_dir
        self.iterations: list[Iteration] = []
        self.ends: list[float] = []

    def compose(self) -> ComposeResult:
        yield Static("diagnosing the run…", id="route")
        with Horizontal():
            yield VirtualTable(COLUMNS, id="iters")
            with VerticalScroll(id="iter-detail-box"):
                yield Static("", id="iter-detail")

    def update_view(self, view: RunView) -> None:
        self.build(view)

    @work(thread=True, exclusive=True, group="iterations", exit_on_error=False)
    def build(self, view: RunView) -> None:
        diagnosis = build_iterations(self.run_dir, baseline_labels(view))
        start = view.run.budget_start or view.run.created_at
        self.post_message(IterationsBuilt(diagnosis, start))

    @on(IterationsBuilt)
    def built(self, message: IterationsBuilt) -> None:
        diagnosis: Diagnosis = message.diagnosis
        self.iterations = diagnosis.iterations
        self.ends = [message.start + (it.elapsed_s or 0.0) for it in diagnosis.iterations]
        self.query_one("#route", Static).update(literal_line(f"route: {diagnosis.route}", style="bold"))
        self.query_one("#iters", VirtualTable).set_rows(len(self.iterations), lambda i: iteration_cells(self.iterations[i]))
        self.show_current()

    def current(self) -> Iteration | None:
        cursor = self.query_one("#iters", VirtualTable).cursor
        return self.iterations[cursor] if 0 <= cursor < len(self.iterations) else None

    @on(VirtualTable.CursorMoved, "#iters")
    def show_current(self) -> None:
        it = self.current()
        self.query_one("#iter-detail", Static).update(iteration_text(it) if it else "no iteration yet")

    def action_revision(self) -> None:
        it = self.current()
        if it is None or it.revision is None:
            self.notify("this iteration has no recorded revision", severity="warning")
            return
        self.post_message(ShowRevision(it.revision))

    def action_diff(self) -> None:
        it = self.current()
        if it is None or it.submission_id is None:
            self.notify("this iteration made no submission", severity="warning")
            return
        self.post_message(ShowSubmissionDiff(it.submission_id))

    def action_transcript(self) -> None:
        it = self.current()
        if it is not None:
            self.post_message(ShowTranscriptAt(self.ends[it.iteration - 1]))
