"""``agent2rl-tui agents check``: each installed agent CLI through a short run, before a long one.

A lab about to spend twelve hours of GPU time on a campaign wants to know, per CLI, that it
starts in its sandbox, finds its tools, reaches the grader, submits, and that its transcript
and tokens are read. This runs each one exactly as a run would (``run start``: pre-flight,
containment, the run's own home, the meter) on the offline arith task with the tiny model,
against the scripted driver (``llm.scripted``) in place of its LLM: four steps (a command, a
file written with the CLI's own write tool, that file run and a submission, an answer). The
driver needs no key, so each CLI's key variable is given a placeholder and its other ways of
signing in (Bedrock, Vertex, a token) are blanked for the check: no real API is called and no
real key leaves the machine.

The check runs live under ``<root>/agents-check/`` (not among the runs): each verdict names its
run folder, where the agent's log, transcript and record say more.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent2rl_tui.llm.script import build as build_script
from agent2rl_tui.llm.scripted import RunningDriver, Served, serve
from agent2rl_tui.record.revisions import RevisionNotFound, SnapshotError, file_at, list_revisions
from agent2rl_tui.record.root import RunError, default_root
from agent2rl_tui.record.store import ACTIVE_STATUSES, RunStore, Submission, SubStatus
from agent2rl_tui.record.transcripts import transcript_totals
from agent2rl_tui.review.run_usage import RunUsage, run_usage
from agent2rl_tui.run.lifecycle import create_run, launch_supervisor, stop_run
from agent2rl_tui.run.profiles import AgentProfile, ProfileError, load_profiles, path_with_agent_clis
from agent2rl_tui.run.request import RunRequest
from agent2rl_tui.util.timeutil import compact_utc, now
from agent2rl_tui.util.versions import named_version

CHECK_FOLDER = "agents-check"
BUDGET_S = 180.0
"""The agent's budget in a check: four steps take the CLIs 10-30 s; a CLI that hangs is cut here."""
SETTLE_S = 240.0
"""Time for the baseline, the agent's grace, the last evaluation and the report around the budget."""
PLACEHOLDER_KEY = "agents-check-not-a-key"

# The variable each kind of CLI reads its key from when pointed at a driver URL, and the other
# ways it signs in, blanked so that the check never reaches a real API.
KEY_VARIABLE = {"anthropic": "ANTHROPIC_API_KEY", "codex": "CODEX_API_KEY", "gemini": "GEMINI_API_KEY",
                "opencode": "OPENAI_API_KEY", "openhands": "LLM_API_KEY"}
BLANKED = {"anthropic": ("ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"),
           "codex": ("OPENAI_API_KEY",),
           "gemini": ("GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_GENAI_USE_VERTEXAI"),
           "opencode": (),
           "openhands": ()}
MARK = "agents-check"


@dataclass(frozen=True)
class Check:
    """One thing a CLI must do, and what was seen. ``required`` False: told, never a failure."""

    what: str
    ok: bool
    detail: str
    required: bool = True


@dataclass(frozen=True)
class AgentCheck:
    """The verdict on one CLI."""

    agent: str
    executable: str
    found: str | None = None  # the executable's path, None when not installed
    version: str | None = None
    run_dir: Path | None = None
    checks: tuple[Check, ...] = ()
    error: str | None = None  # what stopped the check before its run ended (a refused pre-flight...)
    install_hint: str = ""
    seconds: float = 0.0

    @property
    def installed(self) -> bool:
        return self.found is not None

    @property
    def ok(self) -> bool:
        return self.installed and self.error is None and all(c.ok for c in self.checks if c.required)


@dataclass
class _Plan:
    """The script a CLI is given and the traces each of its steps leaves."""

    name: str
    tag: str = field(init=False)

    def __post_init__(self) -> None:
        self.tag = "".join(c if c.isalnum() else "_" for c in self.name)

    @property
    def file(self) -> str:
        return f"code/{MARK.replace('-', '_')}_{self.tag}.py"

    @property
    def file_text(self) -> str:
        return f"print('{MARK}: written by {self.name}')\n"

    def script(self) -> dict[str, Any]:
        submit = ("python -c 'import json, os, urllib.request as u; "
                  "r = u.Request(os.environ[\"GRADING_SERVER_URL\"] + \"/submit?wait=0\", "
                  "data=json.dumps({\"model_path\": \"output/v1\"}).encode(), "
                  "headers={\"Content-Type\": \"application/json\"}); "
                  f"print(\"{MARK}: submit answered\", u.urlopen(r, timeout=120).status)'")
        return {"model": "scripted", "steps": [
            {"run": f"cp -r models/$BASE_MODEL output/v1 && python -c 'import sys; print(\"{MARK}: python\", "
                    "sys.version_info[0])'", "say": "Copying the base model."},
            {"write": {"path": self.file, "content": self.file_text}},
            {"run": f"python {self.file} && {submit}"},
            {"answer": "Submitted output/v1."},
        ]}


def gateway_profiles(profiles_path: Path | None = None) -> dict[str, AgentProfile]:
    """The profiles a check can run: those whose CLI calls a driver API (``gateway``)."""
    return {name: p for name, p in sorted(load_profiles(profiles_path).items()) if p.gateway}


def check_env(profile: AgentProfile) -> dict[str, str]:
    """The variables a check gives its agent: a placeholder key, other sign-ins blanked."""
    assert profile.gateway is not None
    env = {var: "" for var in BLANKED.get(profile.gateway, ())}
    env[KEY_VARIABLE.get(profile.gateway, "OPENAI_API_KEY")] = PLACEHOLDER_KEY
    return env


VERSION_TIMEOUT_S = 180.0
"""A Python CLI's first ``--version`` in a fresh install compiles its modules (OpenHands: over a
minute on two loaded cores); a later one takes seconds."""


def cli_version(executable: str) -> str | None:
    """The line ``EXE --version`` prints that names a version (``util.versions``: a banner's frame is
    skipped), or None. A check whose run was made reads it from the run's record instead: its
    pre-flight ran the same ``--version`` in the sandbox (a Python CLI's costs seconds of CPU)."""
    try:
        out = subprocess.run([executable, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return named_version(out.stdout + "\n" + out.stderr) if out.returncode == 0 else None


def recorded_version(run_dir: Path) -> str | None:
    """The agent CLI's version as the run's pre-flight recorded it with its profile (None: not recorded)."""
    with RunStore.of_run(run_dir) as store:
        version = store.config().profile.get("version")
    return version if isinstance(version, str) and version else None


def check_agents(names: list[str], *, model: Path, root: Path | None = None,
                 profiles_path: Path | None = None, budget_s: float = BUDGET_S) -> Iterator[AgentCheck]:
    """Check each named agent (all with a driver API when none is named), one after the other."""
    found = gateway_profiles(profiles_path)
    unknown = [n for n in names if n not in found]
    if unknown:
        known = ", ".join(found)
        raise ProfileError(f"no agent CLI named {', '.join(unknown)} to check (those with a driver API: {known})")
    folder = (root or default_root()) / CHECK_FOLDER / compact_utc(now())
    for name in names or list(found):
        yield check_agent(found[name], model=model, runs_root=folder, profiles_path=profiles_path,
                          budget_s=budget_s)


def check_agent(profile: AgentProfile, *, model: Path, runs_root: Path, profiles_path: Path | None = None,
                budget_s: float = BUDGET_S) -> AgentCheck:
    """One CLI through a whole run against the scripted driver; what it did, check by check."""
    started = time.monotonic()
    found = shutil.which(profile.executable, path=path_with_agent_clis(None, profile.executable))  # make agent-clis' too
    base = AgentCheck(profile.name, profile.executable, found, install_hint=profile.install_hint)
    if found is None:
        return base
    plan = _Plan(profile.name)
    agent_env = check_env(profile)
    with serve(build_script(plan.script())) as driver:
        req = RunRequest.of(task="arith", agent=profile.name, model=model, budget_s=budget_s, grace_s=10.0,
                            root=runs_root, driver_url=driver.url, agent_env=agent_env,
                            profiles_path=str(profiles_path) if profiles_path else None)
        try:
            run_dir = create_run(req, env={**os.environ, **agent_env})
        except (RunError, ProfileError, ValueError) as exc:
            return AgentCheck(**{**base.__dict__, "version": cli_version(found), "error": str(exc),
                                 "seconds": time.monotonic() - started})
        version = recorded_version(run_dir)
        launch_supervisor(run_dir, agent_env)
        ended = _wait_for_end(run_dir, budget_s + SETTLE_S)
        checks = judge_run(run_dir, plan, driver)
    error = None if ended else f"the run did not end within {budget_s + SETTLE_S:.0f} s; it was stopped"
    return AgentCheck(profile.name, profile.executable, found, version, run_dir, tuple(checks), error,
                      profile.install_hint, time.monotonic() - started)


def _wait_for_end(run_dir: Path, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with RunStore.of_run(run_dir) as store:
            if store.run().status not in ACTIVE_STATUSES:
                return True
        time.sleep(0.5)
    stop_run(run_dir, wait_s=60)
    return False


def judge_run(run_dir: Path, plan: _Plan, driver: RunningDriver) -> list[Check]:
    """What the record of a check's run shows, against what the driver served."""
    served: list[Served] = list(driver.calls)
    steps_served = sorted({c.step for c in served if c.step is not None})
    with RunStore.of_run(run_dir) as store:
        run = store.run()
        subs = store.submissions(kind="agent")
        rows = store.step_rows()
        containment = store.last_event_data("containment") or {}
        usage = run_usage(store)
        stream = transcript_totals(store)
    results = "\n".join(r["text"] or "" for r in rows if r["kind"] == "tool_result")
    calls = [r for r in rows if r["kind"] == "tool_call"]
    checks = [
        Check("starts in its sandbox", run.budget_start is not None and containment.get("contained") is True,
              "contained" if containment.get("contained") else
              f"not contained: {containment.get('reason') or 'it never started'}"),
        Check("calls its driver", bool(served), f"{len(served)} call(s) served" if served else
              "no call reached the driver (logs/agent.log says why)"),
        _tools_check(served),
        Check("runs commands", f"{MARK}: python 3" in results,
              "its shell ran python in the workspace" if f"{MARK}: python 3" in results else
              "no command output came back (logs/agent.log says why)"),
        _file_check(run_dir, plan),
        _submit_check(subs, results),
        Check("transcript read", len(calls) >= 3 and any(plan.file in (r["args_json"] or "") for r in calls),
              f"{len(calls)} tool call(s) read from its stream" + ("" if steps_served == [0, 1, 2, 3] else
                                                                  f"; script steps served: {steps_served}")),
        _tokens_check(usage, served),
        _stream_check(stream, served),
        Check("ends by itself", run.agent_exit_code == 0 and run.end_reason == "agent_exited",
              f"exit code {run.agent_exit_code}, end: {run.end_reason or '?'}"),
    ]
    if not (run_dir / "report" / "report.json").is_file():
        checks.append(Check("report written", False, "no report/report.json (logs/supervisor.log says why)"))
    return checks


def _tools_check(served: list[Served]) -> Check:
    scripted = [c for c in served if c.step is not None]
    unmapped = [c for c in scripted if c.intent == "unmapped"]
    if not scripted:
        return Check("finds its tools", False, "it never asked for a step of the script")
    if unmapped:
        return Check("finds its tools", False, unmapped[0].note or "a step found no tool to use")
    used = sorted({f"{c.intent}: {c.tool}" for c in scripted if c.tool})
    offered = max((len(c.offered) for c in scripted), default=0)
    return Check("finds its tools", True, f"{offered} tools offered; used {', '.join(used)}")


def _file_check(run_dir: Path, plan: _Plan) -> Check:
    revisions = list_revisions(run_dir)
    try:
        content = file_at(run_dir, revisions[-1], plan.file) if revisions else None
    except (RevisionNotFound, SnapshotError):  # never written, or the snapshot unreadable
        content = None
    ok = content == plan.file_text.encode()
    return Check("writes files", ok, f"{plan.file} recorded in revision {len(revisions)}" if ok else
                 f"{plan.file} is not in the last revision as written")


def _submit_check(subs: list[Submission], results: str) -> Check:
    scored = [s for s in subs if s.status == SubStatus.SCORED]
    if scored:
        return Check("reaches the grader and submits", True, f"submission {scored[0].id} scored {scored[0].score:.2f}")
    if subs:
        return Check("reaches the grader and submits", False, f"submission {subs[0].id} {subs[0].status}: "
                     f"{(subs[0].error or '')[:120]}")
    reached = f"{MARK}: submit answered" in results
    return Check("reaches the grader and submits", False,
                 "the grader answered but nothing was recorded" if reached else "no submission reached the grader")


def _served_totals(served: list[Served]) -> tuple[int, int]:
    billed = [c.usage for c in served if c.usage is not None]
    return sum(u.input_tokens for u in billed), sum(u.output_tokens for u in billed)


def _tokens_check(usage: RunUsage, served: list[Served]) -> Check:
    want = _served_totals(served)
    got = (usage.tokens_in, usage.tokens_out)
    if usage.source != "metered":
        return Check("tokens metered", False, f"not metered: {usage.not_metered or usage.label}")
    return Check("tokens metered", got == want, f"{got[0]:,} in / {got[1]:,} out"
                 + ("" if got == want else f"; the driver served {want[0]:,} / {want[1]:,}"))


def _stream_check(stream: dict[str, Any], served: list[Served]) -> Check:
    want = _served_totals(served)
    got = (stream["tokens_in"], stream["tokens_out"])
    if got == want:
        detail = "its stream reports every token served"
    elif got == (0, 0):
        detail = "its stream reports no tokens (the meter's count is the record)"
    else:
        detail = f"its stream reports {got[0]:,} / {got[1]:,} of {want[0]:,} / {want[1]:,} (the meter's count is the record)"
    return Check("tokens in its own stream", got == want, detail, required=False)
