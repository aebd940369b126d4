"""A run as an Inspect AI eval log, for people who read runs with ``inspect view``.

One run is one eval of one sample, built with inspect_ai's own log types and written with its own
``write_eval_log`` (the ``inspect`` extra), so that what ``read_eval_log`` and ``inspect view``
read is their format by construction, not a copy of it:

- the eval: the task as ``agent2rl/<task>``, the driver model (or the agent's profile for an agent
  without one), the run's settings as task arguments, its status mapped to Inspect's;
- the sample: the agent's instructions as its input; the agent's messages, reasoning, tool calls and
  tool results as chat messages; its tool calls also as tool events, each submission's score as an
  intermediate score event, the agent's plain output lines as info events, all on the run's clock;
- the scores: best of budget (the best valid submission, else the baseline: ``review.outcome``,
  the rule statistics over runs use), the baseline and the improvement, with every submission in
  the score's metadata; token use as the model's usage.

Everything comes from the record (the transcript was redacted as it was written); text the agent
produced has its control characters shown as escapes (``util.inert.visible``), and the log tells the
viewer its content is not to be trusted (``ViewerConfig(trust_content=False)``: plain text, no
markdown, links or media).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from agent2rl_tui.record.root import RunError
from agent2rl_tui.record.store import RunStatus, RunStore
from agent2rl_tui.review.index import summarize
from agent2rl_tui.review.outcome import outcome
from agent2rl_tui.review.report import build_report, read_report
from agent2rl_tui.util.inert import visible

INSTALL = "pip install 'agent2rl-tui[inspect]' (make test installs it)"
MAX_PROMPT_CHARS = 200_000
RAW_LINES_PER_EVENT = 200
MAX_EXPORT_CHARS = 50_000_000
"""The transcript exported, in characters (a run of hours holds hundreds of thousands of steps)."""
MAX_ARG_DEPTH = 32
MAX_ARG_CHARS = 100_000
"""The agent's plain output lines, gathered into one info event at most this many at a time."""
InspectStatus = Literal["started", "success", "cancelled", "error"]
STATUS: dict[str, InspectStatus] = {RunStatus.FINISHED: "success", RunStatus.STOPPED: "cancelled", RunStatus.FAILED: "error",
          RunStatus.LOST: "error"}
"""A run's status as Inspect's (an active run is "started")."""


def _when(at: float | None) -> datetime:
    return datetime.fromtimestamp(at or 0.0, UTC)


def _iso(at: float | None) -> str:
    return _when(at).isoformat()


def _nested_within(value: Any, depth: int) -> bool:
    if isinstance(value, dict):
        return depth > 0 and all(_nested_within(v, depth - 1) for v in value.values())
    if isinstance(value, list):
        return depth > 0 and all(_nested_within(v, depth - 1) for v in value)
    return True


def _inert(value: Any) -> Any:
    """JSON data with every string in it, keys too, through ``visible``."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {visible(str(k)): _inert(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_inert(v) for v in value]
    return value


def _args(args_json: str | None) -> dict[str, Any]:
    """A tool call's arguments, inert; the raw text (capped) where they are not a JSON object nested
    at most ``MAX_ARG_DEPTH`` deep."""
    raw = args_json or "{}"
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, dict) and _nested_within(value, MAX_ARG_DEPTH):
        return dict(_inert(value))
    return {"arguments": visible(raw[:MAX_ARG_CHARS])}


class _Transcript:
    """The record's steps as Inspect's messages and events, in order, within ``MAX_EXPORT_CHARS``."""

    def __init__(self, steps: Iterator[tuple[float, str, str | None, str | None, str | None, str, str | None]]) -> None:
        from inspect_ai.event import InfoEvent, ToolEvent
        from inspect_ai.model import ChatMessageAssistant, ChatMessageTool, ChatMessageUser, ContentReasoning
        from inspect_ai.tool import ToolCall

        self.messages: list[Any] = []
        self.events: list[Any] = []
        self.cut_at: float | None = None
        pending: dict[str, Any] = {}  # tool events waiting for their result, oldest first
        used: set[str] = set()
        raw: list[str] = []
        raw_at = 0.0
        chars = 0

        def flush_raw() -> None:
            if raw:
                self.events.append(InfoEvent(source="agent output", data="\n".join(raw), timestamp=_when(raw_at)))
                raw.clear()

        for at, kind, role, tool, call_id, text, args_json in steps:
            text = visible(text or "")
            chars += len(text) * (2 if kind == "tool_result" else 1) + len(args_json or "")
            if chars > MAX_EXPORT_CHARS:
                self.cut_at = at
                break
            if kind in ("raw", "system", "error", "result"):
                if not raw:
                    raw_at = at
                raw.append(f"[{kind}] {text}" if kind != "raw" else text)
                if len(raw) >= RAW_LINES_PER_EVENT:
                    flush_raw()
                continue
            flush_raw()
            if kind == "message":
                self.messages.append(ChatMessageUser(content=text) if role == "user" else ChatMessageAssistant(content=text))
            elif kind == "reasoning":
                self.messages.append(ChatMessageAssistant(content=[ContentReasoning(reasoning=text)]))
            elif kind == "tool_call":
                ident = visible(call_id or "") or f"call-{len(used) + 1}"
                while ident in used:  # an id used twice: each call its own
                    ident += "'"
                used.add(ident)
                function = visible(tool or "tool")
                call = ToolCall(id=ident, function=function, arguments=_args(args_json))
                last = self.messages[-1] if self.messages else None
                if isinstance(last, ChatMessageAssistant) and isinstance(last.content, str):
                    last.tool_calls = [*(last.tool_calls or []), call]  # the message that made the call
                else:
                    self.messages.append(ChatMessageAssistant(content="", tool_calls=[call]))
                event = ToolEvent(id=ident, function=function, arguments=call.arguments, timestamp=_when(at),
                                  pending=None, completed=None)
                pending[ident] = event
                self.events.append(event)
            elif kind == "tool_result":
                # Its call by id; a result without one (or with an id no pending call has) is the oldest call's.
                key = visible(call_id or "")
                event = pending.pop(key, None) or (pending.pop(next(iter(pending))) if pending else None)
                ident = event.id if event is not None else key or "unknown"
                self.messages.append(ChatMessageTool(content=text, tool_call_id=ident, function=visible(tool or "") or None))
                if event is not None:
                    event.result = text
                    event.completed = _when(at)
        flush_raw()
        if self.cut_at is not None:
            self.events.append(InfoEvent(source="agent2rl-tui", timestamp=_when(self.cut_at), data=(
                f"The transcript is cut here, at {MAX_EXPORT_CHARS:,} characters; the record has the rest "
                "(agent2rl-tui run steps RUN).")))


def build_eval_log(run_dir: Path) -> Any:
    """The run as an ``inspect_ai.log.EvalLog``. RunError when inspect_ai is not installed."""
    try:
        from inspect_ai.event import ScoreEvent
        from inspect_ai.log import (
            EvalConfig,
            EvalDataset,
            EvalLog,
            EvalMetric,
            EvalPlan,
            EvalPlanStep,
            EvalResults,
            EvalSample,
            EvalScore,
            EvalSpec,
            EvalStats,
        )
        from inspect_ai.model import ChatMessageUser, ModelUsage
        from inspect_ai.scorer import Score
        from inspect_ai.viewer import ViewerConfig
    except ImportError:
        raise RunError(f"exporting to Inspect AI needs the inspect_ai package: {INSTALL}") from None

    report = read_report(run_dir) or build_report(run_dir)
    with RunStore.of_run(run_dir) as store:
        run = store.run()
        transcript = _Transcript(store.step_lines_with_role())
        subs = store.submissions(kind="agent")
    instructions = _instructions(run_dir)
    model = run.driver or f"agent/{run.agent}"
    summary = summarize(run_dir)
    counted = outcome(summary)  # best of budget: the rule compare and campaigns count a run by
    best, baseline, improvement = counted.best, summary.baseline, counted.improvement
    started, ended = _iso(run.budget_start or run.created_at), _iso(run.ended_at) if run.ended_at else None
    submissions = [_inert(entry.to_json()) for entry in report.submissions]
    score_events = [ScoreEvent(score=Score(value=s.score, explanation=f"submission #{s.id}: {s.status}"),
                               intermediate=True, timestamp=_when(s.finished_at or s.received_at))
                    for s in subs if s.score is not None]
    events = sorted(transcript.events + score_events, key=lambda e: e.timestamp)
    values = {"best_score": best, "baseline": baseline, "improvement": improvement}
    known = {name: value for name, value in values.items() if value is not None}
    sample = EvalSample(
        id=run.id, epoch=1, input=[ChatMessageUser(content=instructions)], target="",
        messages=[ChatMessageUser(content=instructions), *transcript.messages], events=events,
        scores={"agent2rl": Score(value=known or 0.0, answer=None,
                                  explanation=f"best of budget {best}, baseline {baseline}, improvement {improvement}",
                                  metadata={"submissions": submissions, "route": _inert(report.route)})},
        metadata=_inert({"run_id": run.id, "task": run.task, "agent": run.agent, "status": run.status,
                         "end_reason": report.end_reason, "flags": report.error}),
        started_at=started, completed_at=ended)
    usage, model_usage = report.usage, {}
    if usage is not None and usage.tokens_in + usage.tokens_out:
        model_usage = {model: ModelUsage(input_tokens=usage.tokens_in, output_tokens=usage.tokens_out,
                                         total_tokens=usage.tokens_in + usage.tokens_out,
                                         input_tokens_cache_read=usage.cached_tokens, total_cost=usage.cost_usd)}
    sample.model_usage = model_usage
    spec = EvalSpec(
        created=_iso(run.created_at), task=f"agent2rl/{run.task}", run_id=run.id, task_id=run.id,
        dataset=EvalDataset(name=run.task, samples=1), model=model, config=EvalConfig(),
        task_args={"budget_s": run.budget_s, "eval_limit": report.eval_limit, "eval_seed": report.eval_seed,
                   "base_model": report.base_model, "prompt_profile": report.prompt_profile},
        solver=run.agent, metadata={"agent2rl_report_version": report.version},
        viewer=ViewerConfig(trust_content=False))  # the agent's text: shown as plain text, never rendered
    metrics = {name: EvalMetric(name=name, value=value) for name, value in known.items()}
    status: InspectStatus = STATUS.get(run.status, "started")
    plan = EvalPlan(name="agent2rl", steps=[EvalPlanStep(solver=run.agent, params={"driver": run.driver})])
    return EvalLog(eval=spec, plan=plan, status=status, samples=[sample],
                   results=EvalResults(total_samples=1, completed_samples=1 if status == "success" else 0,
                                       scores=[EvalScore(name="agent2rl", scorer="agent2rl-grader", metrics=metrics)]),
                   stats=EvalStats(started_at=started, completed_at=ended or "", model_usage=model_usage))


def _instructions(run_dir: Path) -> str:
    """The prompt the agent was given, as the record keeps it (prompt.md beside run.db)."""
    try:
        with (run_dir / "prompt.md").open(encoding="utf-8", errors="replace") as fh:
            return visible(fh.read(MAX_PROMPT_CHARS))
    except OSError:
        return "(the agent's prompt is not in the record)"


def export_inspect(run_dir: Path, out: Path) -> Path:
    """Write the run to ``out`` (``.eval``: Inspect's zip format; ``.json``: its JSON format)."""
    if out.suffix not in (".eval", ".json"):
        raise RunError(f"{out.name}: an Inspect log ends in .eval (its zip format) or .json")
    log = build_eval_log(run_dir)  # RunError first where inspect_ai is not installed
    from inspect_ai.log import write_eval_log

    out.parent.mkdir(parents=True, exist_ok=True)
    write_eval_log(log, str(out), format="eval" if out.suffix == ".eval" else "json")
    return out
