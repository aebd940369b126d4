"""Scores: the score history chart, the submissions table, and what a submission changed.

Selecting a submission shows its per-item results against the previous scored submission
and against the baseline: which items it solved and which it broke; ``i`` opens all of its
items (Items screen). Keys jump to the revision it was made from, to the diff since the
previous submission, and to what the agent was doing when it submitted (messages to the
screen). The items are read in a thread worker whenever the highlighted submission changes.
"""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static
from textual_plotext import PlotextPlot

from agent2rl_tui.record.results import ItemRow
from agent2rl_tui.record.store import Submission, SubStatus
from agent2rl_tui.review.episodes_view import facts, is_episode
from agent2rl_tui.review.items import SubmissionItems, read_submission_items
from agent2rl_tui.review.runview import RunView, compare_items
from agent2rl_tui.ui.format import fmt_score, literal_line
from agent2rl_tui.ui.messages import ItemsLoaded, ShowRevision, ShowSubmissionDiff, ShowTranscriptAt
from agent2rl_tui.ui.widgets.virtual_table import Column, VirtualTable
from agent2rl_tui.util.timeutil import human_duration

ITEMS_SHOWN = 20
ERROR_LINES = 200
"""Lines of a submission's error shown (a traceback); grader.log and evals/<n>/ hold it all."""
COLUMNS = [Column("#", 8), Column("at", 8, right=True), Column("score", 7, right=True),
           Column("Δ prev", 7, right=True), Column("Δ base", 7, right=True), Column("status", 9),
           Column("eval", 7, right=True), Column("rev", 4, right=True), Column("model", 0)]


LABEL_STYLES = {"better": "green", "worse": "red", "within noise": "yellow"}


def item_line(item: ItemRow) -> str:
    """One solved/broken item: a game with how it ended, or the prompt's tail with the answer."""
    if is_episode(item):
        f = facts(item)
        return f"{f.game}: {f.outcome} after {f.steps} steps"
    prompt = item.prompt.replace("\n", " ")[-50:]
    return f"{prompt!r} → {item.extracted!r} (gold {item.gold})"


def workspace_relative(path: str | None) -> str:
    """A model path as the agent would write it: relative to its run's workspace.

    Recorded paths are absolute where the run was made; the folder may have moved since.
    """
    if not path:
        return "-"
    i = path.rfind("/workspace/")
    return path[i + len("/workspace/"):] if i >= 0 else path


class ScoresPane(Vertical):
    BINDINGS = [
        Binding("r", "revision", "Its revision", id="sub-revision"),
        Binding("d", "diff", "Diff since previous", id="sub-diff"),
        Binding("t", "transcript", "Transcript there", id="sub-transcript"),
        Binding("i", "items", "All items", id="sub-items"),
    ]

    def __init__(self) -> None:
        super().__init__(id="scores-pane")
        self.view: RunView | None = None
        self.rows: list[Submission] = []
        self.chart_key: tuple = ()
        self.items: SubmissionItems | None = None  # of the highlighted submission, once read
        self.open_items_of: int | None = None  # ``i`` pressed before that submission's items were read

    def compose(self) -> ComposeResult:
        with Horizontal(id="scores-top"):
            yield PlotextPlot(id="chart")
            with VerticalScroll(id="items"):
                yield Static("Select a submission to see which items it solved or broke.", id="items-text")
        yield VirtualTable(COLUMNS, id="subs")

    # -- updates ----------------------------------------------------------------------
    def update_view(self, view: RunView) -> None:
        self.view = view
        self.rows = ([view.baseline] if view.baseline is not None else []) + list(view.submissions)
        self.query_one("#subs", VirtualTable).set_rows(len(self.rows), self._cells)
        self._update_chart(view)
        self.items = None  # an evaluation may have finished: read them again
        self.show_items()

    def _cells(self, i: int) -> list[str | Text]:
        view, sub = self.view, self.rows[i]
        assert view is not None
        agent = sub.kind == "agent"
        prev = view.previous_scored(sub.id) if agent else None
        base = view.baseline_score
        change = sub.score - prev.score if agent and sub.score is not None and prev and prev.score is not None else None
        vs = sub.score - base if agent and sub.score is not None and base is not None else None
        start = view.run.budget_start
        status = Text(sub.status, style={"scored": "green", "failed": "red", "rejected": "yellow"}.get(sub.status, ""))
        return [
            str(sub.id) if agent else "baseline",
            human_duration(sub.received_at - start) if start and agent else "-",
            fmt_score(sub.score), fmt_score(change, signed=True), fmt_score(vs, signed=True), status,
            f"{sub.eval_seconds:.1f}s" if sub.eval_seconds is not None else "-",
            str(sub.revision_seq) if sub.revision_seq else "-",
            (sub.error or "") if sub.status != SubStatus.SCORED else workspace_relative(sub.model_path),
        ]

    def _update_chart(self, view: RunView) -> None:
        start = view.run.budget_start or 0.0
        scored = [s for s in view.submissions if s.status == SubStatus.SCORED and s.score is not None]
        key = (tuple((s.id, s.score) for s in scored), view.baseline_score)
        if key == self.chart_key:
            return  # plotext redraws everything: only on change
        self.chart_key = key
        chart = self.query_one("#chart", PlotextPlot)
        plt = chart.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("score over run time (minutes)")
        xs = [(s.received_at - start) / 60 for s in scored]
        ys = [s.score for s in scored if s.score is not None]  # all of them (scored ones only)
        if xs:
            plt.plot(xs, ys, marker="braille", label="submissions")
            plt.scatter(xs, ys, marker="●")
            best = view.best
            if best is not None:
                plt.scatter([(best.received_at - start) / 60], [best.score], marker="★", color="green", label="best")
        if view.baseline_score is not None:
            plt.hline(view.baseline_score, color="red")
            if not xs:
                plt.scatter([0], [view.baseline_score], marker="·", label="baseline")
        hi = max([*ys, view.baseline_score or 0.0, 1.0])
        plt.ylim(0, min(100.0, hi * 1.1 + 1))
        span = max([*xs, view.budget(max([s.received_at for s in scored], default=start)).elapsed_s / 60, 0.1])
        plt.xlim(0, span * 1.05)
        plt.xlabel("minutes")
        chart.refresh()

    # -- selection --------------------------------------------------------------------
    def current_submission(self) -> Submission | None:
        table = self.query_one("#subs", VirtualTable)
        return self.rows[table.cursor] if 0 <= table.cursor < len(self.rows) else None

    @on(VirtualTable.CursorMoved, "#subs")
    def highlighted(self) -> None:
        self.show_items()

    def show_items(self) -> None:
        """Read the highlighted submission's items (in a worker); ``ItemsLoaded`` shows them."""
        sub = self.current_submission()
        if sub is not None and self.view is not None:
            self.load_items(self.view, sub)

    @work(thread=True, exclusive=True, group="items", exit_on_error=False)
    def load_items(self, view: RunView, sub: Submission) -> None:
        self.post_message(ItemsLoaded(read_submission_items(view, sub)))

    @on(ItemsLoaded)
    def items_loaded(self, message: ItemsLoaded) -> None:
        sub = self.current_submission()
        if sub is None or sub.id != message.items.sub_id:
            return  # the cursor has moved on: its own read is on its way
        self.items = message.items
        self.query_one("#items-text", Static).update(self._items_text(sub, message.items))
        if self.open_items_of == sub.id:
            self.open_items_of = None
            self.action_items()

    def _items_text(self, sub: Submission, read: SubmissionItems) -> Text:
        lines = [Text(f"submission {sub.id if sub.kind == 'agent' else 'baseline'}: {sub.status}",
                      style="bold")]
        if sub.error:  # whole, for the person, each of its lines quoted: it cannot pass for a line of ours
            lines += [literal_line(f"  │ {part}", style="red") for part in sub.error.split("\n")[:ERROR_LINES]]
        items = read.items
        if items:
            correct = sum(1 for i in items if i.correct)
            what = "games won" if is_episode(items[0]) else "items correct"
            lines.append(Text(f"{correct} of {len(items)} {what} (i: browse them all)"))
            others = [(f"previous submission #{read.previous.sub_id}", read.previous.items, read.vs_previous)] \
                if read.previous else []
            if read.baseline is not None:
                others.append(("baseline", read.baseline.items, read.vs_baseline))
            for label, other_items, paired in others:
                cmp = compare_items(items, other_items)
                lines.append(Text(f"vs {label}: solved {len(cmp.solved)}, broke {len(cmp.broken)}, "
                                  f"kept {cmp.kept}, still wrong {cmp.still_wrong}", style="bold"))
                if paired is not None:
                    lines.append(Text(f"  {paired.describe()}", style=LABEL_STYLES.get(paired.label, "")))
                for tag, group, style in (("+", cmp.solved, "green"), ("-", cmp.broken, "red")):
                    for item in group[:ITEMS_SHOWN]:
                        lines.append(literal_line(f" {tag} #{item.index} {item_line(item)}", style=style))
                    if len(group) > ITEMS_SHOWN:
                        lines.append(Text(f"   … {len(group) - ITEMS_SHOWN} more", style="dim"))
        return Text("\n").join(lines)

    def action_revision(self) -> None:
        sub = self.current_submission()
        if sub is None or sub.revision_seq is None:
            self.notify("this submission has no recorded revision", severity="warning")
            return
        self.post_message(ShowRevision(sub.revision_seq))

    def action_diff(self) -> None:
        sub = self.current_submission()
        if sub is None or sub.revision_seq is None:
            self.notify("this submission has no recorded revision", severity="warning")
            return
        self.post_message(ShowSubmissionDiff(sub.id))

    def action_items(self) -> None:
        from agent2rl_tui.ui.screens.items import ItemsScreen

        sub = self.current_submission()
        if sub is None or self.view is None:
            return
        if self.items is None or self.items.sub_id != sub.id:
            self.open_items_of = sub.id  # opened once they are read
            return
        self.app.push_screen(ItemsScreen(self.view, sub, self.items))

    def action_transcript(self) -> None:
        sub = self.current_submission()
        if sub is not None:
            self.post_message(ShowTranscriptAt(sub.received_at))
