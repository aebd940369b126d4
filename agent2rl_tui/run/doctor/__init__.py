"""``agent2rl-tui doctor``: what works on this machine, part by part, and what fixes the rest.

A run fails late and far from its cause when the machine lacks a part: on installs whose
setuptools (81 and newer) no longer shipped ``pkg_resources``, every AlpacaEval submission
failed to score, and the run said so only at its first score. The doctor tries each part for
real before a run needs it: the core imports in a fresh interpreter, a token from vLLM through
the grader's own eval worker, a contained ``true`` under bubblewrap, one step of a
TextWorldExpress game, each agent CLI's ``--version``. Each line it gives is a ``Finding``: the
part, its state (``ok``, ``missing``, ``broken``, ``info``), what was seen, and for what is
missing or broken the command that fixes it.

Headless: the CLI prints the findings (``text_line``: inert, since versions and paths come
from outside) or writes them as JSON, and exits 1 on what ``failing`` returns. Whatever could
hang or crash runs in a subprocess of its own process group under a timeout, killed whole at
the deadline (``procs.run``), and offline (``HF_HUB_OFFLINE``); the parts run at once, in
threads, so the doctor takes about as long as its slowest part, vLLM's engine start. Heavy
imports (torch, vLLM, the environments) happen only in those subprocesses: ``python -P -m
agent2rl_tui.run.doctor.probes PROBE`` (``probes.probe_main``, one JSON answer), and for vLLM
the grader's eval worker (``python -m agent2rl_tui.grader.worker``) grading one item of the
arith task on the tiny model with the engine ``vllm``: the code path a run's scores take,
started as the grader starts it, fed the job line the grader writes (``record.evaljob.EvalJob``).

This package's front holds the parts, running them and the verdict; the rest is in
``findings`` (what a check answers), ``procs`` (subprocesses under timeouts), ``checks``
(the Python stack: python, torch, packages, vllm), ``checks_env`` (the sandbox, the
environments, programs, agent CLIs, data, disk) and ``probes`` (run in the subprocesses).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

from agent2rl_tui.run.doctor.checks import check_packages, check_python, check_torch, check_vllm
from agent2rl_tui.run.doctor.checks_env import (
    check_agents,
    check_alfworld,
    check_bubblewrap,
    check_chromium,
    check_data,
    check_disk,
    check_java,
    check_slurm,
    check_textworld,
)
from agent2rl_tui.run.doctor.findings import DoctorError, Finding, Part, State, Where
from agent2rl_tui.run.doctor.procs import kill_live
from agent2rl_tui.util.inert import one_line

__all__ = ["PARTS", "PART_NAMES", "DoctorError", "Finding", "Part", "State", "Where", "diagnose", "failing", "select",
           "summary", "text_line"]

PARTS: tuple[Part, ...] = (
    Part("python", "the interpreter", check_python, core=True),
    Part("torch", "torch's build and the GPUs", check_torch, core=True),
    Part("packages", "the core imports and the install lock", check_packages, core=True),
    Part("bubblewrap", "the agent's sandbox", check_bubblewrap),
    Part("alfworld", "ALFWorld's imports and package data", check_alfworld),
    Part("textworld", "a TextWorldExpress step", check_textworld),
    Part("java", "Java (TextWorldExpress, WebShop's search index)", check_java),
    Part("chromium", "the HTML report's browser tests", check_chromium),
    Part("slurm", "Slurm and munge (campaigns on Slurm)", check_slurm),
    Part("agents", "the agent CLIs of the built-in profiles", check_agents),
    Part("data", "each task's data", check_data),
    Part("disk", "free space under the workspaces root", check_disk),
    Part("vllm", "vLLM's build and a token through the eval worker (the slow one: last)", check_vllm),
)
PART_NAMES = tuple(p.name for p in PARTS)
_BY_NAME = {p.name: p for p in PARTS}


def select(names: Sequence[str]) -> list[Part]:
    """The named parts (every part when none is named); a ``DoctorError`` for an unknown name."""
    unknown = [n for n in names if n not in _BY_NAME]
    if unknown:
        raise DoctorError(f"unknown part {', '.join(map(repr, unknown))}: the parts are {', '.join(PART_NAMES)}")
    return [_BY_NAME[n] for n in dict.fromkeys(names)] or list(PARTS)


def diagnose(parts: Sequence[Part], where: Where) -> Iterator[list[Finding]]:
    """Each part's findings, in the order given, the parts checked at once. Left early (an
    interrupt), it kills the subprocesses still running before it returns."""
    pool = ThreadPoolExecutor(max_workers=max(1, len(parts)), thread_name_prefix="doctor")
    try:
        futures = [pool.submit(_checked, part, where) for part in parts]
        for future in futures:
            yield future.result()
    finally:
        kill_live()
        pool.shutdown(wait=True, cancel_futures=True)


def _checked(part: Part, where: Where) -> list[Finding]:
    try:
        return part.check(where)
    except Exception as exc:  # noqa: BLE001 - a check that fails is a finding, never the doctor's end
        return [Finding(part.name, part.name, State.BROKEN, f"the check itself failed: {type(exc).__name__}: {exc}",
                        "a bug in `agent2rl-tui doctor`: report this line")]


def failing(findings: Sequence[Finding], *, named: bool) -> list[Finding]:
    """What makes the doctor exit 1: anything broken; anything missing of a part asked for by
    name, or of a core part."""
    core = {p.name for p in PARTS if p.core}
    return [f for f in findings
            if f.state is State.BROKEN or (f.state is State.MISSING and (named or f.part in core))]


def text_line(finding: Finding) -> str:
    """A finding as the CLI prints it: one line (and its fix indented below), inert."""
    line = f"{finding.part:<11}{finding.state:<8}{one_line(finding.subject)}: {one_line(finding.detail)}"
    return line + (f"\n{'':19}fix: {one_line(finding.fix)}" if finding.fix else "")


def summary(findings: Sequence[Finding], failed: Sequence[Finding], seconds: float) -> str:
    counts = ", ".join(f"{n} {state}" for state in State if (n := sum(f.state is state for f in findings)))
    verdict = f"; failing: {', '.join(dict.fromkeys(f.part for f in failed))}" if failed else ""
    return f"{counts} in {seconds:.0f} s{verdict}"

