"""A scripted driver's script: the steps an agent should take, by intent, in a JSON or TOML file.

    # TOML                                       // JSON
    model = "scripted"          # optional         {"steps": [{"run": "ls"},
    cached_percent = 0          # optional          {"write": {"path": "a.py", "content": "x"}},
    steps = [                                        {"answer": "done"}]}
      {run = "python -V", say = "Checking."},
      {write = {path = "code/a.py", content = "print(1)\n"}},
      {answer = "Done."},
    ]

``run`` a shell command, ``write`` a file, ``answer`` text that ends the session (last step
only; a script without one ends with "Done."). ``say`` adds text before a step's tool call.
``cached_percent`` reports that share of every prompt as read from a cache (to exercise a
meter's cached count). ``cwd``: the agent's working folder, for tools that need absolute paths
when the request does not state it. A JSON file may also be a bare list of steps.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RUN, WRITE, ANSWER = "run", "write", "answer"


class ScriptError(ValueError):
    """The script file cannot be read or does not follow the format."""


@dataclass(frozen=True)
class Step:
    kind: str
    command: str = ""
    path: str = ""
    content: str = ""
    text: str = ""  # the answer, or the text said before a tool call

    def describe(self) -> str:
        if self.kind == RUN:
            return f"run {self.command!r}"
        if self.kind == WRITE:
            return f"write {self.path!r} ({len(self.content)} chars)"
        return f"answer {self.text[:40]!r}"


@dataclass(frozen=True)
class Script:
    steps: tuple[Step, ...]
    model: str | None = None
    cached_percent: int = 0
    cwd: str | None = None

    @property
    def answer(self) -> Step:
        return self.steps[-1]


def parse_step(raw: Any, n: int) -> Step:
    where = f"step {n + 1}"
    if not isinstance(raw, dict):
        raise ScriptError(f"{where}: a step is a table such as {{run = \"ls\"}}, not {type(raw).__name__}")
    kinds = [k for k in (RUN, WRITE, ANSWER) if k in raw]
    unknown = sorted(set(raw) - {RUN, WRITE, ANSWER, "say"})
    if len(kinds) != 1 or unknown:
        raise ScriptError(f"{where}: give exactly one of run, write, answer (and optionally say); got {sorted(raw)}")
    say = raw.get("say", "")
    if not isinstance(say, str):
        raise ScriptError(f"{where}: say must be text")
    kind = kinds[0]
    value = raw[kind]
    if kind == RUN:
        if not isinstance(value, str) or not value.strip():
            raise ScriptError(f"{where}: run takes a non-empty command string")
        return Step(RUN, command=value, text=say)
    if kind == WRITE:
        if not isinstance(value, dict) or not isinstance(value.get("path"), str) or not value["path"]:
            raise ScriptError(f"{where}: write takes {{path = \"...\", content = \"...\"}}")
        content = value.get("content", "")
        if not isinstance(content, str) or set(value) - {"path", "content"}:
            raise ScriptError(f"{where}: write takes only a path and a content string")
        return Step(WRITE, path=value["path"], content=content, text=say)
    if not isinstance(value, str):
        raise ScriptError(f"{where}: answer takes text")
    if say:
        raise ScriptError(f"{where}: an answer is its own text; say is for run and write")
    return Step(ANSWER, text=value)


def build(data: Any) -> Script:
    """A `Script` from parsed JSON/TOML data."""
    if isinstance(data, list):
        data = {"steps": data}
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise ScriptError("a script has a list of steps: steps = [{run = \"...\"}, ..., {answer = \"...\"}]")
    steps = [parse_step(raw, n) for n, raw in enumerate(data["steps"])]
    for n, step in enumerate(steps[:-1]):
        if step.kind == ANSWER:
            raise ScriptError(f"step {n + 1}: an answer ends the session, so only the last step can be one")
    if not steps or steps[-1].kind != ANSWER:
        steps.append(Step(ANSWER, text="Done."))
    model = data.get("model")
    percent = data.get("cached_percent", 0)
    cwd = data.get("cwd")
    if model is not None and not isinstance(model, str):
        raise ScriptError("model must be text")
    if isinstance(percent, bool) or not isinstance(percent, int) or not 0 <= percent <= 100:
        raise ScriptError("cached_percent must be a whole number from 0 to 100")
    if cwd is not None and (not isinstance(cwd, str) or not cwd.startswith("/")):
        raise ScriptError("cwd must be an absolute path")
    unknown = sorted(set(data) - {"steps", "model", "cached_percent", "cwd"})
    if unknown:
        raise ScriptError(f"unknown keys: {unknown}")
    return Script(tuple(steps), model, percent, cwd)


def load_script(path: str | Path) -> Script:
    """Read a script file: TOML when it ends in .toml, JSON otherwise."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScriptError(f"cannot read {p}: {exc.strerror or exc}") from exc
    try:
        data = tomllib.loads(text) if p.suffix.lower() == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as exc:
        raise ScriptError(f"{p}: {exc}") from exc
    return build(data)
