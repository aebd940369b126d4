"""``campaign start|status|resume|requeue|show|results|report``: repeated runs over a matrix, queued
(the local scheduler or Slurm jobs)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from agent2rl_tui.cli.common import USER_ERRORS, _echo, _fail, _run_tui, _write_plots
from agent2rl_tui.record.root import RunError, default_root
from agent2rl_tui.record.store import RunStatus

if TYPE_CHECKING:
    from agent2rl_tui.review.index import RunSummary


@click.group("campaign")
def campaign_group() -> None:
    """Repeated runs over a matrix of tasks, agents, drivers, base models and seeds, queued."""


def _campaign_folder(ctx: click.Context, ref: str) -> Path:
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
    from agent2rl_tui.run.campaign.slurm import submit_queued

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
    from agent2rl_tui.review.campaign_view import JobState, failed_before_run, read_summary
    from agent2rl_tui.run.campaign import Campaign
    from agent2rl_tui.run.campaign.slurm_jobs import campaign_jobs

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
            if why := failed_before_run(row, jobs.get(row["job_id"])):
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
            from agent2rl_tui.run.campaign.slurm import submit_queued

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
    """Per cell: runs, mean ± sd and bootstrap 95% CI (three runs or more) of the best of budget and
    the improvement (a run without a valid submission counts at 0), and the expected best of k runs."""
    from agent2rl_tui.review.campaign_view import JobState, cell_results, write_csv
    from agent2rl_tui.review.stats import TOO_FEW_FOR_INTERVAL, Summary
    from agent2rl_tui.run.campaign import campaign_runs

    folder = _campaign_folder(ctx, ref)
    runs = campaign_runs(folder)  # with what Slurm says now of jobs not yet started

    def ci(s: Summary) -> str:
        if s.mean is None:
            return "-"
        sd = f" ± {s.sd:.2f}" if s.sd is not None else ""
        band = f" [{s.ci_low:.2f}, {s.ci_high:.2f}]" if s.ci_low is not None else f" ({TOO_FEW_FOR_INTERVAL})"
        return f"{s.mean:.2f}{sd}{band}"

    for c in cell_results(runs):
        states = ", ".join(f"{n} {st}" for st in (RunStatus.FINISHED, RunStatus.RUNNING, JobState.QUEUED,
                                                   RunStatus.FAILED, RunStatus.LOST, RunStatus.STOPPED)
                           if (n := c.count(st)))
        best_of = "  ".join(f"E[best of {k}] {v:.2f}" for k, v in c.expected_best.items() if v is not None)
        click.echo(f"{c.cell}\n  runs: {states or 'none'}; counted: {c.tally.valid_text()}\n"
                   f"  best of budget: {ci(c.best)}\n  improvement: {ci(c.improvement)}"
                   + (f"\n  {best_of}" if best_of else ""))
    if csv_path:
        n = write_csv(folder, csv_path)
        click.echo(f"{n} rows -> {csv_path}")
    if plots_dir:
        _write_plots(plots_dir, [r.summary for r in runs if r.summary is not None and r.state != "superseded"])


@campaign_group.command("report")
@click.argument("ref")
@click.option("--html", "html", is_flag=True, help="Also write one self-contained page (no script) of it all.")
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path),
              help="The folder to write into (default: the campaign folder's report/).")
@click.pass_context
def campaign_report(ctx: click.Context, ref: str, html: bool, out: Path | None) -> None:
    """The paper's outputs for the campaign: its table, mode x task heatmap, best routes, best of k,
    each run's submissions and the scaling charts (text, CSV, SVG; --html: one page)."""
    from agent2rl_tui.run.campaign import campaign_runs

    folder = _campaign_folder(ctx, ref)
    runs = [r.summary for r in campaign_runs(folder) if r.summary is not None and r.state != "superseded"]
    write_experiment(runs, out or folder / "report", f"Campaign {folder.name}", html=html)


def write_experiment(runs: list[RunSummary], out: Path, title: str, *, html: bool) -> None:
    """Build the experiment of ``runs``, print its text and write its files into ``out``."""
    from agent2rl_tui.review.experiment import build_experiment, render_text, write_csvs
    from agent2rl_tui.review.experiment_html import write_experiment_html

    if not runs:
        _fail(RunError("no runs to report on"))
    experiment = build_experiment(runs)
    text = render_text(experiment)
    _echo(text, nl=False)
    out.mkdir(parents=True, exist_ok=True)
    (out / "experiment.txt").write_text(text, encoding="utf-8")
    for path in write_csvs(experiment, out):
        _echo(str(path))
    _write_plots(out, runs)
    if html:
        _echo(str(write_experiment_html(out / "experiment.html", title, experiment, runs)))
