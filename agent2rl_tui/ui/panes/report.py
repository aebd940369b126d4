"""Report: the run's result, process metrics, code-revision and transcript totals, machine vitals.

Built from the record as it stands (so it works during a live run too); the agent's
prompt is shown at the end, as the template filled in for this run. It is built in a
thread worker and handed over as a ``ReportBuilt`` message.
"""

from __future__ import annotations

from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Markdown

from agent2rl_tui.review.report import build_report, render_markdown
from agent2rl_tui.review.runview import RunView
from agent2rl_tui.review.samples import latest_samples
from agent2rl_tui.ui.format import fmt_bytes
from agent2rl_tui.ui.messages import ReportBuilt
from agent2rl_tui.util.inert import visible


class ReportPane(VerticalScroll):
    def __init__(self, run_dir: Path) -> None:
        super().__init__(id="report-pane")
        self.run_dir = run_dir

    def compose(self) -> ComposeResult:
        yield Markdown("building the report…", id="report-md")

    def update_view(self, view: RunView) -> None:
        self.build()

    @work(thread=True, exclusive=True, group="report", exit_on_error=False)
    def build(self) -> None:
        text = render_markdown(build_report(self.run_dir))
        samples = latest_samples(self.run_dir)
        if samples:
            s = samples[0]
            gpus = ", ".join(f"GPU {g['index']} {g['util_pct']:.0f}% {fmt_bytes(g['mem_used'])}/"
                             f"{fmt_bytes(g['mem_total'])}" for g in s["gpus"]) or s["gpu_note"] or "no GPU"
            text += (f"\n## Latest vitals\n- CPU {s['cpu_pct'] or 0:.0f}%, memory {fmt_bytes(s['mem_used'])} of "
                     f"{fmt_bytes(s['mem_total'])}, disk free {fmt_bytes(s['disk_free'])}\n"
                     f"- agent: {s['agent_procs']} processes, {fmt_bytes(s['agent_rss'])} resident\n- {gpus}\n")
        prompt = self.run_dir / "prompt.md"
        if prompt.exists():
            text += "\n## The agent's prompt\n\n```text\n" + visible(prompt.read_text(encoding="utf-8")[:20000]) + "\n```\n"
        self.post_message(ReportBuilt(text))

    @on(ReportBuilt)
    def report_built(self, message: ReportBuilt) -> None:
        self.query_one("#report-md", Markdown).update(message.text)
