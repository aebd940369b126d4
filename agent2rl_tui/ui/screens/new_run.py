"""New run: a form for task, agent, driver, base model, budget and seed, validated in place.

The run options it shows are those ``run.options`` declares: each such field's label,
placeholder and id come from its flag's declaration (``Flag.form``), and the form's values
become a ``RunRequest`` through ``run.options.request_from_flags``, as ``run start``'s do.
Task, agent, budget and seed are the form's own (choices from what is installed; the budget
starts at the CLI's default, read from its flag's declaration).

Pre-flight (the CLI, its key, the model really loading, the budget) runs in a thread worker;
an error is shown under the form and nothing is created. On success the run folder is
made, a detached supervisor is started, and the Run screen opens on the live run (the
worker posts ``RunStarted`` or ``RunStartFailed``; the app is asked with ``OpenRun``).
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Button, Footer, Header, Input, Label, Select, Static

from agent2rl_tui.run.lifecycle import start_run
from agent2rl_tui.run.options import flag, request_from_flags
from agent2rl_tui.run.profiles import BUILTIN_PROFILES, ProfileError, load_profiles
from agent2rl_tui.run.request import RunRequest
from agent2rl_tui.tasks.registry import discover
from agent2rl_tui.ui.format import literal
from agent2rl_tui.ui.messages import OpenRun, RunStarted, RunStartFailed
from agent2rl_tui.util.timeutil import parse_duration

DEFAULT_TASK = "arith"
"""The form's first choice: the task that runs anywhere in a minute (the demo's)."""


def default_task(tasks: list[str]):  # noqa: ANN201 - a task name or Select.BLANK
    if DEFAULT_TASK in tasks:
        return DEFAULT_TASK
    return tasks[0] if tasks else Select.BLANK


def field(label: str, widget: Widget) -> Vertical:
    """One labelled field of the form."""
    return Vertical(Label(label), widget, classes="field")


def row(*fields: Vertical) -> Horizontal:
    """Fields side by side."""
    return Horizontal(*fields, classes="field-row")


def text_input(widget_id: str, placeholder: str) -> Input:
    return Input(placeholder=placeholder, id=widget_id)


def declared(name: str) -> Vertical:
    """The field of the run option flag ``name`` (``--judge-url``): its declared label and
    placeholder (``run.options``), its id the flag's name."""
    decl = flag(name)
    assert decl.form is not None, f"{name} has no form field declared"
    return field(decl.form.label, text_input(decl.widget_id, decl.form.placeholder))


FORM_FLAGS = ("--command", "--driver", "--model", "--gpus", "--judge-url", "--judge-model", "--judge-key-env",
              "--webshop-url")
"""The declared flags the form shows as text fields of their own."""


def search_options(where: str, key_env: str) -> dict[str, str] | None:
    """The search field: an http(s) URL is a search API, anything else a corpus file."""
    if not where:
        return None
    if where.startswith(("http://", "https://")):
        return {"url": where, **({"key_env": key_env} if key_env else {})}
    return {"corpus": where}


def search_flags(where: str, key_env: str) -> dict[str, str]:
    """The search field as the search flags' values (``--search-url``, ``--search-key-env``,
    ``--search-corpus``), which ``run.options`` turns into the run's search."""
    return {f"search_{k}": v for k, v in (search_options(where, key_env) or {}).items()}


class NewRunScreen(Screen[None]):
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Cancel", id="cancel"),
        Binding("ctrl+s", "start", "Start run", id="start"),
    ]

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root
        self.busy = False
        """True while a start is in flight: a second ctrl+s must not start a second run."""

    def compose(self) -> ComposeResult:
        tasks = sorted(discover())
        profile_problem: Text | None = None
        try:
            profiles = sorted(load_profiles())
        except ProfileError as exc:  # a broken agents.toml: offer the built-ins and say why
            profiles = sorted(BUILTIN_PROFILES)
            profile_problem = Text.assemble(("Your agent profiles file has a problem: ", "bold red"),
                                            literal(f"{exc}\nOnly built-in profiles are offered."))
        yield Header()
        with VerticalScroll(id="new-run"):
            yield Static("Start a run. Pre-flight checks run before anything is created.", id="new-run-intro")
            if profile_problem is not None:
                yield Static(profile_problem, id="new-run-profiles-error")
            yield row(field("task", Select([(t, t) for t in tasks], value=default_task(tasks), id="task",
                                           allow_blank=False)),
                      field("agent profile", Select([(p, p) for p in profiles], value="example", id="agent",
                                                    allow_blank=False)))
            yield row(declared("--command"), declared("--driver"))
            yield declared("--model")
            missing_key = flag("--allow-missing-key")
            yield row(field("budget", Input(value=str(flag("--budget").default), id="budget")),
                      field("seed", Input(value="0", id="seed", type="integer")),
                      declared("--gpus"),
                      field(missing_key.form.label if missing_key.form else missing_key.widget_id,
                            Select([("required", False), ("not needed (logged in)", True)],
                                   value=False, id=missing_key.widget_id, allow_blank=False)))
            yield row(declared("--judge-url"), declared("--judge-model"), declared("--judge-key-env"))
            yield row(field("search: API URL or corpus .jsonl (searching tasks)",
                            text_input("search", "https://serpapi.com/search or /data/corpus.jsonl")),
                      declared("--search-key-env"), declared("--webshop-url"))
            yield Static("", id="new-run-error")
            with Horizontal(id="new-run-buttons"):
                yield Button("Start (ctrl+s)", variant="success", id="start")
                yield Button("Cancel (esc)", id="cancel")
        yield Footer()

    @on(Button.Pressed, "#start")
    def start_pressed(self) -> None:
        self.action_start()

    @on(Button.Pressed, "#cancel")
    def cancel_pressed(self) -> None:
        self.app.pop_screen()

    def show_error(self, text: str) -> None:
        self.query_one("#new-run-error", Static).update(Text.assemble(("Cannot start: ", "bold red"), literal(text)))

    def action_start(self) -> None:
        if self.busy:
            return

        def value(widget_id: str) -> str:
            return self.query_one(f"#{widget_id}", Input).value.strip()

        try:
            parse_duration(value("budget"))  # said here, before anything is checked
        except ValueError as exc:
            self.show_error(str(exc))
            return
        try:
            seed = int(value("seed") or 0)
        except ValueError:
            self.show_error(f"seed {value('seed')!r}: give a whole number such as 0")
            return
        if not value("model"):
            self.show_error("give the base model folder")
            return
        values: dict[str, object] = {flag(name).dest: value(flag(name).widget_id) or None for name in FORM_FLAGS}
        values.update(search_flags(value("search"), value("search-key-env")))
        req = request_from_flags(
            {**values, "task": str(self.query_one("#task", Select).value),
             "agent": str(self.query_one("#agent", Select).value), "model": Path(value("model")),
             "budget": value("budget"), "seed": seed,
             "allow_missing_key": bool(self.query_one("#allow-missing-key", Select).value)},
            root=self.root)
        self.busy = True
        self.query_one("#new-run-error", Static).update("checking…")
        self.query_one("#start", Button).disabled = True
        self.create(req)

    @work(thread=True, exclusive=True, group="new-run", exit_on_error=False)
    def create(self, req: RunRequest) -> None:
        try:
            run_dir, _pid = start_run(req)
        except Exception as exc:  # noqa: BLE001 - every failure is shown in place
            self.post_message(RunStartFailed(str(exc)))
            return
        self.post_message(RunStarted(run_dir))

    @on(RunStartFailed)
    def failed(self, message: RunStartFailed) -> None:
        self.busy = False
        self.show_error(message.reason)
        self.query_one("#start", Button).disabled = False

    @on(RunStarted)
    def started(self, message: RunStarted) -> None:
        self.app.pop_screen()
        self.notify(f"run {message.run_dir.name} started")
        self.app.post_message(OpenRun(message.run_dir))
