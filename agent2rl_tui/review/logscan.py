"""What the agent's transcript says happened, read without an LLM: commands, training, failures.

One pass over the run's transcript (the ``steps`` table: the agent's own lines for a plain
agent, tool calls and their output for an agent CLI) collects, each with its time:

- the command lines the agent ran (a tool call's ``command``, or a line that runs
  ``python x.py`` / ``torchrun`` / ``accelerate launch`` / ``bash x.sh``) and, for tool calls,
  how long each ran (the call to its result);
- training: a trainer's ``train_runtime`` (the seconds it trained, ending at that line) and
  lines that log a loss;
- failures: a traceback's exception line (out of memory told apart), a NaN or infinite loss,
  GRPO logs whose reward spread is zero on every logged step (no learning signal).

Everything here is the agent's text: lines are capped and made printable before they are kept.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from agent2rl_tui.review.codefacts import one_line

CODE_ERROR, OOM, DIVERGED, NO_SIGNAL = "code_error_runtime", "out_of_memory", "training_diverged", "rollout_logic_wrong"

COMMAND_RE = re.compile(r"\b(python[\d.]*\s+(?:-[\w-]+\s+)*[\w./-]+\.py\b.*|torchrun\s.*|accelerate\s+launch\s.*|"
                        r"deepspeed\s.*|(?:bash|sh)\s+[\w./-]+\.sh\b.*)")
TRACEBACK = "Traceback (most recent call last)"
EXCEPTION_RE = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Killed)|Killed)\b:?")
OOM_RE = re.compile(r"CUDA out of memory|OutOfMemoryError|\bMemoryError\b|out of memory|^Killed$", re.I)
NAN_RE = re.compile(r"""['"]?\b(loss|train_loss)['"]?\s*[:=]\s*['"]?(nan|-?inf)\b""", re.I)
RUNTIME_RE = re.compile(r"""['"]train_runtime['"]\s*:\s*['"]?([\d.]+)""")
LOSS_RE = re.compile(r"""['"]loss['"]\s*:|\bloss\s*[=:]\s*-?[\d.]""", re.I)
REWARD_STD_RE = re.compile(r"""['"]reward_std['"]\s*:\s*['"]?(-?[\d.]+(?:e-?\d+)?)""")
LOSS_BURST_GAP_S = 180.0
"""Loss lines closer than this belong to one stretch of training."""
MAX_SIGNALS = 2_000


@dataclass(frozen=True)
class Signal:
    """A line of the transcript that shows a failure: its kind, time and (capped) text."""

    at: float
    kind: str
    text: str

    def as_json(self) -> dict[str, object]:
        return {"at": self.at, "kind": self.kind, "text": self.text}


@dataclass(frozen=True)
class Command:
    """A command the agent ran, with how long it ran where the transcript says (a tool call)."""

    at: float
    text: str
    ended: float | None = None


@dataclass
class LogFacts:
    commands: list[Command] = field(default_factory=list)
    failures: list[Signal] = field(default_factory=list)
    runtimes: list[tuple[float, float]] = field(default_factory=list)  # (at, seconds trained)
    loss_lines: list[float] = field(default_factory=list)
    reward_std: list[tuple[float, float]] = field(default_factory=list)

    def training_intervals(self) -> list[tuple[float, float]]:
        """When training ran: each trainer's reported runtime, and each stretch of loss lines
        (lines closer than ``LOSS_BURST_GAP_S``, ended early by a trainer's runtime line)."""
        spans = [(at - seconds, at) for at, seconds in self.runtimes]
        ends = sorted(at for at, _ in self.runtimes)
        burst: list[float] = []
        for at in self.loss_lines + [float("inf")]:
            if burst and (at - burst[-1] > LOSS_BURST_GAP_S or _ended_between(ends, burst[-1], at)):
                spans.append((burst[0], burst[-1]))
                burst = []
            burst.append(at)
        return spans

    def failures_in(self, start: float, end: float) -> list[Signal]:
        """The failures logged in (start, end], and a GRPO that never had a learning signal there."""
        found = [s for s in self.failures if start < s.at <= end]
        stds = _between(self.reward_std, start, end)
        if len(stds) >= 2 and all(v == 0 for _, v in stds):
            found.append(Signal(stds[-1][0], NO_SIGNAL, f"reward_std 0 on all {len(stds)} logged steps: every "
                                                        "group's rewards were equal, so GRPO had no advantage to learn from"))
        return found


def _ended_between(ends: list[float], start: float, end: float) -> bool:
    """Whether a trainer reported its runtime (ended) in [start, end); ``ends`` sorted."""
    i = bisect.bisect_left(ends, start)
    return i < len(ends) and ends[i] < end


def _between(rows: list[tuple[float, float]], start: float, end: float) -> list[tuple[float, float]]:
    """The (at, value) rows with start < at <= end, from rows in the transcript's order (by time)."""
    lo = bisect.bisect_right(rows, (start, float("inf")))
    hi = bisect.bisect_right(rows, (end, float("inf")))
    return rows[lo:hi]


def _command_text(args_json: str | None) -> str | None:
    if not args_json:
        return None
    try:
        args = json.loads(args_json)
    except (ValueError, RecursionError):
        return None
    if not isinstance(args, dict):
        return None
    cmd = args.get("command") or args.get("cmd")
    if isinstance(cmd, list):
        cmd = " ".join(str(c) for c in cmd)
    return cmd if isinstance(cmd, str) else None


def scan(steps: Iterable[tuple[float, str, str | None, str | None, str, str | None]]) -> LogFacts:
    """One pass over the transcript's steps: (at, kind, tool, call_id, text, args_json)."""
    facts = LogFacts()
    open_calls: dict[str, int] = {}  # call id -> its command's index
    in_traceback = False
    for at, kind, _tool, call_id, text, args_json in steps:
        if kind == "tool_call":
            cmd = _command_text(args_json)
            if cmd:
                command = Command(at, one_line(cmd, 400))
                facts.commands.append(command)
                if call_id:
                    open_calls[call_id] = len(facts.commands) - 1
            continue
        if kind == "tool_result" and call_id and call_id in open_calls:
            i = open_calls.pop(call_id)
            facts.commands[i] = Command(facts.commands[i].at, facts.commands[i].text, at)
        for line in (text or "").splitlines():
            in_traceback = _line(facts, at, line, in_traceback, kind)
    facts.reward_std.sort()  # by time, for failures_in's bisection
    return facts


COMMAND_HINTS = ("python", "torchrun", "accelerate", "deepspeed", ".sh")


def _line(facts: LogFacts, at: float, line: str, in_traceback: bool, kind: str) -> bool:
    """Take one line; returns whether a traceback is still being read. Each pattern is tried only
    on lines holding its keyword (a long run's transcript has hundreds of thousands of lines)."""
    if TRACEBACK in line:
        return True
    lower = line.lower()
    stripped = line.strip()
    if kind in ("message", "raw") and any(h in lower for h in COMMAND_HINTS) and (m := COMMAND_RE.search(line)):
        facts.commands.append(Command(at, one_line(m.group(1), 400)))
    if len(facts.failures) < MAX_SIGNALS:
        if in_traceback and line[:1] not in (" ", "\t", "") and EXCEPTION_RE.match(stripped):
            facts.failures.append(Signal(at, OOM if OOM_RE.search(stripped) else CODE_ERROR, one_line(stripped)))
            in_traceback = False
        elif not in_traceback and ("memory" in lower or "killed" in lower) and OOM_RE.search(stripped):
            facts.failures.append(Signal(at, OOM, one_line(stripped)))
        elif ("nan" in lower or "inf" in lower) and "loss" in lower and NAN_RE.search(line):
            facts.failures.append(Signal(at, DIVERGED, one_line(stripped)))
    if "loss" in lower:
        if "train_runtime" in line and (m := RUNTIME_RE.search(line)):
            facts.runtimes.append((at, float(m.group(1))))
        elif LOSS_RE.search(line):
            facts.loss_lines.append(at)
    elif "train_runtime" in line and (m := RUNTIME_RE.search(line)):
        facts.runtimes.append((at, float(m.group(1))))
    if "reward_std" in line and (m := REWARD_STD_RE.search(line)):
        try:
            facts.reward_std.append((at, float(m.group(1))))
        except ValueError:
            pass
    return in_traceback
