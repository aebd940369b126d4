"""The Textual application: Runs (home) -> Run, New run, Compare; keyboard first.

The app only reads run folders (live and finished runs are one code path) and acts through
``agent2rl_tui.run`` (start a run, signal a stop). Screens get the clock and the refresh
interval when made and ask for a run's screen with a message (``OpenRun``). Every binding
of the current screen is also a command in the palette (ctrl+p), and ``?`` shows the keys
panel.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

from textual import on, work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.dom import DOMNode
from textual.screen import Screen

from agent2rl_tui.record.root import default_root
from agent2rl_tui.record.watch import RunWatch
from agent2rl_tui.review.runview import load_run_view
from agent2rl_tui.ui.messages import OpenRun, RunOpened, RunOpenFailed
from agent2rl_tui.util.inert import one_line


class Agent2RLApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "agent2rl-tui"
    SUB_TITLE = "Agent² RL-Bench runs"
    BINDINGS = [
        Binding("question_mark", "toggle_keys", "Keys", key_display="?", id="keys"),
        Binding("ctrl+p", "command_palette", "Commands", show=False),
        Binding("q", "quit", "Quit", id="quit"),
    ]

    def __init__(self, root: Path | None = None, open_run: Path | None = None,
                 clock: Callable[[], float] = time.time, refresh_s: float = 2.0,
                 open_campaign: Path | None = None) -> None:
        super().__init__()
        self.root = (root or default_root()).resolve()
        self.open_run = open_run
        self.open_campaign = open_campaign
        self.clock = clock
        self.refresh_s = refresh_s

    def on_mount(self) -> None:
        if self.open_run is not None:  # Runs goes under it when the run is read: one paint, not two
            self.open_run_screen(self.open_run)
        else:
            self.push_runs_screen()
            if self.open_campaign is not None:
                from agent2rl_tui.ui.screens.campaign import CampaignScreen

                self.push_screen(CampaignScreen(self.open_campaign, refresh_s=self.refresh_s))

    def push_runs_screen(self) -> None:
        from agent2rl_tui.ui.screens.runs import RunsScreen

        self.push_screen(RunsScreen(self.root, clock=self.clock, refresh_s=self.refresh_s))

    @work(thread=True, exclusive=True, group="open-run", exit_on_error=False)
    def open_run_screen(self, run_dir: Path) -> None:
        """Read the run off the UI thread; its screen is pushed when the view arrives."""
        watch = RunWatch(run_dir)  # first: a write from here on is seen as a change
        try:
            self.post_message(RunOpened(load_run_view(Path(run_dir).resolve()), watch))
        except Exception as exc:  # noqa: BLE001 - any unreadable folder: say so, stay usable
            watch.close()
            self.post_message(RunOpenFailed(Path(run_dir), f"{type(exc).__name__}: {exc}"))

    @on(RunOpenFailed)
    def run_open_failed(self, message: RunOpenFailed) -> None:
        if len(self.screen_stack) <= 1:
            self.push_runs_screen()
        self.notify(one_line(f"cannot open {message.run_dir}: {message.error}"), severity="error", timeout=10,
                    markup=False)

    @on(RunOpened)
    def run_opened(self, message: RunOpened) -> None:
        from agent2rl_tui.ui.screens.run import RunScreen

        if len(self.screen_stack) <= 1:
            self.push_runs_screen()
        self.push_screen(RunScreen(message.view, message.watch, clock=self.clock))

    @on(OpenRun)
    def open_run_asked(self, message: OpenRun) -> None:
        self.open_run_screen(message.run_dir)

    def action_toggle_keys(self) -> None:
        if self.screen.query("HelpPanel"):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """The palette offers every action bound on the current screen, with its key.

        Each title once: Textual's own commands that a binding also offers (Quit, Keys)
        are given with the binding's key instead.
        """
        seen: set[str] = set()
        titles: set[str] = set()
        ours: list[SystemCommand] = []
        # The screen's own bindings first (a focused table may shadow one, like enter),
        # then whatever the focused widget and its panes add.
        candidates: list[tuple[str, DOMNode, Binding]] = [
            (b.key, screen, b) for b in screen.BINDINGS
            if isinstance(b, Binding) and screen.check_action(b.action, ()) is not False]
        candidates += [(key, a.node, a.binding) for key, a in screen.active_bindings.items()]
        for key, node, binding in candidates:
            if not binding.description or binding.action in seen or binding.action == "command_palette" \
                    or binding.description in titles:
                continue
            seen.add(binding.action)
            titles.add(binding.description)
            ours.append(SystemCommand(binding.description, f"key {binding.key_display or key}",
                                      partial(self.run_action, binding.action, node)))
        yield from (c for c in super().get_system_commands(screen) if c.title not in titles)
        yield from ours
