"""The one stop worker: both Runs and Run stop a run (or close a lost run's record) with ``s``.

Stopping signals the supervisor and may wait on the record, so it runs in a thread worker;
when it is done it posts ``RunStopped`` and each screen says so in its own words.
"""

from __future__ import annotations

from pathlib import Path

from textual import work
from textual.screen import Screen

from agent2rl_tui.run.lifecycle import stop_run
from agent2rl_tui.ui.messages import RunStopped


class StoppingScreen(Screen[None]):
    """A screen that can stop runs; it handles ``RunStopped`` itself."""

    @work(thread=True, group="stop", exit_on_error=False)
    def stop_in_background(self, run_dir: Path) -> None:
        self.post_message(RunStopped(run_dir, stop_run(run_dir, wait_s=0)))
