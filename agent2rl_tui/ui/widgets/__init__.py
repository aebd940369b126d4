"""Reusable widgets of the TUI: Line-API views that draw only what is on screen."""

from agent2rl_tui.ui.widgets.diff_view import DiffView
from agent2rl_tui.ui.widgets.log_view import LogView

__all__ = ["DiffView", "LogView"]
