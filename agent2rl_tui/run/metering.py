"""Where a run's agent sends its driver-API calls, and the meter process in front of that.

Every run of an agent CLI is metered unless it cannot be or the user says not to
(``--no-meter``): the supervisor starts ``llm.meter`` (a loopback proxy that records each call
in run.db) and points the CLI at it instead of at the API (``profiles.driver_setup`` with the
meter's URL). The meter forwards to the *upstream*, decided here:

- ``--driver-url`` when the run names one;
- else the base URL the user set for the CLI (``ANTHROPIC_BASE_URL``, ``GOOGLE_GEMINI_BASE_URL``,
  ``LLM_BASE_URL``), else the CLI's own public API, where the CLI signs in in a way that API
  takes (Claude: a key or its login; Codex and Gemini: an API key).

A CLI whose calls go somewhere a base URL cannot reach (Codex signed in with ChatGPT, Gemini
with a Google account or Vertex, Claude on Bedrock or Vertex, OpenCode's own providers) runs
unmetered, and the record says why, as it says "not contained". Caps (``--max-tokens``,
``--max-cost``) need the meter: a capped run that cannot be metered is refused before it exists.

The meter is a process of its own (its crash cannot take the supervisor or the record with it),
in the supervisor's process group, outside the agent's sandbox; its log is ``logs/meter.log``.
One that dies mid-run is started again on the same port (the agent's URL stays right) and the
record says so (``meter_died``).

The meter holds the driver keys (`hold_keys`): each key variable of the agent's environment
(``*_API_KEY``, ``*_AUTH_TOKEN``) is given to the meter on its stdin and replaced, for the agent,
by a per-run token the meter alone accepts; the CLI's login files are then not copied into its
home. An agent with no key variable signs in with its own login, which the meter cannot hold:
the record says so.
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from agent2rl_tui.llm.meter.keys import HeldKey, KeyRing, new_token
from agent2rl_tui.record.root import RunError
from agent2rl_tui.run.profiles import AgentProfile
from agent2rl_tui.run.services import ServiceError
from agent2rl_tui.util import procs

START_TIMEOUT_S = 30.0
STOP_GRACE_S = 5.0
RESTARTS = 3


KEY_VARIABLE = re.compile(r"(^|_)(API_KEY|AUTH_TOKEN)$")
"""The agent's variables that hold a driver credential, which the meter holds in its stead."""


class MeterError(ServiceError):
    """The meter could not be started."""


@dataclass(frozen=True)
class MeterPlan:
    """Where the meter forwards (``upstream``), or why the run is not metered (``reason``)."""

    upstream: str | None
    reason: str | None = None
    requested: bool = True
    """False when the user turned the meter off (``--no-meter``)."""

    def record(self) -> dict[str, Any]:
        """The ``meter`` event of an unmetered run (a metered one's is the meter's own)."""
        return {"metered": False, "reason": self.reason, "requested": self.requested}


_ANY_KEY = {"codex": ("CODEX_API_KEY", "OPENAI_API_KEY"), "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY")}


def plan_meter(profile: AgentProfile, driver_url: str | None, env: dict[str, str], *,
               enabled: bool = True) -> MeterPlan | None:
    """The meter plan of a run of ``profile`` (``env``: the user's environment), or None for an
    agent that calls no driver API of its own (the command and example agents)."""
    gateway = profile.gateway
    if gateway is None:
        return None
    if not enabled:
        return MeterPlan(None, "started with --no-meter: tokens and cost are the agent's own account",
                         requested=False)
    if driver_url:
        return MeterPlan(driver_url)
    if gateway == "anthropic":
        if env.get("CLAUDE_CODE_USE_BEDROCK") or env.get("CLAUDE_CODE_USE_VERTEX"):
            return MeterPlan(None, "Claude Code on Bedrock or Vertex signs its calls for that cloud; give "
                                   "--driver-url (a gateway) to meter it")
        return MeterPlan(env.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com")
    if gateway == "codex":
        if not any(env.get(k) for k in _ANY_KEY["codex"]):
            return MeterPlan(None, "Codex without CODEX_API_KEY or OPENAI_API_KEY signs in with ChatGPT, whose "
                                   "backend a base URL cannot reach; give it an API key or --driver-url to meter it")
        return MeterPlan("https://api.openai.com")
    if gateway == "gemini":
        if env.get("GOOGLE_GENAI_USE_VERTEXAI") or not any(env.get(k) for k in _ANY_KEY["gemini"]):
            return MeterPlan(None, "Gemini CLI without GEMINI_API_KEY (a Google account or Vertex) calls an API "
                                   "a base URL cannot reach; give it an API key or --driver-url to meter it")
        return MeterPlan(env.get("GOOGLE_GEMINI_BASE_URL") or "https://generativelanguage.googleapis.com")
    if gateway == "openhands" and env.get("LLM_BASE_URL"):
        return MeterPlan(env["LLM_BASE_URL"])
    return MeterPlan(None, f"{profile.name} picks its provider in its own configuration; give --driver-url "
                           "(the API's root) to meter it")


def hold_keys(profile: AgentProfile, env: dict[str, str]) -> KeyRing:
    """The keys the meter holds for an agent whose environment is ``env``: one per key variable
    set, each with a fresh token (put in the agent's environment in the key's stead)."""
    held = tuple(HeldKey(name, new_token(), value) for name, value in sorted(env.items())
                 if KEY_VARIABLE.search(name) and value.strip())
    if held:
        return KeyRing(held)
    return KeyRing(note=f"{profile.name} has no key variable set, so it signs in with a login of its own: its "
                        "credential is in its sandbox and passes through the meter, and it could call its API "
                        "around the meter")


def check_caps(max_tokens: int | None, max_cost_usd: float | None, plan: MeterPlan | None) -> None:
    """Refuse caps that cannot be enforced: negative, or on a run without the meter."""
    for name, value in (("--max-tokens", max_tokens), ("--max-cost", max_cost_usd)):
        if value is None:
            continue
        if value < 0:
            raise RunError(f"{name} {value}: give a number of at least 0")
        if plan is None:
            raise RunError(f"{name}: this agent calls no driver API; drop it")
        if plan.upstream is None:
            raise RunError(f"{name} needs the meter, and this run cannot be metered: {plan.reason}")


class MeterProcess:
    """``python -m agent2rl_tui.llm.meter`` for one run: started, watched, restarted, stopped
    (a ``run.services.Service``)."""

    name = "meter"
    died_event = restarted_event = "meter_died"
    max_restarts = RESTARTS

    def __init__(self, run_dir: Path, upstream: str, *, max_tokens: int | None = None,
                 max_cost_usd: float | None = None, prices: str | None = None, keys: KeyRing | None = None) -> None:
        self.run_dir = run_dir
        self.upstream = upstream
        self.keys = keys or KeyRing()
        self.options: list[str] = []
        if max_tokens is not None:
            self.options += ["--max-tokens", str(max_tokens)]
        if max_cost_usd is not None:
            self.options += ["--max-cost", str(max_cost_usd)]
        if prices:
            self.options += ["--prices", prices]
        self.popen: subprocess.Popen[bytes] | None = None
        self._stdout: IO[bytes] | None = None
        self.url: str | None = None
        self.port = 0
        self.restarts = 0

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    def start(self) -> str:
        """Start it (on the port of the last one, if any) and return its base URL."""
        log = (self.run_dir / "logs" / "meter.log").open("ab")
        with log:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "agent2rl_tui.llm.meter", "--run-dir", str(self.run_dir),
                 "--upstream", self.upstream, "--port", str(self.port), "--grace", str(STOP_GRACE_S),
                 "--keys-on-stdin", *self.options],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, close_fds=True,
                env={**{k: v for k, v in os.environ.items() if not k.startswith("AGENT2RL_AGENT")},
                     procs.DIE_WITH_ENV: str(os.getpid())})  # it ends with the supervisor, however that ends
        assert self.popen.stdout is not None and self.popen.stdin is not None
        try:  # the keys on a pipe, never on its command line
            self.popen.stdin.write(self.keys.to_line().encode())
            self.popen.stdin.close()
        except OSError:
            pass  # it ended already: its first line says why
        self._stdout = self.popen.stdout
        line = _first_line(self._stdout, self.popen, START_TIMEOUT_S)
        if not line.startswith("http://"):
            self.stop()
            raise MeterError(f"the meter did not start ({line or 'no answer'}); see logs/meter.log")
        self.url = line
        self.port = int(line.rsplit(":", 1)[1])
        return line

    def died(self) -> int | None:
        """The exit code of a meter that ended by itself, else None."""
        return self.popen.poll() if self.popen is not None else None

    def restart(self) -> str:
        """A new meter on the port of the one that died (the agent's driver URL)."""
        self.stop()
        return self.start()

    def stop(self, grace_s: float = STOP_GRACE_S + 5.0) -> None:
        """SIGTERM (calls under way get the meter's grace, then are recorded as they stand), then
        SIGKILL if it does not end."""
        popen, self.popen = self.popen, None
        if popen is None:
            return
        procs.stop_process(popen, grace_s)
        if self._stdout is not None:
            self._stdout.close()
            self._stdout = None


def _first_line(stream: IO[bytes], popen: subprocess.Popen[bytes], timeout_s: float) -> str:
    """The process's first stdout line, without blocking past ``timeout_s`` or its exit."""
    fd, data, deadline = stream.fileno(), b"", time.monotonic() + timeout_s
    while b"\n" not in data and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
        elif popen.poll() is not None:
            break
    return data.split(b"\n", 1)[0].decode("utf-8", "replace").strip()[:300]
