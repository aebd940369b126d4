"""Agent transcripts: each CLI's headless output stream, line by line, as one list of timed steps.

The five agent CLIs print five different streams (docs/agent-clis.md gives the schemas and
their sources); each has a module here, beside ``plain`` for agents without one and ``base``
for what they share. The supervisor stamps every stdout line on arrival; a normalizer per
format turns those lines into ``Step``s of a few kinds, so that whatever shows or sums a run
reads one shape. Rules that hold for every format:

- Nothing raises and nothing is dropped: a line that is not JSON, is cut off, or lacks
  the fields its format needs becomes a ``raw`` step carrying the line. Blank lines are
  skipped; deliberate skips are few and named where they are made (Codex item updates).
  A few lines are held until a later one completes them (an OpenHands event's lines,
  Gemini's reply chunks); ``finish`` gives back whatever is held when the stream ends.
- Time is the stream's own where it has one (Gemini ISO stamps, OpenCode epoch
  milliseconds, OpenHands ISO stamps), else the arrival stamp given to ``feed``.
  OpenHands writes ``datetime.now().isoformat()``, local time with no zone; it is read
  as UTC, because the zone it was written in is not in the stream.
- Tokens and cost sit on steps so that summing them over a run gives its totals once
  (see ``totals``): per assistant message for Claude (once per message id, since Claude
  repeats a message over several lines), per turn for Codex, per step for OpenCode, from
  the final result for Gemini. Claude's result carries the run's cost, and the tokens of its
  ``usage`` (the true totals) beyond what the messages' counts said.
- An agent that exits non-zero with nothing readable on stdout gets an error step quoting
  the end of its stderr (``Normalizer.agent_exited``, told by the supervisor).
- OpenHands events are read pretty-printed after a marker or compact, one per line.
- Long texts keep ``TEXT_LIMIT`` characters; ``size`` keeps the original length (always
  set on tool results). Tool arguments are kept whole.

The ``Step`` they produce is the record's (record/transcripts.py); parsing is standard
library only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agent2rl_tui.record.transcripts import Step
from agent2rl_tui.run.streams.base import Normalizer
from agent2rl_tui.run.streams.claude import ClaudeStreamJson
from agent2rl_tui.run.streams.codex import CodexJsonl
from agent2rl_tui.run.streams.gemini import GeminiStreamJson
from agent2rl_tui.run.streams.opencode import OpenCodeJson
from agent2rl_tui.run.streams.openhands import OpenHandsJson
from agent2rl_tui.run.streams.plain import PlainText

__all__ = ["FORMATS", "Normalizer", "make_normalizer", "normalize_lines", "totals"]

FORMATS: dict[str, type[Normalizer]] = {
    "claude-stream-json": ClaudeStreamJson,
    "codex-jsonl": CodexJsonl,
    "gemini-stream-json": GeminiStreamJson,
    "opencode-json": OpenCodeJson,
    "openhands-json": OpenHandsJson,
    "text": PlainText,
}


def make_normalizer(fmt: str) -> Normalizer:
    """A fresh normalizer for one stream of format ``fmt``."""
    cls = FORMATS.get(fmt) if isinstance(fmt, str) else None
    if cls is None:
        raise ValueError(f"unknown transcript format {fmt!r}; known: {', '.join(FORMATS)}")
    return cls()


def normalize_lines(fmt: str, lines: Iterable[tuple[str, float]]) -> list[Step]:
    """Feed every (line, arrival time) of a whole stream, then finish it."""
    normalizer = make_normalizer(fmt)
    steps: list[Step] = []
    for line, at in lines:
        steps.extend(normalizer.feed(line, at))
    steps.extend(normalizer.finish())
    return steps


def totals(steps: Iterable[Step]) -> dict[str, Any]:
    """Run totals: tokens, cost (None when no step had one), step count and count per kind."""
    tokens_in = tokens_out = count = 0
    cost: float | None = None
    by_kind: dict[str, int] = {}
    for step in steps:
        count += 1
        by_kind[step.kind] = by_kind.get(step.kind, 0) + 1
        tokens_in += step.tokens_in or 0
        tokens_out += step.tokens_out or 0
        if step.cost_usd is not None:
            cost = (cost or 0.0) + step.cost_usd
    return {"tokens_in": tokens_in, "tokens_out": tokens_out, "cost_usd": cost, "steps": count,
            "by_kind": by_kind}
