"""Pilot helpers for the TUI's tests: wait for a screen, read what a widget shows, open the Runs,
Run, New run and Items screens the way a user does (keys), with rows picked by what they hold.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Group
from rich.text import Text
from textual.widgets import DataTable, Footer, Input, Static
from textual.widgets._footer import FooterKey

from agent2rl_tui.ui.app import Agent2RLApp
from agent2rl_tui.ui.screens.items import ItemsScreen
from agent2rl_tui.ui.screens.new_run import NewRunScreen
from agent2rl_tui.ui.screens.run import RunScreen
from agent2rl_tui.ui.screens.runs import RunsScreen
from agent2rl_tui.ui.widgets.virtual_table import VirtualTable

SIZE = (160, 48)


def run_screen_ready(app: Agent2RLApp) -> bool:
    """The Run screen is on top and mounted with its panes (it is pushed once its run is read)."""
    return isinstance(app.screen, RunScreen) and app.screen.ready


async def settle(pilot, predicate, timeout: float = 60.0, what: str = "the screen") -> None:  # noqa: ANN001
    """Wait for ``predicate`` (a long limit: a busy machine is slow, and only a failure waits it out)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.05)
        if predicate():
            return
    raise AssertionError(f"timed out waiting for {what}")


async def type_text(pilot, text: str) -> None:  # noqa: ANN001
    await pilot.press(*["space" if c == " " else c for c in text])


def plain(static: Static) -> str:
    """The text a Static shows (its content: a str, a rich Text or a Group of them)."""
    content = static.content
    if isinstance(content, Group):
        return "\n".join(r.plain if isinstance(r, Text) else str(r) for r in content.renderables)
    return content.plain if isinstance(content, Text) else str(content)


def table_rows(table: DataTable | VirtualTable) -> list[list[str]]:
    if isinstance(table, VirtualTable):
        return [table.row_cells(i) for i in range(table.row_count)]
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def row_of(table: DataTable | VirtualTable, value: str, column: int = -1) -> int:
    """The index of the one row whose cell in ``column`` is ``value`` (the Runs table's last column
    is the run id, the Scores table's first the submission)."""
    found = [i for i, row in enumerate(table_rows(table)) if row[column] == value]
    assert len(found) == 1, f"{len(found)} rows with {value!r} in column {column}"
    return found[0]


def review_runs(review_root: Path) -> tuple[str, str]:
    """The ids of the review root's finished run and of its lost copy."""
    finished = next(p.name for p in review_root.iterdir() if not p.name.endswith("-lost"))
    return finished, finished + "-lost"


def footer_keys(screen) -> dict[str, str]:  # noqa: ANN001
    """What the footer shows: each key with its description (a group's keys: the group's)."""
    shown: dict[str, str] = {}
    group: list[str] = []
    for child in screen.query_one(Footer).children:
        if isinstance(child, FooterKey):
            shown[child.key] = child.description
            continue
        keys = [k.key for k in child.query(FooterKey)]
        if keys:
            group = keys
        elif group and isinstance(child, Static):
            shown.update(dict.fromkeys(group, plain(child)))
            group = []
    return shown


def palette_titles(app: Agent2RLApp) -> list[str]:
    return [c.title for c in app.get_system_commands(app.screen)]


async def open_runs(pilot) -> RunsScreen:  # noqa: ANN001
    await settle(pilot, lambda: isinstance(pilot.app.screen, RunsScreen) and pilot.app.screen.loaded,
                 what="the runs to load")
    return pilot.app.screen


async def open_new_run(pilot, task: str, model: Path) -> NewRunScreen:  # noqa: ANN001
    """Runs → n: the New run form, with the task and the base model filled in."""
    await open_runs(pilot)
    await pilot.press("n")
    await settle(pilot, lambda: isinstance(pilot.app.screen, NewRunScreen), what="New run")
    form: NewRunScreen = pilot.app.screen
    form.query_one("#task").value = task
    form.query_one("#model", Input).value = str(model)
    return form


async def open_items(pilot, run_id: str, sub: str) -> ItemsScreen:  # noqa: ANN001
    """Runs → the run ``run_id`` → Scores: submission ``sub`` (its row found by its number) → i."""
    app = pilot.app
    runs = (await open_runs(pilot)).query_one("#runs", VirtualTable)
    runs.move_to(row_of(runs, run_id))
    await pilot.press("enter")
    await settle(pilot, lambda: run_screen_ready(app) and app.screen.view.run.id == run_id, what="the Run screen")
    subs = app.screen.query_one("#subs", VirtualTable)
    await settle(pilot, lambda: sub in [r[0] for r in table_rows(subs)], what=f"submission {sub}")
    subs.move_to(row_of(subs, sub, column=0))
    await pilot.press("i")
    await settle(pilot, lambda: isinstance(app.screen, ItemsScreen), what="the Items screen")
    return app.screen
