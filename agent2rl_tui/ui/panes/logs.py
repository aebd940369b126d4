"""Logs: the agent's, the grader's and the supervisor's, tailed from the end (never read whole)."""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Static

from agent2rl_tui.ui.widgets.log_view import LogView

LOGS = {"agent": "agent.log", "grader": "grader.log", "supervisor": "supervisor.log"}


class LogsPane(Vertical):
    BINDINGS = [
        Binding("a", "show('agent')", "Agent log", id="log-agent"),
        Binding("g", "show('grader')", "Grader log", id="log-grader"),
        Binding("u", "show('supervisor')", "Supervisor log", id="log-supervisor"),
    ]

    def __init__(self, run_dir: Path) -> None:
        super().__init__(id="logs-pane")
        self.run_dir = run_dir
        self.which = "agent"

    def compose(self) -> ComposeResult:
        yield Static("", id="log-title")
        yield LogView(self.run_dir / "logs" / LOGS["agent"], follow=True, id="log")

    def on_mount(self) -> None:
        self._title()

    def _title(self) -> None:
        names = "  ".join(f"[b]{n}[/b]" if n == self.which else n for n in LOGS)
        self.query_one("#log-title", Static).update(f"{names}   (a / g / u to switch, f to follow)")

    def action_show(self, which: str) -> None:
        self.which = which
        self.query_one(LogView).open(self.run_dir / "logs" / LOGS[which])
        self._title()

    def update_view(self, view: object) -> None:
        """The log view follows its file on its own."""
