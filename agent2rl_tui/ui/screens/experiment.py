"""The experiment's tables in the terminal: what `campaign report` writes, for a campaign's runs.

``e`` on a Campaign screen opens it: the table (a row per agent x driver x base model x mode, a
column per task), the mode x task heatmaps, where the best routes came from and the expected
best of k. Built in a thread worker (it reads every run's report.json); the numbers are
``review.experiment``'s, the same as the CSV files and the page.
"""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from agent2rl_tui.review.experiment import ROUTES, Experiment, best_of_k, build_experiment, cell_text, group_label
from agent2rl_tui.review.index import RunSummary
from agent2rl_tui.ui.format import literal_line
from agent2rl_tui.ui.widgets.tables import RowTable


class ExperimentScreen(Screen[None]):
    DEFAULT_CSS = """
    ExperimentScreen RowTable { height: auto; max-height: 14; margin-bottom: 1; }
    """
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="experiment-back")]

    def __init__(self, title: str, runs: list[RunSummary]) -> None:
        super().__init__()
        self.title_text, self.runs = title, runs
        self.experiment: Experiment | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(literal_line(f"{self.title_text}: reading {len(self.runs)} runs' reports…"), id="experiment-title")
        yield VerticalScroll(id="experiment-body")
        yield Footer()

    def on_mount(self) -> None:
        self.build()

    @work(thread=True, exclusive=True, group="experiment")
    def build(self) -> None:
        experiment = build_experiment(self.runs)
        self.app.call_from_thread(self.show, experiment)

    def show(self, e: Experiment) -> None:
        self.experiment = e
        supervised, trained = e.supervised_share()
        self.query_one("#experiment-title", Static).update(literal_line(
            f"{self.title_text}: {len(self.runs)} runs; supervised best routes {supervised} of {trained}"))
        body = self.query_one("#experiment-body", VerticalScroll)
        table = RowTable(id="experiment-table")
        table.add_column("agent · driver · base model · mode", key="row")
        for col in e.columns:
            table.add_column(literal_line(col), key=f"col-{col}")
        for row in e.rows:
            table.add_row(literal_line(row.label()), *(literal_line(cell_text(e.cells.get((row, c)))) for c in e.columns))
        heat = RowTable(id="experiment-heatmap")
        heat.add_column("who · mode", key="who")
        for col in e.columns:
            heat.add_column(literal_line(col), key=f"heat-{col}")
        for who, cells in e.heatmaps.items():
            for mode in e.modes():
                if any((mode, c) in cells for c in e.columns):
                    heat.add_row(literal_line(f"{who} · {mode}"), *(
                        "-" if cells.get((mode, c)) is None else f"{cells[(mode, c)]:+.2f}" for c in e.columns))
        routes = RowTable(id="experiment-routes")
        for label in ("group", *ROUTES):
            routes.add_column(label, key=f"route-{label}")
        for label, counts in e.routes.items():
            routes.add_row(literal_line(label), *(str(counts[r]) for r in ROUTES))
        best = RowTable(id="experiment-best-of-k")
        best.add_column("group", key="group")
        best.add_column("expected best of k", key="k")
        for g in e.groups:
            best.add_row(literal_line(group_label(g)),
                         ", ".join(f"k={k} {'-' if v is None else f'{v:.2f}'}" for k, v in best_of_k(g)) or "-")
        body.mount_all([Static("the table: mean improvement [95% interval]; n; valid; cost per run"), table,
                        Static("mode × task: mean improvement"), heat, Static("where the best routes came from"),
                        routes, Static("expected best of k"), best])
