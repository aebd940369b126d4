"""Training: the agent's training curves and the machine's vitals over the run, in the terminal.

The curves are what the agent's trainers logged (``review.curves``: loss, reward, KL, learning
rate ...), one metric at a time (``m`` for the next), with the submissions marked; below them CPU
and memory (and each GPU's use) from the vitals samples (``review.vitals_charts``). Both are read in
a thread worker when the pane is shown, and again as the record changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Static
from textual_plotext import PlotextPlot

from agent2rl_tui.review.curves import Curves, marks_on, read_curves
from agent2rl_tui.review.runview import RunView
from agent2rl_tui.review.vitals_charts import VitalsSeries, read_vitals
from agent2rl_tui.ui.format import literal_line


@dataclass
class TrainingRead(Message):
    curves: Curves
    vitals: VitalsSeries
    submissions: list[tuple[int, float]]


class TrainingPane(Vertical):
    DEFAULT_CSS = """
    TrainingPane #curve { height: 1fr; min-height: 10; }
    TrainingPane #machine { height: 1fr; min-height: 8; }
    """
    BINDINGS = [Binding("m", "next_metric", "Next metric", id="training-metric")]

    def __init__(self, run_dir: Path) -> None:
        super().__init__(id="training-pane")
        self.run_dir = run_dir
        self.curves: Curves | None = None
        self.vitals: VitalsSeries | None = None
        self.submissions: list[tuple[int, float]] = []
        self.metric = 0
        self.can_focus = True

    def compose(self) -> ComposeResult:
        yield Static("reading the agent's training logs…", id="training-title")
        yield PlotextPlot(id="curve")
        yield PlotextPlot(id="machine")

    def update_view(self, view: RunView) -> None:
        start = view.run.budget_start or view.run.created_at or 0.0
        self.read([(s.id, (s.received_at - start) / 60) for s in view.submissions if s.received_at])

    @work(thread=True, exclusive=True, group="training", exit_on_error=False)
    def read(self, submissions: list[tuple[int, float]]) -> None:
        self.post_message(TrainingRead(read_curves(self.run_dir), read_vitals(self.run_dir), submissions))

    @on(TrainingRead)
    def shown(self, message: TrainingRead) -> None:
        self.curves, self.vitals, self.submissions = message.curves, message.vitals, message.submissions
        self.draw()

    @property
    def names(self) -> list[str]:
        return list(self.curves.series) if self.curves else []

    def action_next_metric(self) -> None:
        if self.names:
            self.metric = (self.metric + 1) % len(self.names)
            self.draw()

    def draw(self) -> None:
        names = self.names
        skipped = "".join(f"; {note}" for note in self.curves.notes()) if self.curves else ""
        if names:
            name = names[self.metric % len(names)]
            origin = self.curves.from_files(name) if self.curves else ""
            self.query_one("#training-title", Static).update(literal_line(
                f"{name}{origin} ({self.metric % len(names) + 1} of {len(names)}: {', '.join(names)}; m: next){skipped}"))
        else:
            self.query_one("#training-title", Static).update(literal_line(
                f"no trainer logged a loss, reward, KL or learning rate in the agent's output{skipped}"))
        plt = self.query_one("#curve", PlotextPlot).plt
        plt.clear_data()
        plt.clear_figure()
        if names and self.curves:
            points = self.curves.series[names[self.metric % len(names)]]
            plt.plot([x for x, _ in points], [y for _, y in points], marker="braille")
            for sub_id, at, y in marks_on(points, self.submissions):
                plt.scatter([at], [y], marker="◆", color="yellow", label=f"#{sub_id}")
            plt.xlabel("minutes")
        self.query_one("#curve", PlotextPlot).refresh()
        machine = self.query_one("#machine", PlotextPlot).plt
        machine.clear_data()
        machine.clear_figure()
        if self.vitals is not None and not self.vitals.empty:
            machine.title("CPU % and GPU % over the run")
            if self.vitals.cpu_pct:
                machine.plot([x for x, _ in self.vitals.cpu_pct], [y for _, y in self.vitals.cpu_pct],
                             marker="braille", label="CPU %")
            for index, points in sorted(self.vitals.gpu_util.items()):
                machine.plot([x for x, _ in points], [y for _, y in points], marker="braille", label=f"GPU {index} %")
            machine.xlabel("minutes")
        self.query_one("#machine", PlotextPlot).refresh()
