"""The Run screen's header: who and what, the result so far, and the budget as a bar.

It ticks once a second while the run is live (elapsed, remaining, bar) from the clock the
app was given, so a frozen clock makes it deterministic for snapshot tests.
"""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.widgets import Static

from agent2rl_tui.record.store import BASELINE_ID, RunStatus
from agent2rl_tui.review.eval_label import eval_label
from agent2rl_tui.review.runview import RunView
from agent2rl_tui.ui.format import fmt_score, status_text
from agent2rl_tui.util.inert import one_line
from agent2rl_tui.util.timeutil import human_duration, iso

BAR_WIDTH = 40


def budget_bar(fraction: float, width: int = BAR_WIDTH) -> Text:
    filled = round(max(0.0, min(1.0, fraction)) * width)
    style = "green" if fraction < 0.75 else ("yellow" if fraction < 0.95 else "red")
    return Text.assemble(("█" * filled, style), ("░" * (width - filled), "dim"))


class BudgetHeader(Static):
    DEFAULT_CSS = """
    BudgetHeader { height: 3; padding: 0 1; background: $boost; }
    """

    def show(self, view: RunView, t: float) -> None:
        run = view.run
        b = view.budget(t)
        best = view.best
        profile = view.prompt_profile
        config = run.config
        who = Text.assemble(
            status_text(view.status), "  ",
            ("task ", "dim"), one_line(run.task),
            *((("  prompts ", "dim"), one_line(profile)) if profile not in (None, "default") else ()),
            *((("  decoding ", "dim"), one_line(view.decoding_row)) if view.decoding_row else ()),
            ("  agent ", "dim"), one_line(run.agent),
            ("  driver ", "dim"), one_line(run.driver or "-"), ("  base ", "dim"), one_line(run.base_model),
            ("  ", "dim"), (eval_label(config.eval_limit, config.eval_seed,
                                       view.baseline.n_items if view.baseline else None), "dim"),
        )
        delta = (best.score - view.baseline_score
                 if best and best.score is not None and view.baseline_score is not None else None)
        result = Text.assemble(
            ("baseline ", "dim"), fmt_score(view.baseline_score),
            ("  best ", "dim"), (fmt_score(best.score if best else None), "bold"),
            (f" (#{best.id})" if best else "", "dim"),
            ("  Δ ", "dim"), (fmt_score(delta, signed=True), "bold green" if delta and delta > 0 else ""),
            ("  ·  ", "dim"), f"{len(view.submissions)} submissions, {len(view.revisions)} revisions",
        )
        if view.status == RunStatus.LOST and run.ended_at is None:  # lost, its record not closed yet
            since = f" at {iso(run.heartbeat_at)[11:19]} UTC" if run.heartbeat_at else ""
            result.append(f"  ·  its supervisor stopped{since} without closing the run: s closes its record",
                          style="red")
        elif run.error:
            result.append(f"  ·  {one_line(run.error[:80])}", style="red")
        scoring = ""
        if view.progress is not None:
            sub_id, progress = view.progress
            scoring = f"scoring {'the baseline' if sub_id == BASELINE_ID else f'#{sub_id}'}: {progress.text()}"
        if b.started:
            budget = Text.assemble(
                ("budget ", "dim"), budget_bar(b.fraction), " ",
                f"{human_duration(b.elapsed_s)} / {human_duration(b.total_s)}",
                ("  ·  ", "dim"), (f"{human_duration(b.remaining_s)} left" if b.live else "ended"),
                ("  ·  scoring ", "dim"), human_duration(b.scoring_s),
            )
        else:
            budget = Text(f"budget {human_duration(b.total_s)} (not started: "
                          + (scoring or "preparing, or scoring the baseline") + ")", style="dim")
        if scoring and b.started:
            budget.append(f"  ·  {scoring}", style="dim")
        self.update(Group(who, result, budget))
