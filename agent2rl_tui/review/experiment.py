"""The paper's experiment over many runs: its tables and figures, with the numbers under each.

From a campaign (or any list of runs), built from the runs' records and reports only:

- **the table**: a row per agent x driver x base model x mode (x eval limit), a column per task
  (and prompt profile): the mean improvement with its 95% interval, n, the valid-submission
  rate and the cost per run (``review.compare``'s groups: the one rule for what a run counts for);
- **each run's score at each submission** (the paper's Figure 5), the baseline first;
- **the mode x task heatmap** (Figure 6): one per agent x driver x base model (pooling base
  models would average two measurements), a cell per mode and task: the mean improvement;
- **expected best of k** (Figure 9), per group, k = 1..n;
- **where the best routes came from**: the training seen running up to each run's best submission
  (``Iteration.observed``: a script written and never run trained nothing), as SFT, RL, SFT then
  RL, other, or none (no valid submission, or no training seen); and how many of the best routes
  with training in them are supervised (SFT alone or first), the paper's observation;
- scaling over time, tokens and submissions (Figures 3 and 7): ``review.scaling``'s charts.

Text, CSV and HTML render from these types (``review.experiment_html``).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from agent2rl_tui.review.adherence import RL_TYPES
from agent2rl_tui.review.codefacts import COPY, SFT, UNKNOWN
from agent2rl_tui.review.compare import Group, GroupKey, ci_text, compare
from agent2rl_tui.review.index import RunSummary
from agent2rl_tui.review.outcome import outcome
from agent2rl_tui.review.report import read_report
from agent2rl_tui.review.report_model import Report
from agent2rl_tui.review.stats import expected_best_of

ROUTE_SFT, ROUTE_RL, ROUTE_BOTH, ROUTE_OTHER, ROUTE_NONE = "SFT", "RL", "SFT then RL", "other", "none"
ROUTES = (ROUTE_SFT, ROUTE_RL, ROUTE_BOTH, ROUTE_OTHER, ROUTE_NONE)


@dataclass(frozen=True)
class RowKey:
    """A row of the table: what a group shares but its task and prompt profile."""

    agent: str
    driver: str
    base_model: str
    mode: str
    eval_limit: int | None

    def label(self) -> str:
        limit = f" · first {self.eval_limit} items" if self.eval_limit is not None else ""
        return f"{self.agent} · {self.driver} · {self.base_model} · {self.mode}{limit}"


def row_key(g: Group) -> RowKey:
    return RowKey(g.agent, g.driver, g.base_model, g.key.mode, g.key.eval_limit)


def column_key(g: Group) -> str:
    return g.task if g.prompt_profile in ("-", "default") else f"{g.task} ({g.prompt_profile})"


@dataclass(frozen=True)
class RunScores:
    """One run's scores at each submission (Figure 5)."""

    run_id: str
    group: str
    baseline: float | None
    scores: list[tuple[int, float | None, str]]
    """(submission id, score, status) in order; a failed submission's score is None."""
    route: str


@dataclass(frozen=True)
class Experiment:
    groups: list[Group]
    rows: list[RowKey]
    columns: list[str]
    cells: dict[tuple[RowKey, str], Group]
    runs: list[RunScores]
    routes: dict[str, dict[str, int]]
    """Per group label, how many runs' best came from each route (``ROUTES``)."""
    heatmaps: dict[str, dict[tuple[str, str], float | None]] = field(default_factory=dict)
    """Per agent x driver x base model: (mode, task) -> mean improvement."""

    def route_totals(self) -> dict[str, int]:
        totals = dict.fromkeys(ROUTES, 0)
        for counts in self.routes.values():
            for route, n in counts.items():
                totals[route] += n
        return totals

    def supervised_share(self) -> tuple[int, int]:
        """(best routes with SFT in them, best routes with training seen): the paper's observation."""
        t = self.route_totals()
        trained = t[ROUTE_SFT] + t[ROUTE_RL] + t[ROUTE_BOTH] + t[ROUTE_OTHER]
        return t[ROUTE_SFT] + t[ROUTE_BOTH], trained

    def modes(self) -> list[str]:
        return sorted({r.mode for r in self.rows}, key=lambda m: (m != "free", m))

    def tasks(self) -> list[str]:
        return sorted({g.task for g in self.groups})


def group_label(g: Group) -> str:
    return f"{column_key(g)} · {row_key(g).label()}"


def best_route(run: RunSummary, report: Report | None) -> str:
    """Where the run's best submission came from: the training seen running up to it (``report``:
    the run's report.json, as read)."""
    if not outcome(run).valid or report is None or report.best is None:
        return ROUTE_NONE
    kinds: list[str] = []
    for it in report.iterations:
        if it.observed is not False and it.train_type not in (COPY, UNKNOWN):
            kind = ROUTE_SFT if it.train_type == SFT else ROUTE_RL if it.train_type in RL_TYPES else ROUTE_OTHER
            if not kinds or kinds[-1] != kind:
                kinds.append(kind)
        if it.submission_id == report.best.submission_id:
            break
    if not kinds:
        return ROUTE_NONE
    if kinds == [ROUTE_SFT] or kinds == [ROUTE_RL]:
        return kinds[0]
    return ROUTE_BOTH if kinds == [ROUTE_SFT, ROUTE_RL] else ROUTE_OTHER


def run_scores(run: RunSummary, label: str) -> RunScores:
    report = read_report(run.path)
    subs = [(s.submission_id, s.score, s.status or "-") for s in (report.submissions if report else [])
            if s.submission_id is not None]
    return RunScores(run.id, label, run.baseline, subs, best_route(run, report))


def build_experiment(runs: list[RunSummary]) -> Experiment:
    groups = compare(runs)
    by_key = {g.key: g for g in groups}
    rows = sorted({row_key(g) for g in groups}, key=lambda r: (r.agent, r.driver, r.base_model, r.mode != "free",
                                                               r.mode, r.eval_limit or 0))
    columns = sorted({column_key(g) for g in groups})
    cells = {(row_key(g), column_key(g)): g for g in groups}
    scores: list[RunScores] = []
    routes: dict[str, dict[str, int]] = {}
    for r in sorted(runs, key=lambda r: (*GroupKey.of(r).sort_key(), r.id)):
        g = by_key[GroupKey.of(r)]
        label = group_label(g)
        counted = outcome(r).counted
        one = run_scores(r, label)
        scores.append(one)
        if counted:
            routes.setdefault(label, dict.fromkeys(ROUTES, 0))[one.route] += 1
    heatmaps: dict[str, dict[tuple[str, str], float | None]] = {}
    for g in groups:
        who = f"{g.agent} · {g.driver} · {g.base_model}" + (f" · first {g.key.eval_limit} items"
                                                           if g.key.eval_limit is not None else "")
        heatmaps.setdefault(who, {})[(g.key.mode, column_key(g))] = g.improvement_mean
    return Experiment(groups, rows, columns, cells, scores, routes, heatmaps)


def best_of_k(g: Group) -> list[tuple[int, float | None]]:
    bests = g.tally.bests
    return [(k, expected_best_of(bests, k)) for k in range(1, len(bests) + 1)]


def cell_text(g: Group | None) -> str:
    """A table cell: mean improvement ± its interval, n, valid rate, cost per run."""
    if g is None:
        return "-"
    mean = "-" if g.improvement_mean is None else f"{g.improvement_mean:+.2f}"
    cost = "" if g.cost_mean is None else f"; ${g.cost_mean:.2f}/run"
    return f"{mean} {ci_text(g.improvement_ci, g.runs)}; n={g.runs}; {g.tally.valid_text()}{cost}"


# -- text and CSV ---------------------------------------------------------------------------------

def render_text(e: Experiment) -> str:
    out = ["# The table: mean improvement [95% interval]; n; valid submissions; cost per run", ""]
    for row in e.rows:
        out.append(row.label())
        for col in e.columns:
            out.append(f"  {col}: {cell_text(e.cells.get((row, col)))}")
    out += ["", "# Mode x task: mean improvement"]
    for who, cells in e.heatmaps.items():
        out.append(who)
        for mode in e.modes():
            values = [(col, cells.get((mode, col))) for col in e.columns if (mode, col) in cells]
            if values:
                out.append(f"  {mode}: " + ", ".join(f"{col} {'-' if v is None else f'{v:+.2f}'}"
                                                     for col, v in values))
    supervised, trained = e.supervised_share()
    out += ["", "# Where the best routes came from (runs counted)"]
    for label, counts in e.routes.items():
        out.append(f"{label}: " + ", ".join(f"{route} {n}" for route, n in counts.items() if n))
    out.append(f"supervised (SFT alone or first): {supervised} of {trained} best routes with training seen")
    out += ["", "# Expected best of k"]
    for g in e.groups:
        shown_k = ", ".join(f"k={k} {'-' if v is None else f'{v:.2f}'}" for k, v in best_of_k(g))
        out.append(f"{group_label(g)}: {shown_k or '-'}")
    out += ["", "# Each run's score at each submission"]
    for r in e.runs:
        shown = ", ".join(f"#{i} {'-' if s is None else f'{s:.2f}'}" for i, s, _ in r.scores)
        base = "-" if r.baseline is None else f"{r.baseline:.2f}"
        out.append(f"{r.run_id} ({r.group}): {shown or 'no submission'}; best route {r.route}; baseline {base}")
    return "\n".join(out) + "\n"


CSV_FILES = ("table.csv", "heatmap.csv", "routes.csv", "best_of_k.csv", "submissions.csv")


def write_csvs(e: Experiment, out: Path) -> list[Path]:
    """The tables as CSV files in ``out``, one per table (``CSV_FILES``)."""
    out.mkdir(parents=True, exist_ok=True)
    tables: dict[str, tuple[list[str], list[list[object]]]] = {
        "table.csv": (["agent", "driver", "base_model", "mode", "eval_limit", "task", "runs", "valid",
                       "improvement_mean", "ci95_low", "ci95_high", "best_mean", "cost_per_run_usd"],
                      [[row.agent, row.driver, row.base_model, row.mode, row.eval_limit or "", col, g.runs,
                        g.tally.valid, g.improvement_mean, *(g.improvement_ci or ("", "")), g.best_mean,
                        "" if g.cost_mean is None else g.cost_mean]
                       for (row, col), g in e.cells.items()]),
        "heatmap.csv": (["who", "mode", "task", "improvement_mean"],
                        [[who, mode, col, value] for who, cells in e.heatmaps.items()
                         for (mode, col), value in cells.items()]),
        "routes.csv": (["group", *ROUTES], [[label, *(counts[r] for r in ROUTES)] for label, counts in e.routes.items()]),
        "best_of_k.csv": (["group", "k", "expected_best"],
                          [[group_label(g), k, v] for g in e.groups for k, v in best_of_k(g)]),
        "submissions.csv": (["run_id", "group", "baseline", "submission", "score", "status", "best_route"],
                            [[r.run_id, r.group, r.baseline, i, s, status, r.route]
                             for r in e.runs for i, s, status in r.scores]),
    }
    written = []
    for name, (header, rows) in tables.items():
        path = out / name
        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(header)
            writer.writerows(["" if v is None else v for v in row] for row in rows)
        written.append(path)
    return written
