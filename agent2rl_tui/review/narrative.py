"""The optional narrative of a run: a few sentences per iteration, what the agent did and why.

``run/summarizer.py`` writes ``report/narrative.json`` when a summarizer endpoint is given
(``agent2rl-tui report RUN --summarizer-url URL --summarizer-model MODEL``); this module is
what it holds and how the report shows it. The narrative is never required: a run without
one reads as None here, and `narrative_lines` then says so and how to get one.

What the file holds:

- ``entries``: per iteration (``report/iterations.jsonl``), the text the summarizer wrote,
  or the error that kept it from writing one;
- ``cache``: every answer, keyed by a sha256 of (model, prompt), so an unchanged iteration
  is never asked about twice;
- ``calls``: every request made (the model, the tokens from the reply's ``usage``, the cost
  when the price table knows the model, else None), and their totals.

The summarizer's text was written by a model that read the agent's own notes: it is hostile
input. It is kept as text, capped at `MAX_TEXT_CHARS`, and shown only through
``util.inert.md_escape`` (one line, no markdown).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agent2rl_tui.util.inert import md_code, md_escape

NARRATIVE_FILE = "narrative.json"
"""In the run's ``report/`` folder."""
MAX_TEXT_CHARS = 2000
"""What is kept of one answer (2-4 sentences are asked for)."""
MAX_FILE_BYTES = 32 << 20
"""A bigger narrative.json is not read (it reads as absent)."""
HOW_TO_GET = ("run `agent2rl-tui report RUN --summarizer-url URL --summarizer-model MODEL` "
              "(any OpenAI-compatible endpoint; `--summarizer-key-env VAR` names its key's variable)")


def _text(value: Any) -> str | None:
    return None if value is None else str(value)[:MAX_TEXT_CHARS]


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _cost(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass
class NarrativeEntry:
    """One iteration's narrative: its text, or why there is none."""

    iteration: int
    text: str | None = None
    error: str | None = None
    submission_id: int | None = None
    key: str = ""
    """The cache key of the prompt it was written from."""
    cached: bool = False
    """Answered from the cache when the narrative was last written (no call made)."""

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> NarrativeEntry:
        sub = raw.get("submission_id")
        return cls(iteration=int(raw["iteration"]), text=_text(raw.get("text")), error=_text(raw.get("error")),
                   submission_id=sub if isinstance(sub, int) and not isinstance(sub, bool) else None,
                   key=str(raw.get("key") or ""), cached=bool(raw.get("cached")))

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class NarrativeCall:
    """One request to the summarizer, answered or not."""

    iteration: int
    key: str
    model: str
    at: float
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None
    """None: the price table does not know the model (or the call failed)."""
    error: str | None = None

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> NarrativeCall:
        return cls(iteration=int(raw["iteration"]), key=str(raw.get("key") or ""), model=str(raw.get("model") or ""),
                   at=float(raw.get("at") or 0.0), tokens_in=_int(raw.get("tokens_in")),
                   tokens_out=_int(raw.get("tokens_out")), cost_usd=_cost(raw.get("cost_usd")),
                   error=_text(raw.get("error")))

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CachedAnswer:
    """An answer kept under its key: the text and what it cost the one time it was asked."""

    text: str
    model: str
    at: float
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> CachedAnswer:
        return cls(text=_text(raw["text"]) or "", model=str(raw.get("model") or ""), at=float(raw.get("at") or 0.0),
                   tokens_in=_int(raw.get("tokens_in")), tokens_out=_int(raw.get("tokens_out")),
                   cost_usd=_cost(raw.get("cost_usd")))

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Narrative:
    """What ``report/narrative.json`` holds."""

    model: str
    entries: dict[int, NarrativeEntry] = field(default_factory=dict)
    calls: list[NarrativeCall] = field(default_factory=list)
    cache: dict[str, CachedAnswer] = field(default_factory=dict)
    base_url: str = ""
    written_at: float | None = None
    error: str | None = None
    """Why no iteration was narrated at all (no iterations to narrate, the key unset), else None."""

    @property
    def tokens_in(self) -> int:
        return sum(c.tokens_in for c in self.calls)

    @property
    def tokens_out(self) -> int:
        return sum(c.tokens_out for c in self.calls)

    @property
    def cost_usd(self) -> float | None:
        """Every answered call's cost; None when a call was answered by a model without a price."""
        answered = [c for c in self.calls if c.error is None]
        if any(c.cost_usd is None for c in answered):
            return None
        return sum(c.cost_usd or 0.0 for c in answered)

    @property
    def failed(self) -> list[NarrativeEntry]:
        return [e for e in self.entries.values() if e.text is None]

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Narrative:
        entries = [NarrativeEntry.from_json(e) for e in raw.get("entries") or []]
        written = raw.get("written_at")
        return cls(model=str(raw["model"]), entries={e.iteration: e for e in entries},
                   calls=[NarrativeCall.from_json(c) for c in raw.get("calls") or []],
                   cache={str(k): CachedAnswer.from_json(v) for k, v in (raw.get("cache") or {}).items()},
                   base_url=str(raw.get("base_url") or ""),
                   written_at=float(written) if isinstance(written, (int, float)) else None,
                   error=_text(raw.get("error")))

    def as_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "model": self.model,
            "base_url": self.base_url,
            "written_at": self.written_at,
            "error": self.error,
            "calls_total": len(self.calls),
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost_usd": self.cost_usd,
            "entries": [self.entries[i].as_json() for i in sorted(self.entries)],
            "calls": [c.as_json() for c in self.calls],
            "cache": {k: v.as_json() for k, v in self.cache.items()},
        }


def narrative_path(run_dir: Path) -> Path:
    return Path(run_dir) / "report" / NARRATIVE_FILE


def read_narrative(run_dir: Path) -> Narrative | None:
    """The run's narrative; None when it has none, or when its file cannot be read as one."""
    path = narrative_path(run_dir)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            return None
        raw = json.loads(data.decode("utf-8"))
        return Narrative.from_json(raw) if isinstance(raw, dict) else None
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def write_narrative_file(run_dir: Path, narrative: Narrative) -> Path:
    """``report/narrative.json``, replaced whole (a reader never sees half of it)."""
    path = narrative_path(run_dir)
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_name(NARRATIVE_FILE + ".tmp")
    tmp.write_text(json.dumps(narrative.as_json(), indent=1), encoding="utf-8")
    tmp.replace(path)
    return path


def cost_text(narrative: Narrative) -> str:
    cost = narrative.cost_usd
    if cost is None:
        return f"cost unknown (no price for {md_code(narrative.model, in_table=False)} in the price table)"
    return f"cost ${cost:.4f}"


def narrative_lines(narrative: Narrative | None) -> list[str]:
    """The report's narrative section (markdown): one bullet per iteration, escaped; the model,
    its tokens and cost; or, without a narrative, one line that says so and how to get one."""
    lines = ["", "## Narrative", ""]
    if narrative is None:
        return lines + [f"- no narrative: {HOW_TO_GET}"]
    n = narrative
    lines.append(f"- written by {md_code(n.model, in_table=False)} from the iteration facts and the agent's own "
                 f"summary.md (its words, not checked): {len(n.calls)} calls, {n.tokens_in:,} input and "
                 f"{n.tokens_out:,} output tokens, {cost_text(n)}")
    if n.error:
        lines.append(f"- no narrative: {md_escape(n.error)}")
    failed = n.failed
    if failed:
        lines.append(f"- {len(failed)} of {len(n.entries)} iterations have no narrative (the summarizer failed; "
                     f"{HOW_TO_GET} to try again)")
    for i in sorted(n.entries):
        entry = n.entries[i]
        sub = f" (submission {entry.submission_id})" if entry.submission_id is not None else ""
        said = md_escape(entry.text) if entry.text is not None else f"no narrative: {md_escape(entry.error or '?')}"
        lines.append(f"- iteration {i}{sub}: {said}")
    return lines


__all__ = ["HOW_TO_GET", "MAX_TEXT_CHARS", "NARRATIVE_FILE", "CachedAnswer", "Narrative", "NarrativeCall",
           "NarrativeEntry", "cost_text", "narrative_lines", "narrative_path", "read_narrative",
           "write_narrative_file"]
