"""The run as iterations: what the agent did for each submission, how it went, the route it took.

An iteration is the stretch of a run that ends in a submission (the first starts at the
budget's start, each next one at the submission before). For each, without any LLM:

- the training type and the key configuration, from the code of the revision the
  submission was made from (``review.codefacts``): the scripts run in that stretch where the
  transcript names them, else the code files changed since the previous submission, else all;
- what changed since the previous submission (files, lines) and the key code lines;
- where the time went (training, the grader evaluating, the driver LLM thinking, other
  commands, idle), from the processes seen running a training command (first to last seen), the
  transcript (trainers' runtimes and loss lines, timed tool calls),
  the vitals (a busy GPU while the grader was not evaluating), the record's evaluations and the
  metered calls; "idle" is what none of them covers (a plain agent's script starting up counts);
- a failure type, with its evidence, for an attempt that failed or trained badly:
  AutoRL-Bench's names (``code_error_runtime``, ``rollout_logic_wrong``,
  ``timeout_no_submission``, ``copy_model_fallback``, ``training_diverged``, ``unknown``) and
  ours where they do not fit (``out_of_memory``, ``submission_invalid``: the grader could not
  score it, ``exited_no_submission``: the agent ended without submitting in time).

A stretch after the last submission becomes an iteration of its own when something failed
or trained there (work that never reached the grader), and a run without a submission is one
failed iteration. ``route`` says the whole run in a line: "SFT → GRPO (online, 3 iterations)".

Claims only from what ran: the code says what a submission's training *would* be; that it ran
is taken only from the processes the supervisor sampled outside the sandbox (``agent_processes``:
command lines and CPU time), never from a file existing or a line the agent printed. An
iteration whose code no sampled process ran is "written, not seen
running" (or, when it logged a failure or the train-environment service played steps in that
stretch, neither seen nor denied: a process can end between two samples). "Online" needs code that
rolls out and either a sampled process that ran it or steps the service played in that stretch (an
agent may roll out with the play kit in its own process). A run recorded before processes were
sampled says neither.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from agent2rl_tui.record.revisions import GitRepo, SnapshotError
from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.seen_processes import process_spans, processes_between
from agent2rl_tui.record.store import RunStore, Submission, SubStatus
from agent2rl_tui.review.agent_summary import read_summary, sections_about
from agent2rl_tui.review.codefacts import (
    COPY,
    MAX_FILE_BYTES,
    MAX_FILES,
    UNKNOWN,
    CodeFacts,
    Evidence,
    Setting,
    analyse,
    is_code_path,
    one_line,
    scripts_executed,
    scripts_in,
)
from agent2rl_tui.review.logscan import CODE_ERROR, LogFacts, Signal, scan
from agent2rl_tui.util.numbers import is_digits
from agent2rl_tui.util.timeutil import iso

BASE_COPY, INVALID = "copy_model_fallback", "submission_invalid"
TIMEOUT_NONE, EXITED_NONE = "timeout_no_submission", "exited_no_submission"
TRAINING_SCRIPT = re.compile(r"train|sft|grpo|ppo|dpo|finetun|rlhf|rollout", re.I)
LAUNCHER = re.compile(r"^\s*(torchrun|accelerate\s+launch|deepspeed)\b")
EVAL_SCRIPT = re.compile(r"eval|bench", re.I)
CONSTRUCTS = re.compile(r"\w(Trainer|Config)\s*\(")
GPU_BUSY_PCT = 30.0
"""A GPU at least this busy in the vitals, the grader not evaluating, counts as the agent training."""
TIME_KINDS = ("training_s", "evaluating_s", "thinking_s", "commands_s", "idle_s")


@dataclass
class Changes:
    """Files changed since the previous submission's revision, with a one-line summary."""

    files: list[dict[str, Any]] = field(default_factory=list)
    summary: str = "no change"

    def as_json(self) -> dict[str, Any]:
        return {"files": self.files, "summary": self.summary}


@dataclass
class Iteration:
    """One attempt: AutoRL-Bench's summary.jsonl fields, then ours."""

    iteration: int
    timestamp: str | None
    duration_s: float
    status: str  # success | failed
    exit_code: int | None
    score: float | None
    improvement: float | None
    train_type: str
    failure_type: str | None
    submission_id: int | None = None
    submission_status: str | None = None
    elapsed_s: float | None = None
    best: dict[str, Any] | None = None
    revision: int | None = None
    online: bool = False
    train_evidence: list[Evidence] = field(default_factory=list)
    online_evidence: list[Evidence] = field(default_factory=list)
    key_config: dict[str, Setting] = field(default_factory=dict)
    changes: Changes = field(default_factory=Changes)
    key_code: list[Evidence] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    time: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    failure_evidence: list[Signal] = field(default_factory=list)
    observed: bool | None = None  # its code seen running in a sampled process (None: no process record)
    seen_running: list[str] = field(default_factory=list)  # those processes' command lines
    significance: str | None = None  # vs the baseline: better, worse, within noise
    agent_summary: str | None = None  # the sections of the agent's summary.md about this iteration (its words)

    def as_json(self) -> dict[str, Any]:
        seen = {} if self.observed is None else {"observed": self.observed, "seen_running": self.seen_running}
        return {
            "iteration": self.iteration, "timestamp": self.timestamp, "duration_s": round(self.duration_s, 3),
            "status": self.status, "exit_code": self.exit_code, "score": self.score,
            "improvement": self.improvement, "train_type": self.train_type, "failure_type": self.failure_type,
            "submission_id": self.submission_id, "submission_status": self.submission_status,
            "elapsed_s": self.elapsed_s, "best": self.best, "revision": self.revision, "online": self.online,
            "train_evidence": [e.as_json() for e in self.train_evidence],
            "online_evidence": [e.as_json() for e in self.online_evidence],
            "key_config": {k: s.as_json() for k, s in self.key_config.items()},
            "changes": self.changes.as_json(),
            "key_code": [e.as_json() for e in self.key_code],
            "commands": self.commands,
            "time": {k: round(v, 1) for k, v in self.time.items()},
            "problems": self.problems,
            "failure_evidence": [s.as_json() for s in self.failure_evidence],
            "significance": self.significance,
            "agent_summary": self.agent_summary,
        } | seen


@dataclass
class Diagnosis:
    iterations: list[Iteration]
    route: str

    def as_json(self) -> dict[str, Any]:
        return {"route": self.route, "iterations": [it.as_json() for it in self.iterations]}


# -- reading the code of a revision ----------------------------------------------------------------

class CodeReader:
    """The code files of revisions in snapshots.git, each revision read once (one ``git cat-file
    --batch``), capped: files over ``MAX_FILE_BYTES`` and past ``MAX_FILES`` are left out."""

    def __init__(self, run_dir: Path) -> None:
        self.repo = GitRepo(Path(run_dir) / "snapshots.git")
        self.read: dict[str, dict[str, str]] = {}

    def files(self, sha: str) -> dict[str, str]:
        if sha not in self.read:
            try:
                self.read[sha] = self._files(sha)
            except SnapshotError:
                self.read[sha] = {}
        return self.read[sha]

    def _files(self, sha: str) -> dict[str, str]:
        listing = self.repo.run("ls-tree", "-r", "-l", "-z", sha)
        wanted: list[tuple[str, str]] = []
        for entry in listing.split("\0"):
            meta, _, path = entry.partition("\t")
            parts = meta.split()
            if len(parts) != 4 or parts[1] != "blob" or not is_digits(parts[3]):
                continue
            if int(parts[3]) <= MAX_FILE_BYTES and is_code_path(path):
                wanted.append((parts[2], path))
        wanted = wanted[:MAX_FILES]
        if not wanted:
            return {}
        out = self.repo.run("cat-file", "--batch", stdin=b"".join(s.encode() + b"\n" for s, _ in wanted), binary=True)
        files: dict[str, str] = {}
        pos = 0
        for _sha, path in wanted:
            end = out.index(b"\n", pos)
            header = out[pos:end].split()
            size = int(header[2]) if len(header) == 3 else 0
            files[path] = out[end + 1:end + 1 + size].decode("utf-8", "replace")
            pos = end + 1 + size + 1
        return files


def is_training_command(command: str) -> bool:
    """A command that trains: a launcher, or a script named for training (``train.py``, ``grpo.py``)."""
    return bool(LAUNCHER.match(command)) or any(TRAINING_SCRIPT.search(PurePosixPath(s).name) for s in scripts_in(command))


def runs_training(cmdline: str) -> bool:
    """A sampled process that trains: a launcher, or the script it executes is named for training.
    A shell whose inline code only names such a script does not (``scripts_executed``)."""
    return bool(LAUNCHER.match(cmdline)) or any(TRAINING_SCRIPT.search(PurePosixPath(s).name)
                                                for s in scripts_executed(cmdline))


def is_eval_command(command: str) -> bool:
    return any(EVAL_SCRIPT.search(PurePosixPath(s).name) for s in scripts_in(command))


def _matches(path: str, script: str) -> bool:
    script = script.lstrip("./")
    return path == script or path.endswith("/" + script) or script.endswith("/" + path)


LOCAL_IMPORT_RE = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import|import\s+([\w.]+))", re.M)


def scripts_run(files: dict[str, str], commands: list[str],
                reader: Callable[[str], list[str]] = scripts_in) -> dict[str, str]:
    """The files the commands ran (``reader``: the scripts a command names; a sampled process's own
    are ``scripts_executed``), with the local modules those import."""
    ran = {s for c in set(commands) for s in reader(c)}
    chosen = {p for p in files for s in ran if _matches(p, s)}
    todo = list(chosen)
    while todo:
        path = todo.pop()
        folder = PurePosixPath(path).parent
        for m in LOCAL_IMPORT_RE.finditer(files[path]):
            name = (m.group(1) or m.group(2)).split(".")[0]
            local = str(folder / f"{name}.py") if str(folder) != "." else f"{name}.py"
            if local in files and local not in chosen:
                chosen.add(local)
                todo.append(local)
    return {p: files[p] for p in sorted(chosen)}


# -- the stretches and their times -------------------------------------------------------------------

def exclusive_seconds(start: float, end: float, labelled: list[tuple[str, list[tuple[float, float]]]]) -> dict[str, float]:
    """Seconds of [start, end] under each label, the earlier label winning where they overlap;
    the rest is ``idle_s``."""
    points = {start, end}
    clipped: list[tuple[str, list[tuple[float, float]]]] = []
    for label, spans in labelled:
        inside = [(max(a, start), min(b, end)) for a, b in spans if b > start and a < end and b > a]
        clipped.append((label, inside))
        for a, b in inside:
            points.update((a, b))
    edges = sorted(points)
    out = {label: 0.0 for label, _ in labelled} | {"idle_s": 0.0}
    for a, b in zip(edges, edges[1:]):
        mid = (a + b) / 2
        label = next((lab for lab, spans in clipped if any(x <= mid < y for x, y in spans)), "idle_s")
        out[label] += b - a
    return out


def changes_between(revisions: list[dict[str, Any]], after: int | None, upto: int | None) -> Changes:
    """What revisions (after, upto] changed, per file: lines added and removed, new or deleted."""
    if upto is None:
        return Changes()
    per: dict[str, dict[str, Any]] = {}
    for rev in revisions:
        if (after is not None and rev["seq"] <= after) or rev["seq"] > upto:
            continue
        for change in json.loads(rev["paths_json"]):
            path = str(change.get("path"))
            entry = per.setdefault(path, {"path": one_line(path, 200), "status": change.get("status"),
                                          "added": 0, "removed": 0})
            entry["added"] += int(change.get("added") or 0)
            entry["removed"] += int(change.get("removed") or 0)
            if change.get("status") == "D":
                entry["status"] = "D"
    files = sorted(per.values(), key=lambda f: -(f["added"] + f["removed"]))
    if not files:
        return Changes()
    words = {"A": "new", "D": "deleted"}
    shown = ", ".join(f"{f['path']} (+{f['added']}/-{f['removed']}"
                      + (f", {words[f['status']]}" if f["status"] in words else "") + ")" for f in files[:5])
    more = f" and {len(files) - 5} more" if len(files) > 5 else ""
    return Changes(files[:100], f"{len(files)} file(s): {shown}{more}")


def route_of(iterations: list[Iteration]) -> str:
    """The run in a line: consecutive iterations of one training type folded into one stage; a
    type whose code was never seen running says so."""
    stages: list[tuple[str, bool, int]] = []
    for it in iterations:
        if it.submission_id is None and it.train_type == UNKNOWN:
            continue
        kind = it.train_type
        if it.observed is False and kind not in (UNKNOWN, COPY):
            kind = f"{kind} (written, not seen running)"
        if stages and stages[-1][0] == kind:
            _, online, n = stages[-1]
            stages[-1] = (kind, online or it.online, n + 1)
        else:
            stages.append((kind, it.online, 1))
    if not stages:
        return "no submission"

    def stage(kind: str, online: bool, n: int) -> str:
        notes = (["online"] if online else []) + ([f"{n} iterations"] if n > 1 else [])
        return kind + (f" ({', '.join(notes)})" if notes else "")

    return " → ".join(stage(*s) for s in stages)


# -- building them -------------------------------------------------------------------------------------

def _facts_for(reader: CodeReader, sha: str | None, commands: list[str], changed: Changes) -> tuple[CodeFacts, dict[str, str]]:
    files = reader.files(sha) if sha else {}
    run = scripts_run(files, commands)
    changed_code = {f["path"]: files[f["path"]] for f in changed.files if f["path"] in files}
    chosen = run or changed_code or files
    return analyse(chosen, commands), files


def _strongest_first(evidence: list[Evidence]) -> list[Evidence]:
    """A trainer being built says more than its import."""
    return sorted(evidence, key=lambda e: not CONSTRUCTS.search(e.text))


def _key_code(facts: CodeFacts, files: dict[str, str]) -> list[Evidence]:
    lines = _strongest_first(facts.evidence.get(facts.train_type, []))[:3]
    for setting in facts.config.values():
        if setting.path in files and setting.line > 0 and len(lines) < 6:
            text = files[setting.path].splitlines()[setting.line - 1] if setting.line <= len(
                files[setting.path].splitlines()) else ""
            ev = Evidence(setting.path, setting.line, one_line(text))
            if ev not in lines and text.strip():
                lines.append(ev)
    return lines


def _problems(failures: list[Signal]) -> list[str]:
    """One line per kind of failure: its first line of evidence, and how many more like it."""
    first: dict[str, Signal] = {}
    count: dict[str, int] = {}
    for s in failures:
        first.setdefault(s.kind, s)
        count[s.kind] = count.get(s.kind, 0) + 1
    return [f"{kind}: {s.text}" + (f" (and {count[kind] - 1} more like it)" if count[kind] > 1 else "")
            for kind, s in first.items()]


def build_iterations(run_dir: Path, significance: dict[int, str] | None = None) -> Diagnosis:
    """Every iteration of the run in ``run_dir`` and the route; ``significance``: each submission's
    label against the baseline where the report has computed it."""
    with RunStore.of_run(run_dir) as store:
        run = store.run()
        baseline = store.baseline()
        subs = store.submissions(kind="agent")
        all_subs = store.submissions()
        revisions = store.revision_rows()
        logs = scan(store.step_lines())
        llm = store.llm_intervals()
        gpu_busy = store.gpu_busy_intervals(GPU_BUSY_PCT)
        processes = store.last_event_data("agent_processes")
        env_steps = store.env_step_times()  # none on a task without the service
    reader = CodeReader(run_dir)
    shas = {r["seq"]: r["sha"] for r in revisions}
    start = run.budget_start or run.created_at or 0.0
    agent_end = run.agent_ended_at or run.ended_at
    if agent_end is not None and run.deadline is not None:
        agent_end = min(agent_end, run.deadline)
    base_score = baseline.score if baseline is not None and baseline.status == SubStatus.SCORED else None
    base_hash = baseline.weights_hash if baseline is not None else None
    evals = [(s.started_at, s.finished_at) for s in all_subs if s.started_at and s.finished_at]
    # Training is training while a trainer runs, whatever its logs look like: the stretches in which
    # a process the supervisor saw ran a training command count too (issue 43, 4).
    training = logs.training_intervals() + [(first, last) for cmd, first, last in process_spans(processes)
                                            if runs_training(cmd)]
    labels = significance or {}

    def window(a: float, b: float) -> tuple[list[str], dict[str, float]]:
        cmds = [c for c in logs.commands if a < c.at <= b]
        ran = [(c.text, c.at, c.ended) for c in cmds if c.ended is not None]
        time = exclusive_seconds(a, b, [
            ("training_s", training + [(at, end) for text, at, end in ran if is_training_command(text)]),
            ("evaluating_s", evals + [(at, end) for text, at, end in ran if is_eval_command(text)]),
            ("training_s", gpu_busy),  # a busy GPU while the grader was not evaluating: the agent's training
            ("thinking_s", llm), ("commands_s", [(at, end) for _, at, end in ran])])
        return [c.text for c in cmds], time

    iterations: list[Iteration] = []
    best: dict[str, Any] | None = None
    prev_end = start
    prev_rev = next((r["seq"] for r in revisions if r["trigger"] == "start"), None)  # the workspace as given
    for n, sub in enumerate(subs, 1):
        cmds, time = window(prev_end, sub.received_at)
        changed = changes_between(revisions, prev_rev, sub.revision_seq)
        facts, files = _facts_for(reader, shas.get(sub.revision_seq) if sub.revision_seq else None, cmds, changed)
        failures = logs.failures_in(prev_end, sub.received_at)
        it = _iteration(n, sub, base_score, base_hash, facts, files, failures)
        _what_ran(it, processes, files, prev_end, sub.received_at, env_steps)
        it.duration_s, it.elapsed_s = sub.received_at - prev_end, round(sub.received_at - start, 3)
        it.changes, it.commands, it.time = changed, cmds[-10:], time
        it.significance = labels.get(sub.id)
        if it.status == "success" and it.score is not None and (best is None or it.score > best["score"]):
            best = {"score": it.score, "iteration": n, "submission_id": sub.id}
        it.best = dict(best) if best else None
        iterations.append(it)
        prev_end, prev_rev = sub.received_at, sub.revision_seq if sub.revision_seq is not None else prev_rev
    tail = _tail(run, logs, training, revisions, reader, shas, prev_end, prev_rev, agent_end, window,
                 len(iterations) + 1, no_submission=not subs)
    if tail is not None:
        _what_ran(tail, processes, reader.files(shas[tail.revision]) if tail.revision in shas else {}, prev_end,
                  prev_end + tail.duration_s, env_steps)
        tail.best = dict(best) if best else None
        iterations.append(tail)
    summary = read_summary(run_dir)
    for it in iterations:
        it.agent_summary = sections_about(summary, it.iteration)
    return Diagnosis(iterations, route_of(iterations))


def _what_ran(it: Iteration, processes: dict[str, Any] | None, files: dict[str, str], start: float, end: float,
              env_steps: list[float]) -> None:
    """Whether the iteration's code was seen running (``observed``) by the processes sampled in
    [start, end] (a process naming a code file ran it, however little CPU it had used when sampled:
    under load a training process may be sampled once, early), and so whether it can be online;
    nothing is changed for a run without a record."""
    if processes is None:
        return
    ran = processes_between(processes, start, end)
    code = {p: t for p, t in files.items() if is_code_path(p)}
    seen = [cmd for cmd in ran if scripts_run(code, [cmd], scripts_executed)]  # what a process runs, not names
    served = any(start <= t <= end for t in env_steps)
    it.seen_running = [one_line(c) for c in seen[:5]]
    if seen:
        it.observed = True
    elif served or it.failure_evidence:  # played through the service, or died between two samples
        it.observed = None
    else:
        it.observed = False
    it.online = it.online and bool(seen or served)  # rollouts in a process that ran, or steps the service played


def _iteration(n: int, sub: Submission, base_score: float | None, base_hash: str | None, facts: CodeFacts,
               files: dict[str, str], failures: list[Signal]) -> Iteration:
    scored = sub.status == SubStatus.SCORED
    base_copy = bool(scored and base_hash and sub.weights_hash == base_hash)
    train_type = COPY if base_copy else facts.train_type
    failure: str | None = None
    if base_copy:
        failure = BASE_COPY
    elif not scored and sub.status in (SubStatus.FAILED, SubStatus.REJECTED):
        failure = next((s.kind for s in failures), INVALID)
    elif failures:
        failure = failures[-1].kind if any(s.kind != CODE_ERROR for s in failures) else None
    problems = _problems(failures)
    if not scored and sub.error:
        problems.insert(0, f"{INVALID}: the grader said: {one_line(sub.error.splitlines()[0] if sub.error else '')}")
    if base_copy:
        problems.insert(0, f"{BASE_COPY}: the submitted weights are the base model's")
    return Iteration(
        iteration=n, timestamp=iso(sub.received_at), duration_s=0.0,
        status="success" if scored and not base_copy else "failed", exit_code=None,
        score=sub.score if scored else None,
        improvement=round(sub.score - base_score, 4) if scored and sub.score is not None and base_score is not None else None,
        train_type=train_type, failure_type=failure, submission_id=sub.id, submission_status=sub.status,
        revision=sub.revision_seq, online=facts.rolls_out(train_type),
        train_evidence=[] if base_copy else _strongest_first(facts.evidence.get(train_type, []))[:5],
        online_evidence=facts.online[:3], key_config=facts.config, key_code=_key_code(facts, files),
        problems=problems, failure_evidence=failures[:10],
    )


def _tail(run: RunRecord, logs: LogFacts, training: list[tuple[float, float]], revisions: list[dict[str, Any]],
          reader: CodeReader, shas: dict[int, str], after: float, prev_rev: int | None, agent_end: float | None,
          window: Any, n: int, *, no_submission: bool) -> Iteration | None:
    """The stretch after the last submission, when work happened there that never reached the grader."""
    end = agent_end if agent_end is not None else max([after, *(c.at for c in logs.commands)])
    if end <= after and not no_submission:
        return None
    failures = logs.failures_in(after, end)
    trained = any(after < b and a < end for a, b in training)
    last_rev = max((r["seq"] for r in revisions if r["at"] <= end), default=None)
    changed = changes_between(revisions, prev_rev, last_rev) if last_rev and last_rev != prev_rev else Changes()
    code_changed = any(is_code_path(f["path"]) for f in changed.files)
    if not (no_submission or failures or trained or code_changed):
        return None
    cmds, time = window(after, end)
    facts, files = _facts_for(reader, shas.get(last_rev) if last_rev else None, cmds, changed)
    deadline = run.end_reason == "deadline"
    failure = failures[-1].kind if failures else (TIMEOUT_NONE if deadline else EXITED_NONE)
    problems = _problems(failures)
    problems.append("no submission after this work: " + ("the budget ran out" if deadline else
                                                         f"the agent ended ({run.end_reason or 'still running'})"))
    return Iteration(
        iteration=n, timestamp=iso(end), duration_s=end - after, status="failed",
        exit_code=run.agent_exit_code, score=None, improvement=None, train_type=facts.train_type,
        failure_type=failure, revision=last_rev, online=facts.rolls_out(facts.train_type),
        train_evidence=_strongest_first(facts.evidence.get(facts.train_type, []))[:5], online_evidence=facts.online[:3],
        key_config=facts.config, changes=changed, key_code=_key_code(facts, files), commands=cmds[-10:], time=time,
        problems=problems, failure_evidence=failures[:10],
        elapsed_s=round(end - (run.budget_start or end), 3),
    )
