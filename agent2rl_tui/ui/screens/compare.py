"""Compare: marked runs grouped by task x prompt profile x agent x driver, mean +- spread of their results,
and what a run of each group used (tokens and cost per run, ``review.run_usage``: metered, or from the agent's stream).

Below the table, the scaling (``review.scaling``): each run's best improvement against time, one
line per run and a colour per group; ``v`` moves the x axis on to tokens, submissions, and the
expected best improvement of k runs. The runs' points are read in a thread worker (one run.db
each), handed back as a message (``ui.messages``).
"""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Header, Static
from textual_plotext import PlotextPlot

from agent2rl_tui.review.compare import Group, ci_text, compare, pair_text, paired_bests, profile_notes
from agent2rl_tui.review.index import RunSummary
from agent2rl_tui.review.plots import step_points
from agent2rl_tui.review.scaling import AXES, AXIS_LABELS, TITLES, RunCurve, curves, group_runs, read_scaling
from agent2rl_tui.ui.format import literal, literal_line
from agent2rl_tui.ui.messages import CompareReadFailed, PairsRead, ScalingRead
from agent2rl_tui.ui.widgets.tables import RowTable
from agent2rl_tui.util.inert import one_line

COLOURS = ("blue", "orange", "green", "red", "magenta", "cyan", "yellow", "gray")
"""One colour per group, in the table's order."""


def usage_cells(g: Group) -> tuple[str, str, str]:
    """Mean tokens and cost per run, and their source (cost over the priced runs only, said so)."""
    tokens = "-" if g.tokens_mean is None else f"{g.tokens_mean:,.0f}"
    if g.cost_mean is None:
        cost = "-" if g.tokens_mean is None else "unknown"
    else:
        cost = f"${g.cost_mean:.4f}" + (f" ({g.cost_runs}/{g.runs})" if g.cost_runs < g.runs else "")
    return tokens, cost, g.tokens_source


def _pm(mean: float | None, sd: float | None) -> str:
    return "-" if mean is None else f"{mean:.2f} ± {sd:.2f}"


class CompareScreen(Screen[None]):
    DEFAULT_CSS = """
    CompareScreen #compare { height: auto; max-height: 45%; }
    CompareScreen #scaling { height: 1fr; min-height: 10; }
    CompareScreen #paired { height: auto; max-height: 30%; padding: 0 1; }
    """
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="back"),
                Binding("v", "next_axis", "Scaling axis", id="scaling-axis")]

    def __init__(self, runs: list[RunSummary]) -> None:
        super().__init__()
        self.runs = runs
        self.axis = AXES[0]
        self.scaling: dict[str, list[RunCurve]] | None = None  # once read

    def compose(self) -> ComposeResult:
        yield Header()
        groups = compare(self.runs)
        yield Static(f"{len(self.runs)} runs, grouped by task × prompt profile × agent × driver × base model × mode "
                     "× eval limit (mean ± sample sd; a run without a valid submission counts at 0; bootstrap 95% CI "
                     "of the mean from three runs; expected best of 3 runs)", id="compare-title")
        notes = profile_notes(groups)
        if notes:
            yield Static(literal("\n".join(f"⚠ {n}" for n in notes)), id="compare-notes", classes="warning")
        table = RowTable(id="compare")
        for label in ("task", "prompts", "agent", "driver", "base model", "mode", "runs", "valid", "best", "improvement",
                      "improvement 95% CI", "best of 3", "submissions", "tokens / run", "cost / run", "tokens from"):
            table.add_column(label, key=label)
        for g in groups:
            best3 = (g.best_of or {}).get(3)
            table.add_row(*map(literal_line, (g.task, g.prompt_profile, g.agent, g.driver, g.base_model,
                                              g.setting_text())),
                          str(g.runs), literal_line(g.tally.valid_text()),
                          _pm(g.best_mean, g.best_sd), _pm(g.improvement_mean, g.improvement_sd),
                          ci_text(g.improvement_ci, g.runs), "-" if best3 is None else f"{best3:.2f}",
                          f"{g.submissions_mean:.1f}", *usage_cells(g))
        yield table
        yield Static("pairing runs graded on the same items…", id="paired")
        yield PlotextPlot(id="scaling")
        yield Footer()

    def on_mount(self) -> None:
        self.draw_scaling()
        self.read_scaling()
        self.read_pairs()

    @work(thread=True, exclusive=True, group="paired")
    def read_pairs(self) -> None:
        try:
            self.post_message(PairsRead(paired_bests(self.runs)))
        except Exception as exc:  # noqa: BLE001 - a damaged run folder: said, the rest of the screen stays
            self.post_message(CompareReadFailed("pair the runs' items", str(exc)))

    @on(PairsRead)
    def show_pairs(self, message: PairsRead) -> None:
        pairing = message.pairing
        lines = [f"{p.task}: {pair_text(p)}" for p in pairing.pairs]
        if pairing.more:
            lines.append(f"… and {pairing.more} more pairs")
        head = ("paired on the same eval items, best against best (points, 95% interval):" if pairing.pairs
                else "no two runs were graded on the same eval items (`run start --eval-seed N` makes them so)")
        self.query_one("#paired", Static).update(literal("\n".join([head, *lines])))

    @work(thread=True, exclusive=True, group="scaling")
    def read_scaling(self) -> None:
        try:
            self.post_message(ScalingRead(read_scaling(group_runs(self.runs))))
        except Exception as exc:  # noqa: BLE001 - as above
            self.post_message(CompareReadFailed("read the runs' submissions", str(exc)))

    @on(ScalingRead)
    def scaling_read(self, message: ScalingRead) -> None:
        self.scaling = message.curves
        self.draw_scaling()

    @on(CompareReadFailed)
    def read_failed(self, message: CompareReadFailed) -> None:
        self.notify(one_line(f"could not {message.what}: {message.error}"), severity="error", markup=False)

    def action_next_axis(self) -> None:
        self.axis = AXES[(AXES.index(self.axis) + 1) % len(AXES)]
        self.draw_scaling()

    def draw_scaling(self) -> None:
        """The best improvement against the current axis: a step line per run, a colour per group."""
        plot = self.query_one("#scaling", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(f"{TITLES[self.axis]} (v: next axis)" if self.scaling is not None else "reading the runs…")
        plt.xlabel(AXIS_LABELS[self.axis])
        drawn = curves(self.scaling or {}, self.axis)
        for i, (label, lines) in enumerate(drawn.items()):
            for j, (_, xy) in enumerate(lines):
                pts = xy if self.axis == "k" else step_points(xy)
                plt.plot([x for x, _ in pts], [y for _, y in pts], marker="braille", color=COLOURS[i % len(COLOURS)],
                         label=one_line(label) if j == 0 else None)
        plt.hline(0.0, color="gray")
        low = 1.0 if self.axis == "k" else 0.0  # from the start (k from one run)
        plt.xlim(low, max([low + 1, *(x for lines in drawn.values() for _, xy in lines for x, _ in xy)]))
        plot.refresh()
