"""Agents without a machine-readable stream: their output lines as messages.

A ``command`` profile may run any program; its stdout is kept line by line, so a transcript
exists even when nothing in it can be parsed.
"""

from __future__ import annotations

from agent2rl_tui.record.transcripts import Step
from agent2rl_tui.run.streams.base import Normalizer


class PlainText(Normalizer):
    """Agents without a machine stream: every non-blank line is a message of unknown role."""

    def _line(self, line: str, at: float) -> list[Step]:
        return [self._step("message", at, line)]
