"""The probes: what runs inside ``python -P -m agent2rl_tui.run.doctor.probes PROBE``
(``procs.probe`` starts it), one JSON answer on stdout.

Heavy imports (torch, the tiny model's transformers, ALFWorld, TextWorldExpress) happen
here, in those subprocesses only, never in the doctor's own process: this module imports
only light things at module level, and nothing in the package imports it (``procs.MODULE``
names it as a string).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent2rl_tui.run.doctor.procs import MODULE, distribution_version, last_line


def _exc_line(exc: BaseException) -> str:
    return last_line(f"{type(exc).__name__}: {exc}") or type(exc).__name__


def probe_imports(*modules: str) -> dict[str, Any]:
    """{module: None when it imports, else its error}."""
    out: dict[str, Any] = {}
    for module in modules:
        try:
            importlib.import_module(module)
            out[module] = None
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - whatever an import raises is its failure
            out[module] = _exc_line(exc)
    return out


def probe_torch() -> dict[str, Any]:
    import torch

    from agent2rl_tui.util.gpus import Gpus

    gpus = Gpus()
    return {"version": torch.__version__, "cuda": torch.version.cuda,
            "usable": torch.cuda.device_count() if torch.version.cuda else 0,
            "gpus": [[s.name, s.mem_total] for s in gpus.sample()], "nvml_note": gpus.reason}


def probe_tiny_model(path: str) -> dict[str, Any]:
    from agent2rl_tui.tasks.tinymodel import build_tiny_model

    return {"path": str(build_tiny_model(Path(path)))}


def probe_alfworld() -> dict[str, Any]:
    import alfworld
    import textworld  # noqa: F401 - what the adapter (envs.alfworld) imports
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos  # noqa: F401
    from textworld.envs.wrappers import Filter, GenericEnvironment  # noqa: F401

    data = Path(alfworld.__file__).parent / "data"
    return {"version": distribution_version("alfworld"), "textworld": distribution_version("textworld"),
            "data": str(data), "missing": [n for n in ("alfred.pddl", "alfred.twl2") if not (data / n).is_file()]}


def probe_textworld() -> dict[str, Any]:
    from agent2rl_tui.envs.twx import TextWorldExpress

    env = TextWorldExpress("coin", step_limit=5)
    try:
        start = env.reset("train:0")
        admissible = start.admissible
        if not admissible:
            raise RuntimeError("TextWorldExpress listed no admissible actions")
        action = "look around" if "look around" in admissible else admissible[0]
        outcome = env.step(action)
    finally:
        env.close()
    return {"version": distribution_version("textworld-express"), "action": action,
            "observation": " ".join(outcome.observation.split())[:60]}


PROBES: dict[str, Callable[..., dict[str, Any]]] = {
    "imports": probe_imports, "torch": probe_torch, "tiny-model": probe_tiny_model, "alfworld": probe_alfworld,
    "textworld": probe_textworld,
}


def probe_main(argv: list[str]) -> int:
    """Answer one JSON line on a private copy of stdout; whatever the probe prints goes to stderr."""
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if not argv or argv[0] not in PROBES:
        print(f"usage: python -m {MODULE} {{{','.join(PROBES)}}} [ARGS]", file=sys.stderr)
        return 2
    try:
        answer = PROBES[argv[0]](*argv[1:])
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the failure is the answer
        answer = {"error": _exc_line(exc)}
    answers.write(json.dumps(answer) + "\n")
    answers.flush()
    return 0


if __name__ == "__main__":
    code = probe_main(sys.argv[1:])
    sys.stderr.flush()
    os._exit(code)  # no teardown: torch's and a JVM's take seconds, and the answer is written
