"""The ``agent2rl-tui`` command line: start, list, show and stop runs; build the tiny model.

One front end over the run and record layers (the TUI is the other). Nothing here imports
textual or rich except the command that opens the TUI. Whatever prints the record prints
through ``_echo`` (control characters as escapes) and puts each agent-made field on one
line (``one_line``): an agent's text never drives the terminal nor forges a row
(``util.inert``). ``run cat`` and ``run diff`` print the same way unless given ``--raw``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import click

from agent2rl_tui.record.root import RunError, default_root
from agent2rl_tui.record.store import ACTIVE_STATUSES, RunStatus, RunStore, StoreError
from agent2rl_tui.review.campaign_view import JobState
from agent2rl_tui.review.index import RunSummary, find_run, list_runs, summarize
from agent2rl_tui.run.containment import probe as containment_probe
from agent2rl_tui.run.lifecycle import decoding_note, start_run, stop_run
from agent2rl_tui.run.options import SUMMARIZER_FLAGS, Flag, OptionValueError, request_from_flags
from agent2rl_tui.run.options import flags as run_flags
from agent2rl_tui.run.profiles import ProfileError, load_profiles
from agent2rl_tui.run.request import RunRequest
from agent2rl_tui.tasks.registry import TaskError, discover, load_task
from agent2rl_tui.util.inert import one_line, visible
from agent2rl_tui.util.timeutil import human_duration, iso, parse_duration

USER_ERRORS = (RunError, TaskError, ProfileError, StoreError, ValueError)


def _fail(exc: Exception) -> NoReturn:
    raise click.ClickException(visible(str(exc)))


def _echo(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """Print text that may hold the agent's: its control characters shown as escapes."""
    click.echo(visible(text), err=err, nl=nl)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


@click.group(invoke_without_command=True)
@click.option("--root", type=click.Path(path_type=Path), help="Folder of run folders (default: workspaces/).")
@click.pass_context
def main(ctx: click.Context, root: Path | None) -> None:
    """Agent² RL-Bench on one workstation: run coding agents that post-train models."""
    ctx.ensure_object(dict)
    ctx.obj["root"] = root
    if ctx.invoked_subcommand is None:
        if sys.stdout.isatty():
            _run_tui(root)
            return
        _print_runs(list_runs(root))
        click.echo("\n`agent2rl-tui --help` lists the commands; `agent2rl-tui demo` runs the demo.")


def _run_tui(root: Path | None, open_run: Path | None = None, open_campaign: Path | None = None) -> None:
    """The only place the CLI imports the UI (and so textual and rich)."""
    from agent2rl_tui.ui.app import Agent2RLApp

    Agent2RLApp(root=root, open_run=open_run, open_campaign=open_campaign).run()


@main.command("tui")
@click.pass_context
def tui_cmd(ctx: click.Context) -> None:
    """Open the TUI on the Runs screen (what `agent2rl-tui` alone does in a terminal)."""
    _run_tui(ctx.obj["root"])


@main.command("open")
@click.argument("path", type=click.Path(path_type=Path))
def open_cmd(path: Path) -> None:
    """Open one run folder in the TUI (live or finished, here or copied from elsewhere)."""
    try:
        run_dir = find_run(str(path))
        RunStore.of_run(run_dir).close()
    except USER_ERRORS as exc:
        _fail(exc)
    _run_tui(run_dir.parent, open_run=run_dir)


@main.command("tiny-model")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--seed", default=0, show_default=True)
@click.option("--max-positions", default=4096, show_default=True,
              help="its context; GSM8K's reference 4-shot prompt takes about 2,900 of its tokens")
def tiny_model(path: Path, seed: int, max_positions: int) -> None:
    """Build the tiny Llama model and tokenizer at PATH (offline, in seconds)."""
    from agent2rl_tui.tasks.tinymodel import build_tiny_model

    out = build_tiny_model(path, seed=seed, max_positions=max_positions)
    click.echo(f"tiny model written to {out}")


@main.command("tasks")
def tasks_cmd() -> None:
    """List the tasks the registry finds."""
    from agent2rl_tui.review.significance import resolution

    for name, folder in sorted(discover().items()):
        try:
            task = load_task(folder)
            click.echo(f"{name:16} level {task.level}  {task.title}  ({folder})")
            if len(task.prompt_profiles) > 1:
                others = [p for p in task.prompt_profiles if p != task.inference.prompt_profile]
                click.echo(f"{'':16} prompt profiles: {task.inference.prompt_profile} (default), {', '.join(others)}")
            n = task.eval_size
            if n:
                click.echo(f"{'':16} resolution: {resolution(n):.1f} points on its {n} eval items (a paired "
                           "difference detected 4 times in 5 at the 5% level when half the items flip)")
        except TaskError as exc:
            click.echo(f"{name:16} BROKEN: {exc}")


@main.group("agents", invoke_without_command=True)
@click.option("--profiles", "profiles", type=click.Path(path_type=Path), help="Agent profiles TOML file.")
@click.pass_context
def agents_cmd(ctx: click.Context, profiles: Path | None) -> None:
    """List agent profiles: built-in ones and those of your agents.toml (`agents check` tries them)."""
    ctx.obj["profiles"] = profiles
    if ctx.invoked_subcommand is not None:
        return
    try:
        found = load_profiles(profiles)
    except USER_ERRORS as exc:
        _fail(exc)
    for p in sorted(found.values(), key=lambda p: p.name):
        keys = " | ".join(" or ".join(g) for g in p.required_env) or "-"
        click.echo(f"{p.name:12} {p.stream_format:20} needs {keys:28} {p.description}")


@agents_cmd.command("check")
@click.argument("names", nargs=-1)
@click.option("--model", "model", type=click.Path(path_type=Path, exists=True, file_okay=False),
              help="Base model for the check's runs (default: the tiny model, built on first use).")
@click.option("--budget", default="3m", show_default=True, help="Each agent's budget (it needs 10-30 s).")
@click.pass_context
def agents_check_cmd(ctx: click.Context, names: tuple[str, ...], model: Path | None, budget: str) -> None:
    """Run each installed agent CLI (or NAMES) through a short contained run against the scripted
    driver, and say whether it starts, finds its tools, reaches the grader, submits, and whether
    its transcript and tokens are read. No real API is called. Exit code 1 if one fails."""
    from agent2rl_tui.run.agents_check import check_agents

    root = ctx.obj["root"] or default_root()
    model = model or _tiny_model(root)
    failed = 0
    try:
        for result in check_agents(list(names), model=model, root=root, profiles_path=ctx.obj["profiles"],
                                   budget_s=parse_duration(budget)):
            failed += _print_agent_check(result, named=bool(names))
    except USER_ERRORS as exc:
        _fail(exc)
    if failed:
        raise SystemExit(1)


def _tiny_model(root: Path) -> Path:
    """The demo's tiny model under ``<root>/.models``, built the first time."""
    from agent2rl_tui.tasks.tinymodel import build_tiny_model

    model = root / ".models" / "tiny-llama"
    if not (model / "config.json").exists():
        build_tiny_model(model)
        click.echo(f"built the tiny model in {model}")
    return model


def _print_agent_check(result: Any, *, named: bool) -> int:
    """One CLI's verdict; 1 when it counts as a failure (not installed counts only when named)."""
    if not result.installed:
        click.echo(f"{result.agent:12} not installed ({result.executable} is not on PATH): {result.install_hint}")
        return 1 if named else 0
    verdict = "OK" if result.ok else "FAILED"
    _echo(f"{result.agent:12} {verdict:6} {result.version or '?'} ({result.found}), {result.seconds:.0f} s")
    if result.error:
        _echo(f"{'':12} {one_line(result.error)}")
    for check in result.checks:
        mark = "ok" if check.ok else ("FAIL" if check.required else "note")
        _echo(f"{'':12} {mark:4} {check.what:32} {one_line(check.detail)}")
    if result.run_dir is not None:
        _echo(f"{'':12} run folder: {result.run_dir}")
    return 0 if result.ok else 1


@main.command("prompt")
def prompt_cmd() -> None:
    """Print the prompt template every coding agent gets."""
    from agent2rl_tui.run.prompt import PROMPT_TEMPLATE

    click.echo(PROMPT_TEMPLATE)


@main.group("data")
def data_group() -> None:
    """Prepare tasks' data in the local cache (runs never download)."""


@data_group.command("prepare")
@click.argument("task")
@click.option("--from", "source", type=click.Path(path_type=Path), multiple=True,
              help="Local files instead of the hub: a folder with the splits, or the one data file "
                   "(alfworld: the folder alfworld-download filled, holding json_2.1.1/; alpacaeval: the "
                   "reference outputs, the Alpaca rows and df_gamed.csv, files or folders, --from each).")
def data_prepare(task: str, source: tuple[Path, ...]) -> None:
    """Put TASK's train and eval splits into the data cache."""
    from agent2rl_tui.tasks.data import prepare
    from agent2rl_tui.tasks.registry import task_cache

    try:
        t = load_task(task)
        meta = prepare(t, list(source))
    except USER_ERRORS as exc:
        _fail(exc)
    click.echo(f"{t.name}: {meta['train']} train and {meta['eval']} eval rows from {meta['source']}")
    if "lc_source" in meta:
        click.echo(f"length-controlled win rate data: {meta['lc_source']}")
    click.echo(f"in {task_cache(t)}")


@data_group.command("status")
def data_status() -> None:
    """Which tasks have their data ready, and where it came from."""
    from agent2rl_tui.tasks.registry import cache_root, task_cache

    click.echo(f"data cache: {cache_root()}")
    for name, folder in sorted(discover().items()):
        t = load_task(folder)
        if t.data.get("source") != "prepared":
            click.echo(f"{name:12} built in ({t.data.get('source')})")
            continue
        meta_path = task_cache(t) / "source.json"
        if meta_path.exists():
            meta = json.loads(meta_path.read_text())
            click.echo(f"{name:12} ready: {meta['train']} train / {meta['eval']} eval, from {meta['source']} "
                       f"({meta['prepared_at']})")
            if "lc_source" in meta:
                click.echo(f"{'':12} length-controlled win rate data: {meta['lc_source']}")
        else:
            click.echo(f"{name:12} not prepared: agent2rl-tui data prepare {name}")


@main.group("run")
def run_group() -> None:
    """Start, show and stop runs."""


def _click_option(flag: Flag) -> Any:
    """A declared flag (``run.options.Flag``) as a click option."""
    kw: dict[str, Any] = {}
    if flag.kind == "flag":
        kw["is_flag"] = True
    elif flag.kind == "path":
        kw["type"] = click.Path(path_type=Path, exists=flag.exists, dir_okay=flag.dir_okay)
    elif flag.kind == "choice":
        kw["type"] = click.Choice(list(flag.choices))
    elif flag.kind == "int":
        kw["type"] = click.IntRange(*flag.bounds) if flag.bounds else int
    elif flag.kind == "float":
        kw["type"] = float
    for key in ("help", "default", "metavar"):
        if getattr(flag, key) is not None:
            kw[key] = getattr(flag, key)
    for key in ("show_default", "required", "multiple"):
        if getattr(flag, key):
            kw[key] = True
    return click.option(flag.name, flag.dest, **kw)


def _options(flags: list[Flag]) -> Any:
    """A decorator giving a command these declared flags, in this order."""
    def apply(command: Any) -> Any:
        for flag in reversed(flags):
            command = _click_option(flag)(command)
        return command
    return apply


_summarizer_options = _options(list(SUMMARIZER_FLAGS))
"""``--summarizer-url/--summarizer-model/--summarizer-key-env``: the optional narrative's endpoint."""


@run_group.command("start")
@_options(run_flags())
@click.option("--detach", is_flag=True, help="Return at once; the run goes on in the background.")
@click.pass_context
def run_start(ctx: click.Context, detach: bool, **values: Any) -> None:
    """Start a run: workspace, baseline, agent under a budget, report."""
    try:
        req = request_from_flags(values, root=ctx.obj["root"])
        run_dir, pid = start_run(req)
    except OptionValueError as exc:
        raise click.BadParameter(str(exc), param_hint=exc.flag) from None
    except USER_ERRORS as exc:
        _fail(exc)
    click.echo(f"run {run_dir.name} started (supervisor pid {pid})")
    click.echo(f"run folder: {run_dir}")
    decoding = decoding_note(run_dir)
    if decoding:
        click.echo(decoding)
    no_contain = not req.config.contain
    why_not = None if no_contain else containment_probe()
    if no_contain:
        click.echo("warning: --no-contain: the agent can read and write outside its workspace; the "
                   "run is marked 'not contained'", err=True)
    elif why_not:
        click.echo(f"warning: the agent will run NOT CONTAINED: {why_not}", err=True)
    if detach:
        click.echo(f"follow it with `agent2rl-tui run show {run_dir.name}`; stop it with "
                   f"`agent2rl-tui run stop {run_dir.name}`")
        return
    follow(run_dir)


def follow(run_dir: Path) -> None:
    """Print the supervisor's progress until the run ends; Ctrl-C stops it, twice detaches."""
    log_path = run_dir / "logs" / "supervisor.log"
    interrupts = 0

    def on_int(signum: int, frame: object) -> None:
        nonlocal interrupts
        interrupts += 1
        if interrupts == 1:
            click.echo("\nstopping the run (Ctrl-C again to detach and leave it running)...")
            stop_run(run_dir)
        else:
            raise KeyboardInterrupt

    old = signal.signal(signal.SIGINT, on_int)
    offset, pending = 0, b""
    try:
        while True:
            if log_path.exists():
                with log_path.open("rb") as fh:
                    fh.seek(offset)
                    chunk = fh.read()
                    offset += len(chunk)
                pending += chunk
                cut = pending.rfind(b"\n") + 1  # whole lines only: a line's head tells ours from a spill
                if cut:
                    sys.stdout.write(_log_lines(pending[:cut]))
                    sys.stdout.flush()
                    pending = pending[cut:]
            summary = summarize(run_dir)
            if summary.status not in ACTIVE_STATUSES:
                break
            time.sleep(0.5)
    except KeyboardInterrupt:
        click.echo(f"detached; the run goes on. `agent2rl-tui run show {run_dir.name}`")
        return
    finally:
        signal.signal(signal.SIGINT, old)
    if pending:
        sys.stdout.write(_log_lines(pending + b"\n"))
    click.echo("")
    _print_result(run_dir)


_LOG_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")


def _log_lines(data: bytes) -> str:
    """Whole lines of a log of ours, inert; a line that does not start with our timestamp
    continues a message that held a newline (an agent's path, a traceback): it is quoted, so
    it cannot pass for a line of ours."""
    lines = data.decode(errors="replace").split("\n")[:-1]
    return "".join((visible(line) if not line or _LOG_STAMP.match(line) else "  │ " + visible(line)) + "\n"
                   for line in lines)


def _print_result(run_dir: Path) -> None:
    from agent2rl_tui.review.report import read_report

    s = summarize(run_dir)
    _echo(f"run {s.id}: {s.status}" + (f" ({one_line(s.error)})" if s.error else ""))
    _echo(f"run folder: {run_dir}")
    report = read_report(run_dir)  # report.json as any version wrote it
    if report is not None:
        _echo(f"baseline: {_fmt(report.baseline.score)}")
        for sub in report.submissions:
            line = f"submission {sub.submission_id}: {sub.status or '-':9} score {_fmt(sub.score)}"
            if sub.error:
                line += f"  ({one_line(sub.error[:120])})"
            _echo(line)
        best = report.best
        _echo(f"best: {_fmt(best.score) if best else '-'}"
              + (f" (submission {best.submission_id})" if best else ""))
        _echo(f"improvement: {_fmt(report.improvement)}")
        if s.flags:
            _echo(f"warning: this run is {s.flags} (see the report)")
        _echo(f"report: {run_dir / 'report' / 'report.md'}")


def _print_runs(runs: list[Any]) -> None:
    if not runs:
        click.echo(f"no runs under {default_root()}")
        return
    header = f"{'run':44} {'status':9} {'task':8} {'agent':8} {'base':>7} {'best':>7} {'delta':>7} {'subs':>4} {'used':>8}"
    click.echo(header)
    for r in runs:
        _echo(
            f"{one_line(r.id):44} {one_line(r.status):9} {one_line(r.task):8} {one_line(r.agent):8} "
            f"{_fmt(r.baseline):>7} {_fmt(r.best):>7} "
            f"{_fmt(r.improvement):>7} {r.n_submissions:>4} {human_duration(r.budget_used_s):>8}"
            + (f"  {one_line(r.flags)}" if r.flags else "")
        )


@main.command("report")
@click.argument("run")
@_summarizer_options
@click.option("--html", "as_html", is_flag=True,
              help="Also write one self-contained HTML page (report/report.html) that any browser opens offline.")
@click.option("--out", "html_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the HTML page (implies --html).")
@click.pass_context
def report_cmd(ctx: click.Context, run: str, summarizer_url: str | None = None, summarizer_model: str | None = None,
               summarizer_key_env: str | None = None, as_html: bool = False, html_out: Path | None = None) -> None:
    """Write a run's report again (report/report.md and report.json); with --summarizer-url and
    --summarizer-model, first a narrative of each iteration (report/narrative.json, cached); with
    --html, also the whole report as one HTML page (report/report.html, or --out PATH)."""
    from agent2rl_tui.review.report import write_report
    from agent2rl_tui.run.summarizer import SummarizerSettings, describe, write_narrative

    try:
        run_dir = find_run(run, ctx.obj["root"])
        summarizer = SummarizerSettings.from_options(summarizer_url, summarizer_model, summarizer_key_env)
        if summarizer is not None:
            summarizer.api_key()  # an unset key variable is the user's to fix, before anything is written
        report = write_report(run_dir)
        if summarizer is not None:  # the narrative reads the iterations the report just wrote
            narrative = write_narrative(run_dir, summarizer)
            _echo(describe(narrative))
            if narrative.failed or narrative.error:
                _echo("warning: the narrative is incomplete; the report says which iterations have none and why",
                      err=True)
            report = write_report(run_dir)
        if as_html or html_out is not None:
            from agent2rl_tui.review.html_report import write_html

            html_path = write_html(run_dir, html_out, report)
    except USER_ERRORS as exc:
        _fail(exc)
    click.echo(f"report: {run_dir / 'report' / 'report.md'}")
    if as_html or html_out is not None:
        click.echo(f"html: {html_path}")


@main.command("runs")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run.")
@click.pass_context
def runs_cmd(ctx: click.Context, as_json: bool) -> None:
    """List runs with status, scores and budget used."""
    runs = list_runs(ctx.obj["root"])
    if as_json:
        for r in runs:
            fields = {k: v for k, v in r.__dict__.items() if k not in ("path", "usage")}
            click.echo(json.dumps({**fields, "path": str(r.path), "improvement": r.improvement,
                                   "usage": r.usage.as_json() if r.usage else None}))
        return
    _print_runs(runs)


@run_group.command("show")
@click.argument("run")
@click.option("--json", "as_json", is_flag=True, help="The report as JSON.")
@click.option("--eval-seed", "eval_seed", is_flag=True,
              help="Print only the seed of the run's eval draw (for another run's --eval-seed).")
@click.pass_context
def run_show(ctx: click.Context, run: str, as_json: bool, eval_seed: bool = False) -> None:
    """Print one run: status, budget, submissions, result."""
    try:
        run_dir = find_run(run, ctx.obj["root"])
        s = summarize(run_dir)
    except USER_ERRORS as exc:
        _fail(exc)
    if eval_seed:
        from agent2rl_tui.record.evalset import run_eval_seed

        seed = run_eval_seed(run_dir)
        click.echo("-" if seed is None else str(seed))
        return
    if as_json:
        from agent2rl_tui.review.report import build_report

        click.echo(json.dumps({**build_report(run_dir).to_json(), "status": s.status}, indent=2))
        return
    with RunStore.of_run(run_dir) as store:
        run_row = store.run()
        subs = store.submissions()
    _echo(f"run {s.id}  [{s.status}]")
    _echo(f"  folder   {run_dir}")
    _echo(f"  task {one_line(s.task)}, agent {one_line(s.agent)}, driver {one_line(s.driver or '-')}, "
          f"base model {one_line(s.base_model)}")
    _echo(f"  budget {human_duration(s.budget_s)}, used {human_duration(s.budget_used_s)}, "
          f"started {iso(s.budget_start) or '-'}, ended {iso(s.ended_at) or '-'}")
    if run_row.end_reason:
        _echo(f"  ended by {one_line(run_row.end_reason)}, agent exit code {run_row.agent_exit_code}")
    if s.error:
        _echo(f"  error: {one_line(s.error)}")
    if s.flags:
        _echo(f"  {s.flags.upper()}: see the report's containment and contamination lines")
    _echo(f"  baseline {_fmt(s.baseline)}, best {_fmt(s.best)}, improvement {_fmt(s.improvement)}")
    for sub in subs:  # one submission, one line, whatever its path and error hold
        label = "baseline" if sub.kind == "baseline" else f"#{sub.id}"
        _echo(f"  {label:>9} {sub.status:10} {_fmt(sub.score):>7}  {one_line(sub.model_path or '-')}"
              + (f"  ({one_line(sub.error[:100])})" if sub.error else ""))


@run_group.command("stop")
@click.argument("run")
@click.option("--wait", "wait_s", default=60.0, show_default=True, help="Seconds to wait for the run to end.")
@click.pass_context
def run_stop(ctx: click.Context, run: str, wait_s: float) -> None:
    """Stop a run: the agent is ended, queued evaluations finish, the report is written."""
    try:
        run_dir = find_run(run, ctx.obj["root"])
        status = stop_run(run_dir, wait_s=wait_s)
    except USER_ERRORS as exc:
        _fail(exc)
    click.echo(f"run {run_dir.name}: {status}")


@run_group.command("revisions")
@click.argument("run")
@click.pass_context
def run_revisions(ctx: click.Context, run: str) -> None:
    """List the code revisions of a run (workspace snapshots)."""
    from agent2rl_tui.record.revisions import list_revisions

    try:
        run_dir = find_run(run, ctx.obj["root"])
        revs = list_revisions(run_dir)
        with RunStore.of_run(run_dir) as store:
            start = store.run().budget_start
            by_rev: dict[int, list[int]] = {}
            for sub in store.submissions(kind="agent"):
                if sub.revision_seq is not None:
                    by_rev.setdefault(sub.revision_seq, []).append(sub.id)
    except USER_ERRORS as exc:
        _fail(exc)
    if not revs:
        click.echo("no revisions recorded")
        return
    click.echo(f"{'rev':>4} {'at':>8} {'trigger':10} {'sha':8} {'files':>5} {'+':>6} {'-':>6}  paths")
    for r in revs:
        at = human_duration(r.at - start) if start else iso(r.at)
        names = ", ".join(one_line(p["path"]) for p in r.paths[:4]) + (" ..." if len(r.paths) > 4 else "")
        subs = f"  <- submission {', '.join(map(str, by_rev[r.seq]))}" if r.seq in by_rev else ""
        _echo(f"{r.seq:>4} {at:>8} {one_line(r.trigger):10} {r.sha[:8]} {r.files_changed:>5} {r.added:>6} "
              f"{r.removed:>6}  {names}{subs}")


@run_group.command("diff")
@click.argument("run")
@click.argument("a", required=False)
@click.argument("b", required=False)
@click.option("--submission", "submission", type=int, help="Diff since the previous submission's revision.")
@click.option("--raw", is_flag=True, help="Print git's diff exactly (for `git apply`); by default the agent's "
              "control characters are shown as escapes.")
@click.pass_context
def run_diff(ctx: click.Context, run: str, a: str | None, b: str | None, submission: int | None, raw: bool) -> None:
    """Unified diff between revisions: A..B, A's parent..A, or around a submission.

    File names and contents are the agent's: their control characters (terminal escapes,
    bidi overrides) are printed as escapes such as \\x1b, unless --raw."""
    from agent2rl_tui.record.revisions import RevisionNotFound, diff, get_revision, submission_revisions

    try:
        run_dir = find_run(run, ctx.obj["root"])
        if submission is not None:
            old, new = submission_revisions(run_dir, submission)
        elif a is None:
            raise click.UsageError("give a revision (A, or A B), or --submission N")
        elif b is None:
            new = get_revision(run_dir, a)
            old = get_revision(run_dir, new.seq - 1) if new.seq > 1 else None
        else:
            old, new = get_revision(run_dir, a), get_revision(run_dir, b)
        text = diff(run_dir, old, new)
    except (*USER_ERRORS, RevisionNotFound) as exc:
        _fail(exc)
    click.echo(f"# revision {old.seq if old else '(empty)'} -> {new.seq}", err=True)
    if raw:
        sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
    else:
        _echo(text)


@run_group.command("cat")
@click.argument("run")
@click.argument("rev")
@click.argument("path")
@click.option("--raw", is_flag=True, help="Write the file's bytes exactly (to redirect or pipe them).")
@click.pass_context
def run_cat(ctx: click.Context, run: str, rev: str, path: str, raw: bool) -> None:
    """Print a workspace file as it was at a revision.

    The file is the agent's: by default it is printed as UTF-8 text with its control
    characters (terminal escapes, bidi overrides) and undecodable bytes shown as escapes
    (\\x1b, \\xff), whether or not the output is a terminal; --raw writes its bytes as they are."""
    from agent2rl_tui.record.revisions import RevisionNotFound, file_at, get_revision

    try:
        run_dir = find_run(run, ctx.obj["root"])
        data = file_at(run_dir, get_revision(run_dir, rev), path)
    except (*USER_ERRORS, RevisionNotFound) as exc:
        _fail(exc)
    if raw:
        sys.stdout.buffer.write(data)
    else:
        _echo(data.decode("utf-8", errors="backslashreplace"), nl=False)


@run_group.command("steps")
@click.argument("run")
@click.option("--kind", "kinds", multiple=True, help="Only steps of this kind (repeatable): message, "
              "reasoning, tool_call, tool_result, error, usage, result, system, raw.")
@click.option("--search", help="Only steps whose text or tool contains these words.")
@click.option("--offset", default=0, show_default=True)
@click.option("--limit", default=50, show_default=True)
@click.pass_context
def run_steps(ctx: click.Context, run: str, kinds: tuple[str, ...], search: str | None, offset: int,
              limit: int) -> None:
    """Print the agent's transcript: normalized steps, a page at a time."""
    from agent2rl_tui.record.transcripts import (
        count_steps,
        page_steps,
        search_steps,
        steps_by_seq,
        transcript_totals,
    )

    try:
        run_dir = find_run(run, ctx.obj["root"])
        with RunStore.of_run(run_dir) as store:
            start = store.run().budget_start or 0.0
            if search:
                found = search_steps(store, search, kinds or None, limit=1_000_000)
                rows = steps_by_seq(store, found[offset: offset + limit])
                total = len(found)
            else:
                rows = page_steps(store, offset, limit, kinds or None)
                total = count_steps(store, kinds or None)
            totals = transcript_totals(store)
    except USER_ERRORS as exc:
        _fail(exc)
    for r in rows:
        what = one_line(r.tool or r.role or "")
        text = one_line((r.text or (json.dumps(r.args) if r.args else ""))[:200].replace("\n", " "))[:140]
        _echo(f"{r.seq:>6} {human_duration(r.at - start):>8} {r.kind:11} {what[:14]:14} {text}")
    click.echo(f"-- {len(rows)} of {total} steps; run totals: {totals['steps']} steps, tokens in "
               f"{totals['tokens_in']:,} out {totals['tokens_out']:,}"
               + (f", cost ${totals['cost_usd']:.4f}" if totals["cost_usd"] is not None else ""))


DEMOS: dict[str, tuple[str, dict[str, str]]] = {
    "arith": ("5m", {}),
    "coin": ("15m", {"EXAMPLE_SFT_STEPS": "300", "EXAMPLE_GRPO_STEPS": "200", "EXAMPLE_GENERATIONS": "8"}),
}
"""The tasks `demo` runs on a laptop's CPU: each one's budget and the example agent's settings
(its stages sized to end well inside the budget; bench/rl_vs_sft.py measures coin's stages
against each other)."""


@main.command("demo")
@click.option("--task", "task_name", type=click.Choice(sorted(DEMOS)), default="arith", show_default=True,
              help="arith: SFT then GRPO on sums (about a minute); coin: the paper's Level-3 route on a text "
                   "game, SFT on the gold paths then GRPO with online rollouts (about 10 minutes).")
@click.option("--budget", help="The run's budget (default: the task's demo budget, 5m for arith).")
@click.option("--no-tui", is_flag=True, help="Print progress instead of opening the TUI.")
@click.pass_context
def demo(ctx: click.Context, task_name: str, budget: str | None, no_tui: bool) -> None:
    """Build the tiny model and run the example agent on an offline task (arith by default).

    In a terminal the TUI opens on the live run; otherwise progress and the result are printed.
    """
    root = ctx.obj["root"] or default_root()
    model = _tiny_model(root)
    tui = sys.stdout.isatty() and not no_tui
    default_budget, settings = DEMOS[task_name]
    for key, value in settings.items():  # the example agent reads them; a user's own values win
        os.environ.setdefault(key, value)
    try:
        req = RunRequest(task=task_name, agent="example", model=model, budget_s=parse_duration(budget or default_budget),
                         grace_s=10.0, root=root)
        run_dir, _pid = start_run(req)
    except USER_ERRORS as exc:
        _fail(exc)
    if tui:
        _run_tui(root, open_run=run_dir)
        click.echo(f"run folder: {run_dir}")
        _print_result(run_dir)
    else:
        click.echo(f"run {run_dir.name} started")
        click.echo(f"run folder: {run_dir}")
        follow(run_dir)


@main.group("campaign")
def campaign_group() -> None:
    """Repeated runs over a matrix of tasks, agents, drivers, base models and seeds, queued."""


def _campaign_folder(ctx: click.Context, ref: str) -> Path:
    from agent2rl_tui.record.root import default_root

    path = Path(ref)
    if not path.is_dir():
        named = sorted(((ctx.obj["root"] or default_root()) / "campaigns").glob(f"*-{ref}"))
        path = named[-1] if named else path  # by name: the newest campaign of that name
    if not (path / "campaign.db").is_file():
        _fail(RunError(f"{ref}: not a campaign folder (give its path, or its name under <root>/campaigns/)"))
    return path.resolve()


@campaign_group.command("start")
@click.argument("file", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--foreground", is_flag=True, help="Run the scheduler in this process (until every run ends).")
@click.pass_context
def campaign_start(ctx: click.Context, file: Path, foreground: bool) -> None:
    """Pre-flight every cell of FILE, queue its runs, start the scheduler."""
    from agent2rl_tui.run.campaign import Campaign, create_campaign, launch_scheduler, serve

    try:
        folder = create_campaign(file.read_text(encoding="utf-8"), ctx.obj["root"])
    except USER_ERRORS as exc:
        _fail(exc)
    with Campaign(folder) as campaign:
        spec, n = campaign.spec, len(campaign.rows())
    at_once = "Slurm decides how many run at once" if spec.backend == "slurm" else f"at most {spec.max_parallel} at once"
    click.echo(f"campaign {folder.name}: {len(spec.cells)} cells x {len(spec.seeds)} seeds = {n} runs, {at_once}")
    click.echo(f"campaign folder: {folder}")
    if spec.backend == "slurm":
        _submit_jobs(folder)
    elif foreground:
        serve(folder)
        click.echo("every run has ended: agent2rl-tui campaign results " + str(folder))
    else:
        click.echo(f"scheduler pid {launch_scheduler(folder)}; `agent2rl-tui campaign status {folder}`")


def _submit_jobs(folder: Path) -> None:
    """Submit the campaign's queued runs as Slurm jobs and say which (or why sbatch refused)."""
    from agent2rl_tui.run.campaign import Campaign
    from agent2rl_tui.run.campaign_slurm import submit_queued

    with Campaign(folder) as campaign:
        try:
            jobs = submit_queued(campaign)
        except USER_ERRORS as exc:
            _fail(RunError(f"{exc}; mend {folder / 'campaign.toml'}, then `agent2rl-tui campaign resume {folder}`"))
    click.echo(f"{len(jobs)} jobs submitted ({', '.join(j for _, j in jobs[:5])}{' ...' if len(jobs) > 5 else ''}); "
               f"`agent2rl-tui campaign status {folder}`")


@campaign_group.command("status")
@click.argument("ref")
@click.pass_context
def campaign_status(ctx: click.Context, ref: str) -> None:
    """Each run of the campaign: its cell, seed and state (and on Slurm its job's id and state)."""
    from agent2rl_tui.review.campaign_view import read_summary
    from agent2rl_tui.run.campaign import Campaign
    from agent2rl_tui.run.campaign_slurm import campaign_jobs, failed_before_run

    folder = _campaign_folder(ctx, ref)
    with Campaign(folder) as campaign:
        meta = campaign.meta()
        alive = campaign.scheduler_alive()
        slurm = campaign.spec.backend == "slurm"
        jobs = campaign_jobs(campaign) if slurm else {}
        for row in campaign.rows():
            state = campaign.state_of(row)
            run = Path(row["run_dir"]).name if row["run_dir"] else "-"
            if row["job_id"]:  # Slurm's job and its state (squeue, else sacct), beside the run's own
                job = jobs.get(row["job_id"])
                run = (f"{run}  " if row["run_dir"] else "") + f"job {row['job_id']}" + (f" {job}" if job else "")
            note = f"  ({row['error']})" if row["error"] and state in (JobState.QUEUED, JobState.SUBMITTED) else ""
            if why := failed_before_run(campaign, row, jobs.get(row["job_id"])):
                state, note = RunStatus.FAILED, f"  ({why})"
            elif slurm and state in (RunStatus.STOPPED, RunStatus.LOST) and (s := read_summary(row)):
                note = f"  ({s.end_reason or s.error or state})"  # e.g. time_limit: Slurm's time limit stopped it
            click.echo(f"{row['id']:4} {row['cell']:50} seed {row['seed']:<3} {state:11} {run}{note}")
    if slurm:
        click.echo("backend: slurm (submitit jobs; `squeue` shows them)")
    else:
        click.echo("scheduler: " + ("running" if alive else "ended" if meta["ended_at"] else
                                    "NOT RUNNING (lost): `agent2rl-tui campaign resume " + str(folder) + "`"))


@campaign_group.command("resume")
@click.argument("ref")
@click.pass_context
def campaign_resume(ctx: click.Context, ref: str) -> None:
    """Start the scheduler again (after a reboot, or after requeueing runs of an ended campaign);
    on Slurm, submit the runs still queued (after sbatch refused one)."""
    from agent2rl_tui.run.campaign import Campaign, launch_scheduler

    folder = _campaign_folder(ctx, ref)
    with Campaign(folder) as campaign:
        slurm = campaign.spec.backend == "slurm"  # no scheduler of ours: submit what is still queued
        if not slurm and campaign.scheduler_alive():
            _fail(RunError("its scheduler is running"))
    if slurm:
        _submit_jobs(folder)
        return
    click.echo(f"scheduler pid {launch_scheduler(folder)}")


@campaign_group.command("requeue")
@click.argument("ref")
@click.argument("run")
@click.pass_context
def campaign_requeue(ctx: click.Context, ref: str, run: str) -> None:
    """Queue a failed, lost or stopped RUN (its id in `campaign status`, or its folder name) again."""
    from agent2rl_tui.run.campaign import Campaign, launch_scheduler

    folder = _campaign_folder(ctx, ref)
    with Campaign(folder) as campaign:
        try:
            new_id = campaign.requeue(run)
        except USER_ERRORS as exc:
            _fail(exc)
        if campaign.spec.backend == "slurm":
            from agent2rl_tui.run.campaign_slurm import submit_queued

            try:
                jobs = submit_queued(campaign)
            except USER_ERRORS as exc:
                _fail(RunError(f"queued again as {new_id}, but {exc}"))
            click.echo(f"queued again as {new_id}; job {jobs[0][1] if jobs else '-'} submitted")
            return
        alive = campaign.scheduler_alive()
    click.echo(f"queued again as {new_id}" + ("" if alive else f"; scheduler started, pid {launch_scheduler(folder)}"))


@campaign_group.command("show")
@click.argument("ref")
@click.pass_context
def campaign_show(ctx: click.Context, ref: str) -> None:
    """Open the campaign's screen in the TUI: its matrix, each cell's runs live."""
    folder = _campaign_folder(ctx, ref)
    _run_tui(folder.parent.parent if folder.parent.name == "campaigns" else ctx.obj["root"], open_campaign=folder)


@campaign_group.command("results")
@click.argument("ref")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), help="Also write one row per run to this CSV.")
@click.option("--plots", "plots_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Also write the scaling charts (SVG: improvement vs time, tokens, submissions; best of k) here.")
@click.pass_context
def campaign_results(ctx: click.Context, ref: str, csv_path: Path | None, plots_dir: Path | None) -> None:
    """Per cell: runs, mean ± sd and bootstrap 95% CI of the best score and the improvement,
    and the expected best of k runs."""
    from agent2rl_tui.review.campaign_view import cell_results, read_runs, write_csv

    folder = _campaign_folder(ctx, ref)
    runs = read_runs(folder)

    def ci(s) -> str:  # noqa: ANN001
        if s.mean is None:
            return "-"
        sd = f" ± {s.sd:.2f}" if s.sd is not None else ""
        band = f" [{s.ci_low:.2f}, {s.ci_high:.2f}]" if s.ci_low is not None else ""
        return f"{s.mean:.2f}{sd}{band}"

    for c in cell_results(runs):
        states = ", ".join(f"{n} {st}" for st in (RunStatus.FINISHED, RunStatus.RUNNING, JobState.QUEUED,
                                                   RunStatus.FAILED, RunStatus.LOST, RunStatus.STOPPED)
                           if (n := c.count(st)))
        best_of = "  ".join(f"E[best of {k}] {v:.2f}" for k, v in c.expected_best.items() if v is not None)
        click.echo(f"{c.cell}\n  runs: {states or 'none'}\n  best: {ci(c.best)}\n  improvement: {ci(c.improvement)}"
                   + (f"\n  {best_of}" if best_of else ""))
    if csv_path:
        n = write_csv(folder, csv_path)
        click.echo(f"{n} rows -> {csv_path}")
    if plots_dir:
        _write_plots(plots_dir, [r.summary for r in runs if r.summary is not None and r.state != "superseded"])


def _write_plots(plots_dir: Path, runs: list[RunSummary]) -> None:
    """The scaling charts of ``runs`` (``review.scaling``), one path a line."""
    from agent2rl_tui.review.scaling import write_plots

    try:
        paths = write_plots(plots_dir, runs)
    except OSError as exc:
        _fail(exc)
    for path in paths:
        _echo(str(path))



@main.command("compare")
@click.argument("runs", nargs=-1)
@click.option("--campaign", "campaign_ref", help="Compare the current runs of a campaign (its folder or name).")
@click.option("--task", help="Only runs of this task.")
@click.option("--plots", "plots_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Also write the scaling charts (SVG: improvement vs time, tokens, submissions; best of k) here.")
@click.pass_context
def compare_cmd(ctx: click.Context, runs: tuple[str, ...], campaign_ref: str | None, task: str | None,
                plots_dir: Path | None) -> None:
    """Group runs by task x prompt profile x agent x driver: mean ± sd, bootstrap 95% CIs, expected best of k.

    RUNS are run ids or folders; without them, every run under the root (or of --campaign)."""
    from agent2rl_tui.review.compare import ci_text, compare, pair_text, paired_bests, profile_notes

    if campaign_ref:
        from agent2rl_tui.review.campaign_view import read_runs

        found = [r.summary for r in read_runs(_campaign_folder(ctx, campaign_ref))
                 if r.summary is not None and r.state != "superseded"]
    elif runs:
        try:
            found = [summarize(find_run(ref, ctx.obj["root"])) for ref in runs]
        except USER_ERRORS as exc:
            _fail(exc)
    else:
        found = list_runs(ctx.obj["root"])
    found = [r for r in found if task is None or r.task == task]
    if not found:
        _fail(RunError("no runs to compare"))
    for g in compare(found):
        def pm(mean: float | None, sd: float | None) -> str:
            return "-" if mean is None else f"{mean:.2f} ± {sd:.2f}"

        best_of = "  ".join(f"E[best of {k}] {v:.2f}" for k, v in (g.best_of or {}).items() if v is not None)
        _echo(f"{one_line(g.task)} · prompts {one_line(g.prompt_profile)} · {one_line(g.agent)} · "
              f"{one_line(g.driver)}: {g.runs} runs ({g.finished} finished)")
        click.echo(f"  best {pm(g.best_mean, g.best_sd)} 95% CI {ci_text(g.best_ci)}; improvement "
                   f"{pm(g.improvement_mean, g.improvement_sd)} 95% CI {ci_text(g.improvement_ci)}")
        if best_of:
            click.echo(f"  {best_of}")
    for note in profile_notes(compare(found)):
        _echo(f"note: {one_line(note)}")
    pairing = paired_bests(found)
    if pairing.pairs:
        click.echo("paired on the same eval items, best submission against best submission (points, 95% interval):")
        for pair in pairing.pairs:
            _echo(f"  {one_line(pair.task)}: {one_line(pair_text(pair))}")
        if pairing.more:
            click.echo(f"  … and {pairing.more} more pairs")
    if pairing.unpaired:
        click.echo(f"{pairing.unpaired} run(s) shared their eval items with no other run (another eval draw: "
                   "`run start --eval-seed N` grades runs on the same items)")
    if plots_dir:
        _write_plots(plots_dir, found)


@main.command("doctor")
@click.argument("parts", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per finding: part, subject, state, detail, fix.")
@click.pass_context
def doctor_cmd(ctx: click.Context, parts: tuple[str, ...], as_json: bool) -> None:
    """What works on this machine, part by part, and what fixes the rest (every part, or PARTS):
    python, torch, packages, bubblewrap, alfworld, textworld, java, chromium, slurm, agents, data,
    disk, vllm. vLLM's check grades one item with the tiny model (30-60 s on a CPU).

    Exit code 1 when a part named is missing or broken; with none named, when anything is broken
    or a core part (python, torch, packages) is missing. Missing optional parts print how to
    install them."""
    from agent2rl_tui.run import doctor

    try:
        chosen = doctor.select(parts)
    except doctor.DoctorError as exc:
        raise click.UsageError(visible(str(exc))) from None
    started = time.monotonic()
    findings: list[Any] = []
    for found in doctor.diagnose(chosen, doctor.Where(ctx.obj["root"] or default_root())):
        findings += found
        for finding in found:
            if as_json:
                click.echo(json.dumps(finding.to_json()))
            else:
                _echo(doctor.text_line(finding))
    failed = doctor.failing(findings, named=bool(parts))
    if not as_json:
        _echo(doctor.summary(findings, failed, time.monotonic() - started))
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
