"""The Runs screen: every run under the root, sortable, filterable, refreshed while live.

Summaries are read in a thread worker; a refresh re-reads only the runs whose record
changed (``record.watch.stamp``) or that are still active (their status depends on the heartbeat's age).
One rule for keys: on the table a letter is an action (the footer lists them) and ``/``
opens the filter, which then takes every key typed as text until enter (which opens the
highlighted run) or escape. Typing straight into the table once meant "filter" for some
letters and "act" for others ("gsm" opened Campaigns, and "stopped" would ask to stop a run);
a letter that is no action now says to press ``/`` instead of guessing. A header click or ``o``
sorts; space marks runs for Compare.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.events import Key
from textual.widgets import Footer, Header, Input, Static

from agent2rl_tui.record.store import ACTIVE_STATUSES
from agent2rl_tui.record.watch import Stamp, stamp
from agent2rl_tui.review.index import RunSummary, run_folders, summarize, summarize_many
from agent2rl_tui.ui.format import fmt_score, fmt_time, literal_line, status_text
from agent2rl_tui.ui.messages import OpenRun, RunsLoaded, RunStopped
from agent2rl_tui.ui.screens.stop import StoppingScreen
from agent2rl_tui.ui.widgets.virtual_table import Column, VirtualTable
from agent2rl_tui.util.inert import one_line
from agent2rl_tui.util.timeutil import human_duration

FIRST_BATCH = 60  # runs read before the first paint: more than a screen holds
COLUMNS = [  # sort key, column
    ("mark", Column(" ", 1)),
    ("status", Column("status", 9)),
    ("task", Column("task", 10)),
    ("agent", Column("agent", 12)),
    ("driver", Column("driver", 18)),
    ("base", Column("base model", 14)),
    ("baseline", Column("baseline", 8, right=True)),
    ("best", Column("best", 7, right=True)),
    ("delta", Column("Δ", 7, right=True)),
    ("subs", Column("subs", 4, right=True)),
    ("revs", Column("revs", 5, right=True)),
    ("used", Column("budget used", 17)),
    ("started", Column("started", 16)),
    ("flags", Column("flags", 27)),
    ("id", Column("run", 0)),
]
SORT_KEYS = {
    "status": lambda r: r.status, "task": lambda r: r.task, "agent": lambda r: r.agent,
    "driver": lambda r: r.driver or "", "base": lambda r: r.base_model,
    "baseline": lambda r: (r.baseline is None, r.baseline or 0.0), "best": lambda r: (r.best is None, r.best or 0.0),
    "delta": lambda r: (r.improvement is None, r.improvement or 0.0), "subs": lambda r: r.n_submissions,
    "revs": lambda r: r.n_revisions, "used": lambda r: r.budget_used_s or 0.0, "started": lambda r: r.created_at,
    "mark": lambda r: r.created_at, "id": lambda r: r.id, "flags": lambda r: r.flags,
}


SORT = Binding.Group("Sort")


class RunsTable(VirtualTable):
    """The runs list: enter (open the run) is shown in the footer, not shadowed unseen."""

    BINDINGS = [Binding("enter", "select", "Open", id="runs-open")]


class RunsScreen(StoppingScreen):
    BINDINGS = [
        Binding("enter", "open", "Open", id="open"),
        Binding("n", "new_run", "New run", id="new"),
        Binding("s", "stop", "Stop", id="stop"),
        Binding("space", "mark", "Mark", id="mark"),
        Binding("c", "compare", "Compare", id="compare"),
        Binding("g", "campaigns", "Campaigns", id="campaigns"),
        Binding("o", "sort_next", "Sort", id="sort", group=SORT),
        Binding("O", "sort_reverse", "Reverse sort", id="sort-reverse", group=SORT),
        Binding("slash", "filter", "Filter", key_display="/", id="filter"),
        # Shown (and active) only while there is a filter to clear or the filter has focus.
        Binding("escape", "clear_filter", "Clear filter", id="clear-filter"),
        Binding("ctrl+r", "reload", "Refresh", id="reload"),
    ]

    def __init__(self, root: Path, *, clock: Callable[[], float] = time.time, refresh_s: float = 2.0) -> None:
        super().__init__()
        self.root = root
        self.clock = clock
        self.refresh_s = refresh_s
        self.runs: dict[str, RunSummary] = {}
        self.stamps: dict[Path, Stamp] = {}
        self.marked: set[str] = set()
        self.sort_column = "started"
        self.sort_reverse = True
        self.filter_text = ""
        self.shown: list[RunSummary] = []
        self.loaded = False  # something to show
        self.complete = False  # every run read

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(placeholder="press / to filter runs by task, agent, driver, status or id", id="filter",
                    select_on_focus=False)
        yield RunsTable([c for _, c in COLUMNS], id="runs")
        yield Static("", id="runs-status")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = one_line(str(self.root))
        self.query_one("#runs", VirtualTable).focus()
        self.load_all()
        self.set_interval(self.refresh_s, self.refresh_runs)

    # -- loading ----------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="runs-load", exit_on_error=False)
    def load_all(self) -> None:
        """Newest runs first: a screenful is shown at once, the rest follows."""
        folders = run_folders(self.root)
        first = summarize_many(folders[:FIRST_BATCH])
        if len(folders) > FIRST_BATCH:
            self.post_message(RunsLoaded(first, {r.path: stamp(r.path) for r in first}, complete=False))
        runs = first + summarize_many(folders[FIRST_BATCH:])
        self.post_message(RunsLoaded(runs, {r.path: stamp(r.path) for r in runs}))

    @work(thread=True, exclusive=True, group="runs-refresh", exit_on_error=False)
    def refresh_runs(self) -> None:
        if not self.complete:
            return
        known = {r.path: r for r in self.runs.values()}
        changed: list[RunSummary] = []
        stamps: dict[Path, Stamp] = {}
        paths = set(run_folders(self.root))
        for path in paths:
            stamps[path] = now = stamp(path)
            old = known.get(path)
            if old is None or now != self.stamps.get(path) or old.status in ACTIVE_STATUSES:
                try:
                    changed.append(summarize(path))
                except Exception:  # noqa: BLE001 - a half-written folder: try again next time
                    continue
        if changed or set(known) != paths:
            kept = [r for p, r in known.items() if p in paths and r.id not in {c.id for c in changed}]
            self.post_message(RunsLoaded(kept + changed, stamps))

    @on(RunsLoaded)
    def show_runs(self, message: RunsLoaded) -> None:
        self.runs = {r.id: r for r in message.runs}
        self.stamps = message.stamps
        self.loaded = True
        self.complete = message.complete
        self.populate()

    # -- the table --------------------------------------------------------------------
    def visible_runs(self) -> list[RunSummary]:
        words = self.filter_text.lower().split()
        runs = [r for r in self.runs.values()
                if all(any(w in (v or "").lower() for v in (r.id, r.task, r.agent, r.driver, r.status, r.base_model))
                       for w in words)]
        runs.sort(key=SORT_KEYS[self.sort_column], reverse=self.sort_reverse)
        return runs

    def populate(self, cursor_on: str | None = None) -> None:
        table = self.query_one("#runs", VirtualTable)
        current = cursor_on or self.current_run_id()
        self.shown = self.visible_runs()
        ids = [r.id for r in self.shown]
        table.set_rows(len(self.shown), self._cells, cursor=ids.index(current) if current in ids else None)
        live = sum(1 for r in self.runs.values() if r.status in ACTIVE_STATUSES)
        arrow = "↓" if self.sort_reverse else "↑"
        self.query_one("#runs-status", Static).update(literal_line(
            f"{len(self.shown)} of {len(self.runs)} runs · {live} live · {len(self.marked)} marked · "
            f"sorted by {dict(COLUMNS)[self.sort_column].label.strip() or 'mark'} {arrow}"
            + (f" · filter: {self.filter_text!r}" if self.filter_text else "")))

    def _cells(self, i: int) -> list[str | Text]:
        r = self.shown[i]
        return [
            "●" if r.id in self.marked else " ", status_text(r.status), r.task, r.agent, r.driver or "-",
            r.base_model, fmt_score(r.baseline), fmt_score(r.best), fmt_score(r.improvement, signed=True),
            str(r.n_submissions), str(r.n_revisions),
            f"baseline {r.scoring}" if r.scoring and r.budget_start is None
            else f"{human_duration(r.budget_used_s)} / {human_duration(r.budget_s)}",
            fmt_time(r.created_at, self.clock()), Text(r.flags, style="bold red") if r.flags else "", r.id,
        ]

    def current_run_id(self) -> str | None:
        table = self.query_one("#runs", VirtualTable)
        return self.shown[table.cursor].id if 0 <= table.cursor < len(self.shown) else None

    # -- filter and sort --------------------------------------------------------------
    @on(Input.Changed, "#filter")
    def filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        self.populate()
        self.refresh_bindings()

    @on(Input.Submitted, "#filter")
    def filter_done(self) -> None:
        """Enter in the filter opens the highlighted run, as it does in the table."""
        self.query_one("#runs", VirtualTable).focus()
        self.action_open()

    def on_key(self, event: Key) -> None:
        """A letter or digit typed on the table that is no action's key says how to filter.

        Once the filter has focus it takes every printable key itself (the Input handles
        them before any binding), so any word, "stopped" or "codex" included, is text there.
        """
        table = self.query_one("#runs", VirtualTable)
        char = event.character if event.is_printable else None
        if self.focused is table and char and char.isalnum() and event.key not in self.active_bindings:
            self.notify(f"{char!r} is no key here: press / to filter, or see the footer for the keys",
                        timeout=3, markup=False)
            event.stop()
            event.prevent_default()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "clear_filter":
            return bool(self.filter_text) or isinstance(self.focused, Input)
        return True

    def action_filter(self) -> None:
        flt = self.query_one("#filter", Input)
        flt.focus()
        flt.cursor_position = len(flt.value)

    def action_clear_filter(self) -> None:
        self.query_one("#filter", Input).value = ""
        self.filter_text = ""
        self.populate()
        self.query_one("#runs", VirtualTable).focus()
        self.refresh_bindings()

    @on(VirtualTable.HeaderSelected, "#runs")
    def header_clicked(self, event: VirtualTable.HeaderSelected) -> None:
        key = COLUMNS[event.column][0]
        if key == self.sort_column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_column, self.sort_reverse = key, False
        self.populate()

    def action_sort_next(self) -> None:
        keys = [k for k, _ in COLUMNS if k not in ("mark", "id")]
        self.sort_column = keys[(keys.index(self.sort_column) + 1) % len(keys)] if self.sort_column in keys else keys[0]
        self.populate()

    def action_sort_reverse(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self.populate()

    # -- actions ----------------------------------------------------------------------
    @on(VirtualTable.Selected, "#runs")
    def row_selected(self) -> None:
        self.action_open()

    def action_open(self) -> None:
        run_id = self.current_run_id()
        if run_id:
            self.post_message(OpenRun(self.runs[run_id].path))

    def action_mark(self) -> None:
        run_id = self.current_run_id()
        if run_id:
            self.marked ^= {run_id}
            ids = [r.id for r in self.visible_runs()]
            self.populate(cursor_on=ids[min(ids.index(run_id) + 1, len(ids) - 1)])

    def action_compare(self) -> None:
        from agent2rl_tui.ui.screens.compare import CompareScreen

        runs = [self.runs[i] for i in self.marked if i in self.runs] or self.visible_runs()
        self.app.push_screen(CompareScreen(runs))

    def action_campaigns(self) -> None:
        from agent2rl_tui.ui.screens.campaign import CampaignsScreen

        self.app.push_screen(CampaignsScreen(self.root, refresh_s=self.refresh_s))

    def action_new_run(self) -> None:
        from agent2rl_tui.ui.screens.new_run import NewRunScreen

        self.app.push_screen(NewRunScreen(self.root))

    def action_reload(self) -> None:
        self.load_all()

    def action_stop(self) -> None:
        from agent2rl_tui.ui.screens.confirm import ConfirmScreen, stop_question

        run_id = self.current_run_id()
        if not run_id:
            return
        run = self.runs[run_id]
        question = stop_question(run_id, run.status, run.ended_at)
        if question is None:
            self.notify(one_line(f"{run_id} is {run.status}; nothing to stop"), severity="warning", markup=False)
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.stop_in_background(run.path)

        self.app.push_screen(ConfirmScreen(question), confirmed)

    @on(RunStopped)
    def run_stopped(self, message: RunStopped) -> None:
        self.notify(one_line(f"{message.run_dir.name}: {message.status}"), markup=False)
        self.refresh_runs()
