"""``report`` and ``compare``: a run's report written again, and runs compared in groups."""

from __future__ import annotations

from pathlib import Path

import click

from agent2rl_tui.cli.common import USER_ERRORS, _echo, _fail, _write_plots
from agent2rl_tui.cli.flags import _summarizer_options
from agent2rl_tui.record.root import RunError
from agent2rl_tui.review.index import find_run, list_runs, summarize
from agent2rl_tui.util.inert import one_line


@click.command("report")
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


@click.command("export")
@click.argument("run")
@click.option("--format", "fmt", type=click.Choice(["inspect"]), default="inspect", show_default=True,
              help="inspect: an Inspect AI eval log (`inspect view` shows it; needs the inspect extra).")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write it (.eval: Inspect's zip format, .json: its JSON) [default: report/RUN_ID.eval "
                   "in the run folder].")
@click.pass_context
def export_cmd(ctx: click.Context, run: str, fmt: str, out: Path | None) -> None:
    """Write a run in another tool's format: an Inspect AI eval log (the agent's transcript as
    messages and tool events, each submission's score, best of budget, baseline and improvement)."""
    from agent2rl_tui.review.export_inspect import export_inspect

    try:
        run_dir = find_run(run, ctx.obj["root"])
        written = export_inspect(run_dir, out or run_dir / "report" / f"{run_dir.name}.eval")
    except USER_ERRORS as exc:
        _fail(exc)
    click.echo(f"{fmt}: {written}")


@click.command("compare")
@click.argument("runs", nargs=-1)
@click.option("--campaign", "campaign_ref", help="Compare the current runs of a campaign (its folder or name).")
@click.option("--task", help="Only runs of this task.")
@click.option("--plots", "plots_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Also write the scaling charts (SVG: improvement vs time, tokens, submissions; best of k) here.")
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Also write the paper's outputs of these runs here, as `campaign report` does (text, CSV, SVG).")
@click.option("--html", "as_html", is_flag=True, help="With --report: also one self-contained page of it all.")
@click.pass_context
def compare_cmd(ctx: click.Context, runs: tuple[str, ...], campaign_ref: str | None, task: str | None,
                plots_dir: Path | None, report_dir: Path | None, as_html: bool) -> None:
    """Group runs run alike: mean ± sd, bootstrap 95% CIs, expected best of k.

    A group is one task x prompt profile x agent x driver x base model (by its weights) x mode x eval
    limit. A run without a valid submission counts at 0 improvement; intervals need three runs.

    RUNS are run ids or folders; without them, every run under the root (or of --campaign)."""
    from agent2rl_tui.review.compare import ci_text, compare, pair_text, paired_bests, profile_notes

    if campaign_ref:
        from agent2rl_tui.cli.campaign import _campaign_folder
        from agent2rl_tui.run.campaign import campaign_runs

        found = [r.summary for r in campaign_runs(_campaign_folder(ctx, campaign_ref))
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
              f"{one_line(g.driver)} · base {one_line(g.base_model)} · {one_line(g.setting_text())}: "
              f"{g.runs} runs ({g.tally.valid_text()}; {g.finished} finished)")
        click.echo(f"  best of budget {pm(g.best_mean, g.best_sd)} 95% CI {ci_text(g.best_ci, g.runs)}; improvement "
                   f"{pm(g.improvement_mean, g.improvement_sd)} 95% CI {ci_text(g.improvement_ci, g.runs)}")
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
    if report_dir:
        from agent2rl_tui.cli.campaign import write_experiment

        write_experiment(found, report_dir, f"{len(found)} runs", html=as_html)
