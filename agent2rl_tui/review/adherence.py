"""Did the agent keep to its training mode? Measured from the training seen running, not assumed.

A run in a mode (``record.modes``) is checked submission by submission: each iteration's
training type comes from the code of the revision it was made from (``review.codefacts``), and
counts only where a process the supervisor sampled ran that code (``Iteration.observed``): a
script written and never run trained nothing, and a line the agent printed proves nothing.

- ``sft-only`` allows SFT; ``rl-only`` allows GRPO, PPO, RLOO, online DPO and other
  policy-gradient training. Offline preference optimisation (DPO, ORPO, KTO: no sampling, no
  reward) is outside both.
- A copied base model or code whose training type cannot be told breaks no mode.
- The verdict: kept (some training seen, all of it in the mode), outside (one iteration or more
  trained outside it, named), or cannot tell (no training seen running).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent2rl_tui.record.modes import FREE, RL_ONLY, SFT_ONLY
from agent2rl_tui.review.codefacts import COPY, DPO, GRPO, POLICY_GRADIENT, PPO, SFT, UNKNOWN
from agent2rl_tui.review.iterations import Iteration

RL_TYPES = frozenset({GRPO, PPO, POLICY_GRADIENT, "RLOO", "online DPO"})
ALLOWED = {SFT_ONLY: frozenset({SFT}), RL_ONLY: RL_TYPES}
"""The training types each constraining mode allows."""
NEUTRAL = frozenset({COPY, UNKNOWN})
KNOWN = frozenset({SFT, DPO, "ORPO", "KTO"}) | RL_TYPES
"""Every training type ``review.codefacts`` names that trains the model."""

KEPT, OUTSIDE, CANNOT_TELL = "kept", "outside", "cannot tell"


@dataclass(frozen=True)
class ModeCheck:
    """A run's adherence to its mode, as report.json holds it (``mode_check``)."""

    mode: str
    verdict: str
    """``kept``, ``outside`` or ``cannot tell``."""
    outside: list[str] = field(default_factory=list)
    """Each iteration that trained outside the mode: "iteration 2 (submission 1): SFT, seen running"."""
    seen: list[str] = field(default_factory=list)
    """The training types seen running, in the order first seen."""

    @property
    def kept(self) -> bool | None:
        return {KEPT: True, OUTSIDE: False}.get(self.verdict)

    def as_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "verdict": self.verdict, "outside": list(self.outside), "seen": list(self.seen)}

    @classmethod
    def from_json(cls, raw: Any) -> ModeCheck:
        """report.json's ``mode_check``; raises ValueError on a damaged one (the codec keeps it as found)."""
        if not isinstance(raw, dict) or not isinstance(raw.get("mode"), str) \
                or raw.get("verdict") not in (KEPT, OUTSIDE, CANNOT_TELL):
            raise ValueError("not a mode check")
        texts = [[x for x in raw.get(k) or [] if isinstance(x, str)] for k in ("outside", "seen")]
        return cls(raw["mode"], raw["verdict"], texts[0], texts[1])

    def line(self) -> str:
        if self.verdict == KEPT:
            return f"mode {self.mode}: kept (seen running: {', '.join(self.seen)})"
        if self.verdict == OUTSIDE:
            return f"mode {self.mode}: trained outside it: " + "; ".join(self.outside)
        return f"mode {self.mode}: cannot tell (no training seen running)"


def check_mode(mode: str | None, iterations: list[Iteration]) -> ModeCheck | None:
    """The check for a run in ``mode``; None for a free run (nothing to keep to)."""
    if mode in (None, FREE) or mode not in ALLOWED:
        return None
    allowed = ALLOWED[mode]
    seen: list[str] = []
    outside: list[str] = []
    for it in iterations:
        if it.observed is not True or it.train_type in NEUTRAL or it.train_type not in KNOWN:
            continue
        if it.train_type not in seen:
            seen.append(it.train_type)
        if it.train_type not in allowed:
            where = f"iteration {it.iteration}" + (f" (submission {it.submission_id})" if it.submission_id else "")
            outside.append(f"{where}: {it.train_type}, seen running")
    verdict = OUTSIDE if outside else (KEPT if seen else CANNOT_TELL)
    return ModeCheck(mode, verdict, outside, seen)
