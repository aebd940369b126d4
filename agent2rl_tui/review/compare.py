"""Comparing runs: group what was run alike, mean and spread over repeated runs.

A group is one task x prompt profile x agent x driver x base model (told apart by its weights,
not its folder's name) x mode x eval limit: runs that differ in any of them are different
measurements and never share a mean. Every ended run whose agent started counts, a run without a
valid submission at 0 improvement (``review.outcome``), and the group's valid-submission rate
stands beside its mean.

Runs graded on the same eval items (one ``--eval-seed``) are also compared two by two, best
submission against best submission, item by item (``paired_bests``): a difference between two
runs can then be told from noise as a submission's is from the baseline's.

The benchmark's question is about agent stacks, not single runs, and single runs vary a lot
(the paper reports large run-to-run differences on interactive tasks). Repeated runs of one
stack are summarised as mean +- sample standard deviation, a bootstrap 95% interval of the
mean improvement and of the mean best score, and the expected best of k runs
(``review.stats``; no interval below three runs). Runs graded under different prompt
profiles (how the grader asks and reads answers) are different measurements: they never share
a group, and ``profile_notes`` says so wherever one task appears under several.
"""

from __future__ import annotations

import hashlib
import itertools
import statistics
from dataclasses import dataclass
from pathlib import Path

from agent2rl_tui.record.results import ItemRow
from agent2rl_tui.record.store import RunStatus, RunStore, StoreError
from agent2rl_tui.review.index import RunSummary
from agent2rl_tui.review.items import significance
from agent2rl_tui.review.outcome import Tally, tally
from agent2rl_tui.review.run_usage import NONE
from agent2rl_tui.review.runview import read_rows
from agent2rl_tui.review.significance import Comparison
from agent2rl_tui.review.stats import MIN_RUNS_FOR_INTERVAL, TOO_FEW_FOR_INTERVAL, bootstrap_ci, expected_best_of


@dataclass(frozen=True)
class GroupKey:
    """What a group's runs share: anything that differs makes another measurement."""

    task: str
    prompt_profile: str
    agent: str
    driver: str
    base_model: str
    """``RunSummary.base_model_key``: the weights' hash, else the folder's name."""
    mode: str
    eval_limit: int | None

    @staticmethod
    def of(run: RunSummary) -> GroupKey:
        return GroupKey(run.task, run.prompt_profile or "-", run.agent, run.driver or "-", run.base_model_key,
                        run.mode, run.eval_limit)

    def sort_key(self) -> tuple[str, str, str, str, str, str, int]:
        return (self.task, self.prompt_profile, self.agent, self.driver, self.base_model, self.mode,
                -1 if self.eval_limit is None else self.eval_limit)


@dataclass(frozen=True)
class Group:
    key: GroupKey
    base_model_names: tuple[str, ...]
    """The folder names the group's base model went by (one model may be copied under two)."""
    tally: Tally
    best_mean: float | None
    best_sd: float | None
    improvement_mean: float | None
    improvement_sd: float | None
    submissions_mean: float
    finished: int
    best_ci: tuple[float, float] | None = None
    improvement_ci: tuple[float, float] | None = None
    best_of: dict[int, float | None] | None = None
    """Expected best score of k runs, for k = 1, 2, 3."""
    tokens_mean: float | None = None
    """Mean tokens (input + output) per run, of the runs that recorded any (``review.run_usage``)."""
    cost_mean: float | None = None
    """Mean cost per run, of the runs whose cost is known (``cost_runs`` of them)."""
    cost_runs: int = 0
    tokens_source: str = "-"
    """Where the tokens come from: metered, from the agent's stream, or mixed."""
    members: int = 0
    """Every run of the group, counted or not."""

    @property
    def task(self) -> str:
        return self.key.task

    @property
    def prompt_profile(self) -> str:
        return self.key.prompt_profile

    @property
    def agent(self) -> str:
        return self.key.agent

    @property
    def driver(self) -> str:
        return self.key.driver

    @property
    def runs(self) -> int:
        """The runs the statistics count (``review.outcome``)."""
        return len(self.tally.counted)

    @property
    def base_model(self) -> str:
        """The base model as a reader knows it: its folder name(s) and, where hashed, its weights."""
        names = ", ".join(self.base_model_names)
        return f"{names} ({self.key.base_model})" if self.key.base_model.startswith("weights") else names

    def setting_text(self) -> str:
        """Mode and eval limit, the two settings a group's title leaves out unless they are not the default."""
        parts = [f"mode {self.key.mode}"]
        if self.key.eval_limit is not None:
            parts.append(f"first {self.key.eval_limit} eval items")
        return ", ".join(parts)


def _mean_sd(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def compare(runs: list[RunSummary]) -> list[Group]:
    groups: dict[GroupKey, list[RunSummary]] = {}
    for r in runs:
        groups.setdefault(GroupKey.of(r), []).append(r)
    out = []
    for key, members in sorted(groups.items(), key=lambda kv: kv[0].sort_key()):
        counted = tally(members)
        bests, improvements = counted.bests, counted.improvements
        best_mean, best_sd = _mean_sd(bests)
        imp_mean, imp_sd = _mean_sd(improvements)
        usages = [r.usage for r in members if r.usage is not None and r.usage.source != NONE]
        costs = [u.cost_usd for u in usages if u.cost_usd is not None and not u.unpriced_calls]
        sources = sorted({u.label for u in usages})
        out.append(Group(key, tuple(sorted({r.base_model for r in members})), counted, best_mean, best_sd,
                         imp_mean, imp_sd, statistics.fmean(r.n_submissions for r in members),
                         sum(1 for r in members if r.status == RunStatus.FINISHED),
                         bootstrap_ci(bests), bootstrap_ci(improvements),
                         {k: expected_best_of(bests, k) for k in (1, 2, 3)},
                         statistics.fmean(u.tokens_in + u.tokens_out for u in usages) if usages else None,
                         statistics.fmean(costs) if costs else None, len(costs),
                         sources[0] if len(sources) == 1 else ("mixed: " + ", ".join(sources) if sources else "-"),
                         len(members)))
    return out


def usage_text(g: Group) -> str:
    """A group's mean tokens and cost per run, and their source."""
    if g.tokens_mean is None:
        return "-"
    cost = f", ${g.cost_mean:.4f}" + (f" ({g.cost_runs} of {g.runs} runs priced)" if g.cost_runs < g.runs else "") \
        if g.cost_mean is not None else ", cost unknown"
    return f"{g.tokens_mean:,.0f} tokens{cost} per run ({g.tokens_source})"


def ci_text(ci: tuple[float, float] | None, runs: int | None = None) -> str:
    """An interval as text; with ``runs`` below three, why there is none."""
    if ci is None:
        return TOO_FEW_FOR_INTERVAL if runs is not None and runs < MIN_RUNS_FOR_INTERVAL else "-"
    return f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def profile_notes(groups: list[Group]) -> list[str]:
    """One line per task whose runs were graded under more than one prompt profile."""
    by_task: dict[str, set[str]] = {}
    for g in groups:
        by_task.setdefault(g.task, set()).add(g.prompt_profile)
    return [f"{task}: runs under prompt profiles {', '.join(sorted(profiles))} are different measurements "
            "(other prompts and answer rules); compare scores within one profile"
            for task, profiles in sorted(by_task.items()) if len(profiles) > 1]


MAX_PAIRS = 45
"""Two by two: ten runs on the same items make 45 pairs; past that the list says how many more."""


@dataclass(frozen=True)
class RunPair:
    """Run ``second``'s best submission against run ``first``'s, on the eval items both scored."""

    task: str
    prompt_profile: str
    first: str
    second: str
    first_best: float | None
    second_best: float | None
    comparison: Comparison


@dataclass(frozen=True)
class Pairing:
    pairs: list[RunPair]
    unpaired: int
    """Runs with a scored best that shared their items with no other run of their task (another eval draw)."""
    more: int = 0
    """Pairs left out past ``MAX_PAIRS``."""


def _best_items(path: Path) -> tuple[float | None, list[ItemRow]] | None:
    try:
        with RunStore.of_run(path) as store:
            best = store.best()
    except StoreError:
        return None
    if best is None:
        return None
    items = read_rows(path, best.id)
    return (best.score, items) if items else None


def _draw(items: list[ItemRow]) -> str:
    """Which eval items these are: a hash of their indices and prompts (one eval seed, one draw)."""
    key = "\n".join(f"{i.index}\t{i.prompt[:2000]}" for i in sorted(items, key=lambda i: i.index))
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def paired_bests(runs: list[RunSummary], max_pairs: int = MAX_PAIRS) -> Pairing:
    """Every two runs of one task and prompt profile graded on the same items, best against best."""
    read: dict[tuple[str, str, str], list[tuple[RunSummary, float | None, list[ItemRow]]]] = {}
    for r in runs:
        got = _best_items(r.path)
        if got is not None:
            read.setdefault((r.task, r.prompt_profile or "-", _draw(got[1])), []).append((r, *got))
    pairs: list[RunPair] = []
    unpaired = more = 0
    for (task, profile, _), members in sorted(read.items(), key=lambda kv: kv[0][:2]):
        if len(members) < 2:
            unpaired += 1
            continue
        for (a, a_best, a_items), (b, b_best, b_items) in itertools.combinations(members, 2):
            if len(pairs) >= max_pairs:
                more += 1
                continue
            c = significance(b_items, a_items)
            if c is not None:
                pairs.append(RunPair(task, profile, a.id, b.id, a_best, b_best, c))
    return Pairing(pairs, unpaired, more)


def pair_text(p: RunPair) -> str:
    return f"{p.second} vs {p.first}: {p.comparison.describe()}"
