"""A yes/no modal for actions that cannot be undone (stopping a run)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from agent2rl_tui.record.store import ACTIVE_STATUSES, RunStatus
from agent2rl_tui.ui.format import literal


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="yes"),
        Binding("n,escape", "answer(False)", "No", id="no"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm"):
            yield Static(literal(self.question), id="question")
            with Horizontal(id="confirm-buttons"):
                yield Button("Yes (y)", variant="error", id="yes")
                yield Button("No (n)", variant="primary", id="no")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


def stop_question(run_id: str, status: str, ended_at: float | None) -> str | None:
    """What ``s`` asks before stopping a run, the same on Runs and on Run; None: nothing to stop.

    An active run is stopped through its supervisor; a lost run whose record is still open
    (its supervisor died without closing it) has its record closed. Both go through
    ``run.lifecycle.stop_run``, which reconciles a run whose supervisor is gone.
    """
    if status == RunStatus.LOST and ended_at is None:
        return (f"Close the record of lost run {run_id}?\nIts leftover processes are ended and the report "
                "is written.")
    if status in ACTIVE_STATUSES:
        return f"Stop run {run_id}?\nThe agent is ended, queued evaluations finish, and the report is written."
    return None
