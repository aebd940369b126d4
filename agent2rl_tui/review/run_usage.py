"""A run's tokens and cost, and where they come from: one rule for every reader.

Two sources can say how many tokens a run's agent used. The meter (``llm.meter``, a loopback
proxy between the agent and its driver API) records every call in ``llm_calls``: exact, priced
from a dated table, and complete also when the run ended at its deadline (the agent killed
mid-stream). The agent's own stream, read into the transcript (``steps``), is what runs made
without the meter have: some CLIs report usage only at their end, so a run killed at its
deadline loses it, and some report it wrongly. The rule: the meter's rows when the run was
metered (its ``meter`` event, or any row), else the transcript's totals; and say which.

Every reader of a run's tokens or cost asks `run_usage` and labels the figures with
`RunUsage.label`: the report (report.json ``usage``, report.md, so also the TUI's Report pane),
the TUI's Transcript bar (``steplist.StepListing.usage``), the run index (``RunSummary.usage``)
and through it the campaign CSV and Compare. The transcript's own totals
(``transcripts.transcript_totals``) remain what they are: the agent's count, per step.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from agent2rl_tui.record.store import RunStore
from agent2rl_tui.record.transcripts import transcript_totals

METERED = "metered"
TRANSCRIPT = "transcript"
NONE = "none"
LABELS = {METERED: "metered", TRANSCRIPT: "from the agent's stream", NONE: "none recorded"}


@dataclass(frozen=True)
class RunUsage:
    """What a run's agent used, by one source. ``cost_usd`` is None when nothing was priced;
    with a metered run it is the sum of the priced calls, and ``unpriced_models`` names the
    models whose calls have no price (their cost is unknown, not zero)."""

    source: str  # METERED | TRANSCRIPT | NONE
    tokens_in: int = 0  # all prompt tokens, cached included
    tokens_out: int = 0  # generated tokens, reasoning included
    cached_tokens: int | None = None  # known only when metered
    cost_usd: float | None = None
    calls: int | None = None  # metered calls (refusals included)
    refused: int = 0
    incomplete: int = 0
    failed: int = 0
    unpriced_calls: int = 0
    unpriced_models: tuple[str, ...] = ()
    no_usage: int = 0  # metered generation calls whose reply reported no usage
    meter: dict[str, Any] | None = None  # the meter's own account (upstream, caps, prices), or why there was none

    @property
    def label(self) -> str:
        return LABELS[self.source]

    @property
    def not_metered(self) -> str | None:
        """Why a run that could have been metered was not (``--no-meter``), else None."""
        if self.meter is not None and not self.meter.get("metered", True):
            return str(self.meter.get("reason") or "not metered")
        return None

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["label"] = self.label
        out["unpriced_models"] = list(self.unpriced_models)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunUsage:
        known = {f for f in cls.__dataclass_fields__}
        fields = {k: v for k, v in data.items() if k in known}
        fields["unpriced_models"] = tuple(fields.get("unpriced_models") or ())
        return cls(**fields)


def run_usage(store: RunStore, steps: dict[str, Any] | None = None) -> RunUsage:
    """The run's tokens and cost by the rule above (``steps``: the transcript's totals, if the
    caller has read them already)."""
    meter = store.last_event_data("meter")
    metered = meter is not None and bool(meter.get("metered", True))
    if metered or store.llm_call_count():
        t = store.llm_totals()
        return RunUsage(METERED, t.input_tokens, t.output_tokens, t.cached_tokens, t.cost_usd, t.calls, t.refused,
                        t.incomplete, t.failed, t.unpriced_calls, t.unpriced_models, t.no_usage, meter)
    steps = steps if steps is not None else transcript_totals(store)
    if steps["tokens_in"] or steps["tokens_out"] or steps["cost_usd"] is not None:
        return RunUsage(TRANSCRIPT, steps["tokens_in"], steps["tokens_out"], None, steps["cost_usd"], meter=meter)
    return RunUsage(NONE, meter=meter)


def cost_text(u: RunUsage) -> str:
    """``$0.0123``; ``≥ $0.0123`` when some calls have no price; ``cost unknown`` when none has."""
    if u.cost_usd is None:
        return "cost unknown" if u.unpriced_calls or u.source != NONE else "no cost"
    return f"{'≥ ' if u.unpriced_calls else ''}${u.cost_usd:.4f}"


def usage_line(u: RunUsage) -> str:
    """One line for a header or a footer: tokens in (cached) / out, cost, and the source."""
    if u.source == NONE:
        return "tokens: none recorded"
    cached = f" ({u.cached_tokens:,} cached)" if u.cached_tokens else ""
    calls = f", {u.calls:,} calls" if u.calls is not None else ""
    return f"tokens {u.tokens_in:,} in{cached}, {u.tokens_out:,} out · {cost_text(u)} ({u.label}{calls})"


def usage_notes(u: RunUsage) -> list[str]:
    """What a reader of the figures must know: refusals, replies cut short, unpriced models."""
    notes = []
    if u.not_metered:
        notes.append(f"not metered: {u.not_metered}")
    if u.refused:
        notes.append(f"{u.refused} call(s) refused by the run's cap")
    if u.incomplete:
        notes.append(f"{u.incomplete} reply(ies) cut short (counted as far as they came)")
    if u.no_usage:
        notes.append(f"{u.no_usage} successful call(s) reported no usage (not counted)")
    if u.unpriced_models:
        notes.append(f"cost unknown for {', '.join(u.unpriced_models)} ({u.unpriced_calls} call(s)): not in the price "
                     "table; add it to ~/.config/agent2rl-tui/prices.toml")
    if u.source == TRANSCRIPT:
        notes.append("from the agent's own stream: a run killed at its deadline may have lost some")
    return notes
