"""Compare: marked runs grouped by task x prompt profile x agent x driver, mean +- spread of their results,
and what a run of each group used (tokens and cost per run, ``record.usage``: metered, or from the agent's stream)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from agent2rl_tui.record.compare import Group, ci_text, compare, profile_notes
from agent2rl_tui.record.index import RunSummary
from agent2rl_tui.ui.format import literal, literal_line
from agent2rl_tui.ui.widgets.tables import RowTable


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
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="back")]

    def __init__(self, runs: list[RunSummary]) -> None:
        super().__init__()
        self.runs = runs

    def compose(self) -> ComposeResult:
        yield Header()
        groups = compare(self.runs)
        yield Static(f"{len(self.runs)} runs, grouped by task × prompt profile × agent × driver (mean ± sample sd; "
                     "bootstrap 95% CI of the mean; expected best of 3 runs)", id="compare-title")
        notes = profile_notes(groups)
        if notes:
            yield Static(literal("\n".join(f"⚠ {n}" for n in notes)), id="compare-notes", classes="warning")
        table = RowTable(id="compare")
        for label in ("task", "prompts", "agent", "driver", "runs", "finished", "best", "improvement",
                      "improvement 95% CI", "best of 3", "submissions", "tokens / run", "cost / run", "tokens from"):
            table.add_column(label, key=label)
        for g in groups:
            best3 = (g.best_of or {}).get(3)
            table.add_row(*map(literal_line, (g.task, g.prompt_profile, g.agent, g.driver)), str(g.runs), str(g.finished),
                          _pm(g.best_mean, g.best_sd), _pm(g.improvement_mean, g.improvement_sd),
                          ci_text(g.improvement_ci), "-" if best3 is None else f"{best3:.2f}",
                          f"{g.submissions_mean:.1f}", *usage_cells(g))
        yield table
        yield Footer()
