"""``runs``, ``run start|show|stop|revisions|diff|cat|steps``, ``open`` and ``tui``: one run at a time.

``run cat`` and ``run diff`` print the agent's text inert (``util.inert``) unless given ``--raw``.
Starting and stopping runs (``run.lifecycle``) and the report are imported by the commands that
use them: ``runs`` lists the run folders and loads nothing else.
"""

from __future__ import annotations

import json
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

import click

from agent2rl_tui.cli.common import USER_ERRORS, _echo, _fail, _fmt, _run_tui, command_for
from agent2rl_tui.cli.flags import _options
from agent2rl_tui.record.store import ACTIVE_STATUSES, RunStore
from agent2rl_tui.review.index import find_run, summarize
from agent2rl_tui.run.options import OptionValueError, request_from_flags
from agent2rl_tui.run.options import flags as run_flags
from agent2rl_tui.util.inert import one_line, visible
from agent2rl_tui.util.timeutil import human_duration, iso


@click.command("tui")
@click.pass_context
def tui_cmd(ctx: click.Context) -> None:
    """Open the TUI on the Runs screen (what `agent2rl-tui` alone does in a terminal)."""
    _run_tui(ctx.obj["root"])


@click.command("open")
@click.argument("path", type=click.Path(path_type=Path))
def open_cmd(path: Path) -> None:
    """Open one run folder in the TUI (live or finished, here or copied from elsewhere)."""
    try:
        run_dir = find_run(str(path))
        RunStore.of_run(run_dir).close()
    except USER_ERRORS as exc:
        _fail(exc)
    _run_tui(run_dir.parent, open_run=run_dir)


@click.group("run")
def run_group() -> None:
    """Start, show and stop runs."""


@run_group.command("start")
@_options(run_flags())
@click.option("--detach", is_flag=True, help="Return at once; the run goes on in the background.")
@click.pass_context
def run_start(ctx: click.Context, detach: bool, **values: Any) -> None:
    """Start a run: workspace, baseline, agent under a budget, report."""
    from agent2rl_tui.run.containment import probe as containment_probe
    from agent2rl_tui.run.lifecycle import decoding_note, start_run

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
    from agent2rl_tui.run.neighbours import active_neighbours

    for other in active_neighbours(run_dir, req.config.gpus):  # the supervisor notes it in both records
        click.echo(f"warning: run {other.run_dir.name} is active on this machine too; the two share {other.shared}: "
                   "each run's wall-clock budget buys less while they overlap", err=True)
    no_contain = not req.config.contain
    why_not = None if no_contain else containment_probe()
    if no_contain:
        click.echo("warning: --no-contain: the agent can read and write outside its workspace; the "
                   "run is marked 'not contained'", err=True)
    elif why_not:
        click.echo(f"warning: the agent will run NOT CONTAINED: {why_not}", err=True)
    if detach:
        click.echo(f"follow it with `{command_for('run show', run_dir)}`; stop it with "
                   f"`{command_for('run stop', run_dir)}`")
        return
    follow(run_dir)


def follow(run_dir: Path) -> None:
    """Print the supervisor's progress until the run ends; Ctrl-C stops it, twice detaches."""
    from agent2rl_tui.run.lifecycle import stop_run

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
        click.echo(f"detached; the run goes on. `{command_for('run show', run_dir)}`")
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
    from agent2rl_tui.review.eval_label import eval_label

    with RunStore.of_run(run_dir) as store:
        run_row = store.run()
        subs = store.submissions()
    _echo(f"run {s.id}  [{s.status}]")
    _echo(f"  folder   {run_dir}")
    _echo(f"  task {one_line(s.task)}, agent {one_line(s.agent)}, driver {one_line(s.driver or '-')}, "
          f"base model {one_line(s.base_model)}" + (f", mode {s.mode}" if s.mode != "free" else ""))
    config = run_row.config
    base_row = next((sub for sub in subs if sub.kind == "baseline"), None)
    _echo(f"  {eval_label(config.eval_limit, config.eval_seed, base_row.n_items if base_row else None)}")
    _echo(f"  budget {human_duration(s.budget_s)}, used {human_duration(s.budget_used_s)}, "
          f"started {iso(s.budget_start) or '-'}, ended {iso(s.ended_at) or '-'}")
    if run_row.end_reason:
        _echo(f"  ended by {one_line(run_row.end_reason)}, agent exit code {run_row.agent_exit_code}")
    if s.error:
        _echo(f"  error: {one_line(s.error)}")
    if s.flags:
        _echo(f"  {s.flags.upper()}: see the report")
    _echo(f"  baseline {_fmt(s.baseline)}, best {_fmt(s.best)}, improvement {_fmt(s.improvement)}")
    for sub in subs:  # one submission, one line, whatever its path and error hold
        label = "baseline" if sub.kind == "baseline" else f"#{sub.id}" + (" after" if sub.kind == "after" else "")
        _echo(f"  {label:>9} {sub.status:10} {_fmt(sub.score):>7}  {one_line(sub.model_path or '-')}"
              + (f"  ({one_line(sub.error[:100])})" if sub.error else ""))


@run_group.command("grade")
@click.argument("run")
@click.argument("model_path")
@click.pass_context
def run_grade(ctx: click.Context, run: str, model_path: str) -> None:
    """Grade a checkpoint an ended run left (MODEL_PATH in its workspace, e.g. output/v3) with the
    run's own grader: recorded and reported as graded after the run, outside its budget and best."""
    from agent2rl_tui.run.after import grade_after

    try:
        run_dir = find_run(run, ctx.obj["root"])
        answer = grade_after(run_dir, model_path)
    except USER_ERRORS as exc:
        _fail(exc)
    if "error" in answer:
        _fail(ValueError(f"{model_path} was refused: {answer['error']}: {answer.get('detail', '')}"))
    _echo(f"{model_path}: {answer.get('status')}, score {_fmt(answer.get('score'))} (baseline "
          f"{_fmt(answer.get('baseline_score'))}); recorded as graded after the run, submission "
          f"{answer.get('submission_id')}; report: {run_dir / 'report' / 'report.md'}")


@run_group.command("stop")
@click.argument("run")
@click.option("--wait", "wait_s", default=60.0, show_default=True, help="Seconds to wait for the run to end.")
@click.pass_context
def run_stop(ctx: click.Context, run: str, wait_s: float) -> None:
    """Stop a run: the agent is ended, queued evaluations finish, the report is written."""
    from agent2rl_tui.run.lifecycle import stop_run

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
