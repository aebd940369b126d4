"""The doctor's subprocesses: whatever could hang or crash runs through ``run``, in a process
group of its own under a timeout, killed whole at the deadline, and offline; ``probe`` runs
one of the probes (``probes``) that way, in a fresh interpreter. Also what is installed,
asked without importing it.

Apart from the checks so that each check module, the package's front (``diagnose`` kills
what is left when it is left early) and the probes share one set of timeouts and one
record of the process groups running now.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent2rl_tui.util.versions import version_line

MODULE = "agent2rl_tui.run.doctor.probes"
"""The probes' entry point, ``python -P -m MODULE PROBE``. Named here, not in ``probes``, so
that importing the package never imports ``probes`` (``-m`` would then find it imported)."""
VERSION_TIMEOUT_S = 90.0
"""A program's ``--version``: openhands imports its SDK first (7 s of CPU; over 30 s on two cores
loaded three times over), gemini takes ~5 s."""
IMPORTS_TIMEOUT_S = 240.0
"""The core imports in one interpreter (~30 s on two cores: trl's trainers import vLLM)."""
PROBE_TIMEOUT_S = 120.0
"""torch and the GPUs, the tiny model, ALFWorld's imports, a TextWorldExpress step."""
VLLM_TIMEOUT_S = 300.0
"""The eval worker's imports, vLLM's engine start and one item (~30 s on two CPU cores)."""


@dataclass(frozen=True)
class Ran:
    """What a subprocess did. ``code`` None: it did not start, or ran past its timeout."""

    code: int | None
    out: str = ""
    err: str = ""
    error: str = ""
    """Why there is no exit code: it could not start, or no answer in time."""

    def why(self) -> str:
        """Why it failed, on one line."""
        if self.error:
            return self.error
        tail = last_line(self.err) or last_line(self.out)
        return f"exit code {self.code}" + (f": {tail}" if tail else "")


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def child_env() -> dict[str, str]:
    """This environment, offline unless it says otherwise: no check waits on the hub, nor on
    LiteLLM's price list (OpenHands' SDK fetches it from GitHub at import, retrying, unless told
    to read its own copy)."""
    return {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True", **os.environ}


_live: set[int] = set()
"""Process groups of the subprocesses running now (``run``): ``diagnose`` kills what is left
of them when it is left early (Ctrl-C: they are in sessions of their own, out of its reach)."""
_live_lock = threading.Lock()


def run(argv: Sequence[str], timeout: float, *, stdin: str | None = None) -> Ran:
    """``argv`` to its end or for ``timeout`` seconds, in a process group of its own that is
    killed whole at the deadline (a grandchild holding the pipes cannot keep us waiting)."""
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                                env=child_env(), start_new_session=True)
    except OSError as exc:
        return Ran(None, error=f"{argv[0]} could not be started: {exc.strerror or exc}")
    with _live_lock:
        _live.add(proc.pid)
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # one that left the group holds a pipe: stop reading
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
            proc.wait()
            out, err = "", ""
        return Ran(None, out or "", err or "", error=f"no answer in {timeout:.0f} s (killed)")
    finally:
        with _live_lock:
            _live.discard(proc.pid)
    return Ran(proc.returncode, out, err)


def _kill_group(pgid: int) -> None:
    from agent2rl_tui.util.procs import signal_group

    signal_group(pgid, signal.SIGKILL)


def kill_live() -> None:
    """Kill the process groups of the subprocesses still running (``diagnose``, left early)."""
    with _live_lock:
        running = list(_live)
    for pgid in running:
        _kill_group(pgid)


def probe(name: str, *args: str, timeout: float = PROBE_TIMEOUT_S) -> dict[str, Any]:
    """Run one of ``probes.PROBES`` in a fresh interpreter (``-P``: the current folder cannot
    shadow a package); its answer, or {"error": why} when it gave none."""
    ran = run([sys.executable, "-P", "-m", MODULE, name, *args], timeout)
    try:
        answer = json.loads(ran.out.strip().splitlines()[-1])
    except (IndexError, ValueError):
        answer = None
    return answer if isinstance(answer, dict) else {"error": ran.why()}


def program_version(path: str, *args: str) -> tuple[str, Ran]:
    """``PATH ARGS`` (``--version`` by default): its version line ("" when it failed), what it did."""
    ran = run([path, *(args or ("--version",))], VERSION_TIMEOUT_S)
    return (version_line(ran.out + "\n" + ran.err) if ran.code == 0 else ""), ran


def distribution_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def installed(module: str) -> bool:
    """The top-level package is there (found, not imported)."""
    try:
        return importlib.util.find_spec(module.split(".")[0]) is not None
    except (ImportError, ValueError):
        return False
