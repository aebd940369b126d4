"""Scaling across runs: a run's best improvement against time, tokens and submissions, and the
expected best improvement of k runs (the paper's Figures 3, 7 and 9).

``run_points`` reads one run.db: for each scored agent submission, the time since the budget's
start, the tokens the agent had used by then (the rule of ``review.run_usage``: the meter's calls
when the run was metered, else the transcript's steps, else unknown), how many submissions it
had made, and the best score so far against the baseline. ``read_scaling`` does so for runs
grouped as ``review.compare`` groups them; ``curves`` turns that into the lines of one chart,
which the CLI writes as SVG (``scaling_svgs``, ``write_plots``) and the TUI's Compare screen
draws in the terminal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent2rl_tui.record.store import RunStore, SubStatus, scored_score
from agent2rl_tui.review.compare import GroupKey
from agent2rl_tui.review.index import RunSummary
from agent2rl_tui.review.outcome import outcome
from agent2rl_tui.review.plots import PALETTE, Chart, Series, render
from agent2rl_tui.review.run_usage import METERED, TRANSCRIPT, run_usage
from agent2rl_tui.review.stats import expected_best_of

AXES = ("time", "tokens", "submissions", "k")
"""The x axes of the scaling charts: improvement vs time, tokens, submissions; expected best vs k."""
AXIS_LABELS = {"time": "minutes since the budget's start", "tokens": "tokens used by the agent (in + out)",
               "submissions": "submissions made", "k": "k (runs)"}
FILES = {"time": "improvement-vs-time.svg", "tokens": "improvement-vs-tokens.svg",
         "submissions": "improvement-vs-submissions.svg", "k": "expected-best-vs-k.svg"}


@dataclass(frozen=True)
class Point:
    """A run at one of its scored agent submissions."""

    submission_id: int
    elapsed_s: float
    tokens: int | None
    """Input + output tokens the agent had used when it submitted; None where none were recorded."""
    submissions: int
    """Agent submissions taken so far (refusals not counted), this one included."""
    score: float
    best: float
    """The best score so far."""
    improvement: float | None
    """The best so far less the baseline; None without a scored baseline."""


@dataclass(frozen=True)
class RunCurve:
    run_id: str
    points: list[Point]
    final_improvement: float | None


def run_points(run_dir: Path) -> list[Point]:
    with RunStore.of_run(run_dir) as store:
        start = store.run().budget_start
        if start is None:
            return []
        source = run_usage(store).source
        base = scored_score(store.baseline())
        out: list[Point] = []
        taken, best = 0, None
        for sub in store.submissions(kind="agent"):
            if sub.status != SubStatus.REJECTED:
                taken += 1
            score = scored_score(sub)
            if score is None:
                continue
            best = score if best is None else max(best, score)
            out.append(Point(sub.id, sub.received_at - start, _tokens(store, source, sub.received_at), taken,
                             score, best, None if base is None else best - base))
    return out


def _tokens(store: RunStore, source: str, at: float) -> int | None:
    if source == METERED:
        sql = "SELECT COALESCE(SUM(input_tokens), 0) + COALESCE(SUM(output_tokens), 0) FROM llm_calls WHERE at <= ?"
    elif source == TRANSCRIPT:
        sql = "SELECT COALESCE(SUM(tokens_in), 0) + COALESCE(SUM(tokens_out), 0) FROM steps WHERE at <= ?"
    else:
        return None
    return int(store.conn.execute(sql, (at,)).fetchone()[0])


def group_label(r: RunSummary) -> str:
    """A run's group, as ``review.compare`` groups runs (``GroupKey``): task x prompt profile x agent x
    driver x base model (with its weights' hash) x mode x eval limit, the last two only where set."""
    key = GroupKey.of(r)
    base = f"{r.base_model} ({key.base_model})" if r.base_weights else r.base_model
    extra = ([f"mode {key.mode}"] if key.mode != "free" else []) \
        + ([f"first {key.eval_limit} items"] if key.eval_limit is not None else [])
    return " · ".join([r.task, r.prompt_profile or "-", r.agent, r.driver or "-", base, *extra])


def group_runs(runs: Sequence[RunSummary]) -> dict[str, list[RunSummary]]:
    out: dict[str, list[RunSummary]] = {}
    for r in sorted(runs, key=lambda r: (*GroupKey.of(r).sort_key(), r.id)):
        out.setdefault(group_label(r), []).append(r)
    return out


def read_scaling(groups: Mapping[str, Sequence[RunSummary]]) -> dict[str, list[RunCurve]]:
    """Every run's points, by group (one run.db read per run: call it off the UI's thread)."""
    return {label: [RunCurve(r.id, run_points(r.path), outcome(r).improvement) for r in members]
            for label, members in groups.items()}


def curves(scaling: Mapping[str, Sequence[RunCurve]], axis: str) -> dict[str, list[tuple[str, list[tuple[float, float]]]]]:
    """The lines of one chart, by group: (run id, [(x, best improvement)]) per run for time
    (minutes), tokens and submissions; for ``k``, one line per group: (k, expected best
    improvement of k runs), k = 1..n over the runs' final improvements."""
    out: dict[str, list[tuple[str, list[tuple[float, float]]]]] = {}
    for label, runs in scaling.items():
        if axis == "k":
            finals = [c.final_improvement for c in runs if c.final_improvement is not None]
            line = [(float(k), e) for k in range(1, len(finals) + 1) if (e := expected_best_of(finals, k)) is not None]
            out[label] = [(label, line)] if line else []
            continue
        lines = []
        for c in runs:
            xy = [(_x(p, axis), p.improvement) for p in c.points]
            line = [(x, y) for x, y in xy if x is not None and y is not None]
            if line:
                lines.append((c.run_id, line))
        out[label] = lines
    return out


def _x(p: Point, axis: str) -> float | None:
    if axis == "time":
        return p.elapsed_s / 60
    if axis == "tokens":
        return None if p.tokens is None else float(p.tokens)
    return float(p.submissions)


TITLES = {"time": "best improvement over the baseline vs time", "tokens": "best improvement vs tokens",
          "submissions": "best improvement vs submissions", "k": "expected best improvement of k runs"}


def scaling_chart(scaling: Mapping[str, Sequence[RunCurve]], axis: str) -> Chart:
    lines = curves(scaling, axis)
    colours = {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(scaling)}
    series = [Series(xy, colours[label], run_id, step=axis != "k", markers=True)
              for label, runs in lines.items() for run_id, xy in runs]
    n_runs = sum(len(runs) for runs in scaling.values())
    drawn = sum(len(runs) for runs in lines.values())
    notes = [] if axis == "k" or drawn == n_runs else [f"{n_runs - drawn} of {n_runs} runs have no points here"]
    return Chart(TITLES[axis], AXIS_LABELS[axis], "expected best improvement" if axis == "k" else "best improvement",
                 series=series, legend=[(label, colours[label]) for label in scaling], notes=notes,
                 hlines=[(0.0, "baseline", "#999")], xmin=1.0 if axis == "k" else 0.0,
                 integer_x=axis in ("k", "submissions"))


def scaling_svgs(groups: Mapping[str, Sequence[RunSummary]]) -> dict[str, str]:
    """The four scaling charts as SVG, by file name (``FILES``), of runs grouped by ``group_runs``."""
    scaling = read_scaling(groups)
    return {FILES[axis]: render(scaling_chart(scaling, axis)) for axis in AXES}


def write_plots(out_dir: Path, runs: Sequence[RunSummary]) -> list[Path]:
    """The scaling charts of ``runs`` in ``out_dir``; the paths written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, svg in scaling_svgs(group_runs(runs)).items():
        (out_dir / name).write_text(svg, encoding="utf-8")
        paths.append(out_dir / name)
    return paths
