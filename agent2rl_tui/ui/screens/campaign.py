"""Campaigns: the list of campaigns under the root, and one campaign's matrix, live.

``g`` on Runs lists the campaigns (``<root>/campaigns/``); ``enter`` opens one: a row per cell
(task · agent · driver · base model) with its runs by state and its statistics (best mean ±
sd, the improvement's mean and bootstrap 95% CI, the expected best of 3 runs), and below it
the runs of the highlighted cell (seed, attempt, state, best). ``enter`` on a run opens its
Run screen, ``c`` compares the campaign's runs, ``e`` shows the experiment's tables (the table,
the mode x task heatmap, the best routes, the expected best of k: ``campaign report``'s). The
record is re-read every few seconds in a thread worker, so queued runs are seen to start and end.
"""

from __future__ import annotations

from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from agent2rl_tui.review.campaign_view import CAMPAIGN_STATES, CampaignRun, CellResult, cell_results
from agent2rl_tui.review.compare import ci_text
from agent2rl_tui.run.campaign import campaign_runs
from agent2rl_tui.ui.format import literal_line
from agent2rl_tui.ui.messages import OpenRun
from agent2rl_tui.ui.widgets.tables import RowTable
from agent2rl_tui.util.inert import one_line


def campaign_folders(root: Path) -> list[Path]:
    folder = root / "campaigns"
    return sorted((p for p in folder.iterdir() if (p / "campaign.db").is_file()), reverse=True) \
        if folder.is_dir() else []


def _states(runs: list[CampaignRun]) -> str:
    counts = {s: sum(1 for r in runs if r.state == s) for s in CAMPAIGN_STATES}
    return " · ".join(f"{n} {s}" for s, n in counts.items() if n) or "-"


def _pm(mean: float | None, sd: float | None) -> str:
    if mean is None:
        return "-"
    return f"{mean:.2f}" + (f" ± {sd:.2f}" if sd is not None else "")


class CampaignsScreen(Screen[None]):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="campaigns-back"),
                Binding("enter", "open", "Open", id="campaigns-open")]

    def __init__(self, root: Path, refresh_s: float = 2.0) -> None:
        super().__init__()
        self.root, self.refresh_s = root, refresh_s
        self.folders = campaign_folders(root)

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(literal_line(f"{len(self.folders)} campaigns in {self.root / 'campaigns'}"
                                  + ("" if self.folders else ": start one with `agent2rl-tui campaign start FILE`")),
                     id="campaigns-title")
        table = RowTable(id="campaigns")
        for label in ("campaign", "runs", "states"):
            table.add_column(label, key=label)
        for folder in self.folders:
            runs = [r for r in campaign_runs(folder) if r.state != "superseded"]
            table.add_row(literal_line(folder.name), str(len(runs)), _states(runs))
        yield table
        yield Footer()

    def action_open(self) -> None:
        table = self.query_one("#campaigns", DataTable)
        if self.folders and 0 <= table.cursor_row < len(self.folders):
            self.app.push_screen(CampaignScreen(self.folders[table.cursor_row], refresh_s=self.refresh_s))

    @on(DataTable.RowSelected, "#campaigns")
    def selected(self) -> None:
        self.action_open()


class CampaignScreen(Screen[None]):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="campaign-back"),
                Binding("enter", "open_run", "Open run", id="campaign-open-run"),
                Binding("c", "compare", "Compare", id="campaign-compare"),
                Binding("e", "experiment", "Experiment", id="campaign-experiment"),
                Binding("tab", "focus_next", "Cells / runs", show=False)]

    def __init__(self, folder: Path, refresh_s: float = 2.0) -> None:
        super().__init__()
        self.folder, self.refresh_s = folder, refresh_s
        self.cells: list[CellResult] = []
        self.loaded = False

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(literal_line(f"campaign {self.folder.name}"), id="campaign-title")
        cells = RowTable(id="cells")
        for label in ("cell", "runs", "valid", "best of budget", "improvement", "improvement 95% CI", "best of 3"):
            cells.add_column(label, key=label)
        yield cells
        yield Static("runs of the highlighted cell (enter: open)", id="cell-runs-title")
        runs = RowTable(id="cell-runs")
        for label in ("seed", "attempt", "state", "run", "best", "improvement"):
            runs.add_column(label, key=label)
        yield runs
        yield Footer()

    def on_mount(self) -> None:
        self.title = one_line(self.folder.name)
        self.sub_title = "campaign"
        self.reload()
        self.set_interval(self.refresh_s, self.reload)

    @work(thread=True, exclusive=True, group="campaign-load", exit_on_error=False)
    def reload(self) -> None:
        cells = cell_results(campaign_runs(self.folder))
        self.app.call_from_thread(self.show, cells)

    def show(self, cells: list[CellResult]) -> None:
        table = self.query_one("#cells", DataTable)
        keep = table.cursor_row
        table.clear()
        for c in cells:
            best3 = c.expected_best.get(3)
            low, high = c.improvement.ci_low, c.improvement.ci_high
            table.add_row(literal_line(c.cell), _states(c.runs), literal_line(c.tally.valid_text()),
                          _pm(c.best.mean, c.best.sd),
                          _pm(c.improvement.mean, c.improvement.sd),
                          ci_text((low, high) if low is not None and high is not None else None, c.improvement.n),
                          "-" if best3 is None else f"{best3:.2f}")
        self.cells = cells
        if cells:
            table.move_cursor(row=min(max(keep, 0), len(cells) - 1))
        self.show_runs()
        self.loaded = True

    def current_cell(self) -> CellResult | None:
        row = self.query_one("#cells", DataTable).cursor_row
        return self.cells[row] if 0 <= row < len(self.cells) else None

    @on(DataTable.RowHighlighted, "#cells")
    def show_runs(self) -> None:
        cell = self.current_cell()
        table = self.query_one("#cell-runs", DataTable)
        keep = table.cursor_row
        table.clear()
        for r in cell.runs if cell else []:
            s = r.summary
            table.add_row(str(r.row.seed), str(r.row.attempt), r.state, literal_line(s.id if s else "-"),
                          "-" if not s or s.best is None else f"{s.best:.2f}",
                          "-" if not s or s.improvement is None else f"{s.improvement:+.2f}")
        if cell and cell.runs:
            table.move_cursor(row=min(max(keep, 0), len(cell.runs) - 1))

    def action_open_run(self) -> None:
        cell = self.current_cell()
        row = self.query_one("#cell-runs", DataTable).cursor_row
        summary = cell.runs[row].summary if cell and 0 <= row < len(cell.runs) else None
        if summary is not None:
            self.post_message(OpenRun(summary.path))
        elif cell:
            self.notify("that run has not started yet", timeout=3)

    @on(DataTable.RowSelected)
    def selected(self, event: DataTable.RowSelected) -> None:
        """enter on a cell goes down to its runs; on a run, opens it."""
        if event.data_table.id == "cells":
            self.query_one("#cell-runs", DataTable).focus()
        else:
            self.action_open_run()

    def action_compare(self) -> None:
        from agent2rl_tui.ui.screens.compare import CompareScreen

        runs = [r.summary for c in self.cells for r in c.runs if r.summary is not None]
        self.app.push_screen(CompareScreen(runs))

    def action_experiment(self) -> None:
        from agent2rl_tui.ui.screens.experiment import ExperimentScreen

        runs = [r.summary for c in self.cells for r in c.runs if r.summary is not None]
        self.app.push_screen(ExperimentScreen(f"campaign {self.folder.name}", runs))
