"""The Run screen: budget header and the Scores, Revisions, Transcript, Logs, Report and Iterations panes.

It watches the run's folder, never its supervisor: every second a thread worker asks the
record whether run.db changed (``record.watch.RunWatch``) and, if so, reloads the run view;
the header ticks from the clock while the run is live, and each tick also re-derives the
status from the heartbeat's age, so a run whose supervisor stopped beating (which writes
nothing) is shown lost and the header stops. Panes are filled when first shown
and refreshed only while visible, so a run with thousands of revisions opens fast. Panes
ask for each other with messages (``ShowRevision``, ``ShowSubmissionDiff``,
``ShowTranscriptAt``), handled here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Header, Input, TabbedContent, TabPane

from agent2rl_tui.record.store import RunStatus, previous_revision_seq
from agent2rl_tui.record.watch import RunWatch
from agent2rl_tui.review.index import effective_status
from agent2rl_tui.review.runview import RunView, load_run_view
from agent2rl_tui.ui.messages import RunStopped, ShowRevision, ShowSubmissionDiff, ShowTranscriptAt, ViewLoaded
from agent2rl_tui.ui.panes.iterations import IterationsPane
from agent2rl_tui.ui.panes.logs import LogsPane
from agent2rl_tui.ui.panes.report import ReportPane
from agent2rl_tui.ui.panes.revisions import RevisionsPane
from agent2rl_tui.ui.panes.scores import ScoresPane
from agent2rl_tui.ui.panes.training import TrainingPane
from agent2rl_tui.ui.panes.transcript import TranscriptPane
from agent2rl_tui.ui.screens.stop import StoppingScreen
from agent2rl_tui.ui.widgets.budget import BudgetHeader
from agent2rl_tui.util.inert import one_line

TABS = ("scores", "revisions", "transcript", "logs", "report", "iterations")
FOCUS = {"scores": "#subs", "revisions": "#revs", "transcript": "#steps", "logs": "#log", "report": "#report-pane",
         "iterations": "#iters", "training": "#training-pane"}


PANES = Binding.Group("Panes")


class RunScreen(StoppingScreen):
    BINDINGS = [
        Binding("escape", "back", "Runs", id="back"),
        Binding("1", "tab('scores')", "Scores", id="tab-scores", group=PANES),
        Binding("2", "tab('revisions')", "Revisions", id="tab-revisions", group=PANES),
        Binding("3", "tab('transcript')", "Transcript", id="tab-transcript", group=PANES),
        Binding("4", "tab('logs')", "Logs", id="tab-logs", group=PANES),
        Binding("5", "tab('report')", "Report", id="tab-report", group=PANES),
        Binding("6", "tab('iterations')", "Iterations", id="tab-iterations", group=PANES),
        Binding("7", "tab('training')", "Training", id="tab-training", group=PANES),
        Binding("s", "stop", "Stop run", id="stop-run"),
    ]

    def __init__(self, view: RunView, record_watch: RunWatch, *, clock: Callable[[], float] = time.time) -> None:
        """``view`` and ``record_watch`` are read off the UI thread by whoever opens the screen."""
        super().__init__()
        self.run_dir = Path(view.path).resolve()
        self.clock = clock
        self.view: RunView | None = view
        self.filled: set[str] = set()
        self.record_watch: RunWatch | None = record_watch
        self.ready = False  # set once mounted with its panes: the screen is pushed before it composes

    def compose(self) -> ComposeResult:
        assert self.view is not None
        yield Header()
        yield BudgetHeader(id="budget")
        start = self.view.run.budget_start or self.view.run.created_at
        with TabbedContent(id="tabs", initial="scores"):
            with TabPane("Scores", id="scores"):
                yield ScoresPane()
            with TabPane("Revisions", id="revisions"):
                yield RevisionsPane()
            with TabPane("Transcript", id="transcript"):
                yield TranscriptPane(self.run_dir, start)
            with TabPane("Logs", id="logs"):
                yield LogsPane(self.run_dir)
            with TabPane("Report", id="report"):
                yield ReportPane(self.run_dir)
            with TabPane("Iterations", id="iterations"):
                yield IterationsPane(self.run_dir)
            with TabPane("Training", id="training"):
                yield TrainingPane(self.run_dir)
        yield Footer()

    def on_mount(self) -> None:
        assert self.view is not None
        self.title = one_line(self.view.run.id)  # a run folder copied from elsewhere is anyone's
        self.sub_title = one_line(str(self.run_dir))
        self.apply_view(self.view)
        self.set_interval(1.0, self.tick)
        self.set_interval(1.0, self.poll)
        self.focus_pane("scores")
        self.ready = True

    def focus_pane(self, tab: str) -> None:
        self.query_one(FOCUS[tab]).focus()

    def on_unmount(self) -> None:
        if self.record_watch is not None:
            self.record_watch.close()

    # -- live updates -----------------------------------------------------------------
    def tick(self) -> None:
        view = self.view
        if view is None or not view.live:
            return
        # A dead supervisor writes nothing, so no reload comes: "lost" is the heartbeat's age.
        status = effective_status(view.run)
        if status != view.status:
            view.status = status
            if status == RunStatus.LOST:
                self.notify("the run's supervisor stopped beating: the run is lost", severity="warning")
        self.query_one(BudgetHeader).show(view, self.clock())

    @work(thread=True, exclusive=True, group="run-poll", exit_on_error=False)
    def poll(self) -> None:
        if self.record_watch is not None and self.record_watch.changed():
            self.post_message(ViewLoaded(load_run_view(self.run_dir)))

    @work(thread=True, exclusive=True, group="run-load", exit_on_error=False)
    def reload(self) -> None:
        self.post_message(ViewLoaded(load_run_view(self.run_dir)))

    @on(ViewLoaded)
    def view_loaded(self, message: ViewLoaded) -> None:
        self.apply_view(message.view)

    def apply_view(self, view: RunView) -> None:
        self.view = view
        self.query_one(BudgetHeader).show(view, self.clock())
        self.filled.clear()
        self.fill(self.query_one(TabbedContent).active or "scores")

    def fill(self, tab: str) -> None:
        """Bring the pane of ``tab`` up to date with the view (once per change)."""
        if self.view is None or tab in self.filled:
            return
        self.filled.add(tab)
        panes: dict[str, type[ScoresPane | RevisionsPane | TranscriptPane | LogsPane | ReportPane | IterationsPane
                              | TrainingPane]] = {
            "scores": ScoresPane, "revisions": RevisionsPane, "transcript": TranscriptPane,
            "logs": LogsPane, "report": ReportPane, "iterations": IterationsPane, "training": TrainingPane}
        self.query_one(panes[tab]).update_view(self.view)

    @on(TabbedContent.TabActivated)
    def tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id:
            self.fill(event.pane.id)
            if not isinstance(self.focused, Input):
                self.focus_pane(event.pane.id)

    # -- navigation -------------------------------------------------------------------
    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        self.fill(tab)
        self.focus_pane(tab)

    def action_back(self) -> None:
        self.app.pop_screen()

    @on(ShowRevision)
    def show_revision(self, message: ShowRevision) -> None:
        self.action_tab("revisions")
        pane = self.query_one(RevisionsPane)
        pane.select(message.seq)
        pane.query_one("#revs").focus()

    @on(ShowSubmissionDiff)
    def show_submission_diff(self, message: ShowSubmissionDiff) -> None:
        assert self.view is not None
        sub_id = message.sub_id
        sub = self.view.submission(sub_id)
        if sub is None or sub.revision_seq is None:
            return
        self.action_tab("revisions")
        pane = self.query_one(RevisionsPane)
        base = previous_revision_seq(self.view.submissions, sub_id)
        pane.select(sub.revision_seq, base=base, explicit_base=True)
        self.notify(f"diff since the previous submission: revision {base if base is not None else '(empty)'} → "
                    f"{sub.revision_seq}")

    @on(ShowTranscriptAt)
    def show_transcript_at(self, message: ShowTranscriptAt) -> None:
        self.action_tab("transcript")
        self.query_one(TranscriptPane).jump_to_time(message.at)

    def action_stop(self) -> None:
        """Stop a live run, or close the record of a lost one (as ``s`` on Runs does)."""
        from agent2rl_tui.ui.screens.confirm import ConfirmScreen, stop_question

        if self.view is None:
            return
        question = stop_question(self.view.run.id, self.view.status, self.view.run.ended_at)
        if question is None:
            self.notify(one_line(f"this run is {self.view.status}; nothing to stop"), severity="warning", markup=False)
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.stop_in_background(self.run_dir)

        self.app.push_screen(ConfirmScreen(question), confirmed)

    @on(RunStopped)
    def run_stopped(self, message: RunStopped) -> None:
        self.notify(one_line(f"run {message.status}"), markup=False)  # a copied run.db says what it likes
        self.reload()
