"""Training that ends in time: each stage is given a moment to stop by (``--until``, seconds since
the epoch, worked out from the budget the grader reports) and stops taking steps there, keeping
what it trained, so that a submission goes in before the deadline on any machine.

A script adds the option (``add_until``), hands the parsed value to ``limit``, gives TRL's
trainer ``StopAt()`` as a callback, and a loop of its own asks ``time_up()``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from transformers import TrainerCallback

_UNTIL: list[float | None] = [None]


def add_until(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--until", type=float, default=None,
                        help="stop training at this time (seconds since the epoch) and save what there is")


def limit(until: float | None) -> None:
    """This script's moment to stop by (``--until``), for ``time_up`` and ``StopAt``."""
    _UNTIL[0] = until


def time_left() -> float | None:
    """Seconds until the script's ``--until``; None without one."""
    until = _UNTIL[0]
    return None if until is None else max(0.0, until - time.time())


def time_up() -> bool:
    until = _UNTIL[0]
    return until is not None and time.time() >= until


class StopAt(TrainerCallback):
    """Ends training after the step during which the script's ``--until`` passed."""

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if time_up() and not control.should_training_stop:
            print(f"time is up: stopping after step {state.global_step} of {state.max_steps} and saving", flush=True)
            control.should_training_stop = True
        return control
