"""``doctor``: what works on this machine, part by part, and what fixes the rest."""

from __future__ import annotations

import json
import time
from typing import Any

import click

from agent2rl_tui.cli.common import _echo
from agent2rl_tui.record.root import default_root
from agent2rl_tui.util.inert import visible


@click.command("doctor")
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
