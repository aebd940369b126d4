"""The meter's record: what each call used and cost, the run's caps, and the rows in run.db.

Kept apart from the proxy because the account does not depend on how the bytes travelled: a
call under way (`Call`) gathers what its row will say; the `Ledger` keeps the run's totals
(tokens and cost, a restarted meter going on from the run's own sums), counts each call once
(before its reply's last bytes reach the agent, so the next call is checked against it),
answers whether a cap is reached, and turns a call into its ``llm_calls`` row with every key
the request carried scrubbed; the `Recorder` writes rows and events from one thread, in order.

Caps hold under concurrency: a generation call reserves its most (input estimated from its
body, output the most it asks for) before it is forwarded, and is let go only while the run's
used and reserved tokens and cost leave room for it; otherwise it waits for the calls under way
to settle. One call alone may still pass a cap (its reply is what it is), none after it.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qsl

from agent2rl_tui.llm.meter.keys import SECRET_HEADERS, SECRET_QUERY
from agent2rl_tui.llm.prices import PriceTable
from agent2rl_tui.llm.protocols import GENERATE
from agent2rl_tui.llm.usage import Metered, Usage, UsageReader
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.record.writer import BackgroundWriter

NO_REPLY = 0  # the status of a call that ended before any reply reached the agent
WRITE_ATTEMPTS = 8  # a row or event is tried this often against a locked run.db, then logged and dropped
BYTES_PER_TOKEN = 2
"""A request's input tokens are reserved as its body's bytes over this: an over-estimate (text
runs near four bytes a token, and a body's JSON adds to its bytes), so reservations err on the
side of the cap."""
WAKE_S = 0.5  # a call waiting for room under a cap looks again at least this often


@dataclass(frozen=True)
class Caps:
    """A run's limits, None for none: tokens (input + output of every recorded call) and cost (USD,
    the priced calls; a call of a model without a price counts nothing towards it)."""

    max_tokens: int | None = None
    max_cost_usd: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {"max_tokens": self.max_tokens, "max_cost_usd": self.max_cost_usd}


@dataclass(eq=False)
class Call:
    """One call under way: what the row will say, guarded by ``lock`` (the handler feeds the
    reader under it; a stopping meter records the call under it)."""

    at: float
    started: float  # monotonic
    method: str
    path: str
    secrets: tuple[str, ...]
    protocol: str | None = None
    endpoint: str | None = None
    model: str | None = None  # as asked for
    status: int = NO_REPLY
    ttfb_s: float | None = None
    streamed: bool = False
    reader: UsageReader | None = None
    metered: Metered | None = None  # the reader's result, once closed before the reply's last bytes
    counted: bool = False  # its tokens and cost already in the run's totals
    max_output: int | None = None  # the most output tokens the request asks for, when it says
    reserved: tuple[int, float] | None = None  # tokens and cost held for it under the caps while under way
    request_bytes: int = 0
    response_bytes: int = 0
    done: bool = False
    upstream_sock: socket.socket | None = None
    stand_in: bool = False  # the upstream said it stands in for a driver API (``prices.STAND_IN_HEADER``)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, sock: socket.socket | None) -> None:
        """The socket the call went out on (a stopping meter shuts it to cut the call)."""
        self.upstream_sock = sock


class Recorder:
    """Writes the meter's rows and events to run.db from one thread, in order (``record.writer``)."""

    def __init__(self, db: Path, log: TextIO | None) -> None:
        self.log = log
        self.writer: BackgroundWriter[tuple[str, dict[str, Any]]] = BackgroundWriter(
            db, _write_items, name="meter-recorder", on_failure=self._failed, attempts=WRITE_ATTEMPTS)
        self.store = self.writer.store

    def row(self, row: dict[str, Any]) -> None:
        self.writer.put(("row", row))

    def event(self, kind: str, message: str, data: dict[str, Any]) -> None:
        self.writer.put(("event", {"kind": kind, "message": message, "data": data}))

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close(timeout=60)

    def _failed(self, batch: list[tuple[str, dict[str, Any]]], exc: Exception) -> None:
        if self.log is not None:
            for what, item in batch:
                print(f"meter: could not record a {what} in run.db: {exc}: {json.dumps(item)[:500]}",
                      file=self.log, flush=True)


def _write_items(store: RunStore, batch: list[tuple[str, dict[str, Any]]]) -> None:
    """A batch of calls and events, in one transaction (so a retry never writes one twice)."""
    with store.transaction():
        for what, item in batch:
            if what == "row":
                store.add_llm_call(**item)
            else:
                store.event("meter", item["kind"], item["message"], item["data"])


class Ledger:
    """The run's totals against its caps, and each finished call's row (through the recorder)."""

    def __init__(self, recorder: Recorder, caps: Caps, prices: PriceTable, log: TextIO | None) -> None:
        self.recorder = recorder
        self.caps = caps
        self.prices = prices
        self.log = log
        totals = recorder.store.llm_totals()  # a restarted meter goes on with the run's own sums
        self._tokens = totals.input_tokens + totals.output_tokens
        self._cost = totals.cost_usd or 0.0
        self._calls = 0  # recorded by this meter
        self._reserved_tokens = 0  # held by calls under way (`admit`)
        self._reserved_cost = 0.0
        self._waiting_on = 0  # calls under way that hold a reservation
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)

    def totals(self) -> tuple[int, int, float]:
        """Calls recorded by this meter, the run's tokens (input + output), its cost (USD)."""
        with self._lock:
            return self._calls, self._tokens, self._cost

    def refusal(self) -> str | None:
        """Why a generation call must be refused now (a cap reached), else None."""
        with self._lock:
            return self._reached()

    def _reached(self) -> str | None:
        tokens, cost = self._tokens, self._cost
        if self.caps.max_tokens is not None and tokens >= self.caps.max_tokens:
            return (f"agent2rl-tui: this run's token cap is reached ({tokens:,} of {self.caps.max_tokens:,} tokens "
                    "used); no further model calls are allowed in this run")
        if self.caps.max_cost_usd is not None and cost >= self.caps.max_cost_usd:
            return (f"agent2rl-tui: this run's cost cap is reached (${cost:.4f} of ${self.caps.max_cost_usd:.4f} "
                    "used); no further model calls are allowed in this run")
        return None

    def admit(self, call: Call, request_bytes: int, gone: Callable[[], bool] = lambda: False) -> str | None:
        """Let a generation call go under the caps, its most reserved; or say why it is refused.

        It goes at once when the run has no caps, or when its reservation fits the room the used
        and reserved totals leave; else it waits for calls under way to settle, and goes alone once
        none is (one call may pass a cap). Refused once a cap is reached, or when ``gone`` says the
        call was ended while it waited (the meter stopping)."""
        if self.caps.max_tokens is None and self.caps.max_cost_usd is None:
            return None
        tokens: int | None = None
        cost: float | None = None
        if call.max_output is not None:
            tokens = request_bytes // BYTES_PER_TOKEN + call.max_output
            cost = self.prices.cost(call.model, Usage(input_tokens=request_bytes // BYTES_PER_TOKEN,
                                                      output_tokens=call.max_output))
        with self._room:
            while True:
                why = self._reached()
                if why is not None:
                    return why
                if gone():
                    return "the meter stopped before the call could go"
                if not self._waiting_on or self._fits(tokens, cost, call.model):
                    break
                self._room.wait(WAKE_S)
            held = (tokens if tokens is not None else self._token_room(),
                    cost if cost is not None else self._cost_room(call.model))
            call.reserved = held
            self._reserved_tokens += held[0]
            self._reserved_cost += held[1]
            self._waiting_on += 1
        return None

    def _fits(self, tokens: int | None, cost: float | None, model: str | None) -> bool:
        if self.caps.max_tokens is not None:
            if tokens is None or self._tokens + self._reserved_tokens + tokens > self.caps.max_tokens:
                return False
        if self.caps.max_cost_usd is not None and self.prices.find(model) is not None:
            if cost is None or self._cost + self._reserved_cost + cost > self.caps.max_cost_usd:
                return False
        return True

    def _token_room(self) -> int:
        """What is left under the token cap (a call of unknown size holds all of it)."""
        if self.caps.max_tokens is None:
            return 0
        return max(0, self.caps.max_tokens - self._tokens - self._reserved_tokens)

    def _cost_room(self, model: str | None) -> float:
        if self.caps.max_cost_usd is None or self.prices.find(model) is None:
            return 0.0
        return max(0.0, self.caps.max_cost_usd - self._cost - self._reserved_cost)

    def release(self, call: Call) -> None:
        """Give back what a call held under the caps (once; its actual tokens count instead)."""
        with self._room:
            self._release(call)

    def _release(self, call: Call) -> None:
        if call.reserved is None:
            return
        tokens, cost = call.reserved
        call.reserved = None
        self._reserved_tokens -= tokens
        self._reserved_cost -= cost
        self._waiting_on -= 1
        self._room.notify_all()

    def count(self, call: Call, metered: Metered | None) -> None:
        """Add a call's tokens and cost to the run's totals now, before its reply's last bytes
        reach the agent: an agent that calls again the moment a reply ends is checked against
        totals that include it (the row is written after)."""
        usage, _, cost = self._priced(call, metered)
        with self._lock:
            self._add(call, usage, cost)

    def record(self, call: Call, metered: Metered | None, *, complete: bool, error: str | None,
               refused: bool = False) -> None:
        """The call's row to run.db (its tokens and cost counted, if they were not yet)."""
        usage, model, cost = self._priced(call, metered)
        row = call_row(call, usage, model, cost, complete=complete, error=error, refused=refused)
        with self._lock:
            self._calls += 1
            self._add(call, usage, cost)
        self.recorder.row(row)
        if self.log is not None:
            tokens = f" in={usage.input_tokens} out={usage.output_tokens}" if usage else ""
            cut = "" if complete else " CUT"
            print(f"meter: {call.method} {call.path} {call.status} {model or '-'}{tokens} {row['latency_s']:.2f}s"
                  f"{' REFUSED' if refused else ''}{cut}", file=self.log, flush=True)

    def _priced(self, call: Call, metered: Metered | None) -> tuple[Usage | None, str | None, float | None]:
        usage = metered.usage if metered is not None and call.endpoint == GENERATE else None
        model = (metered.model if metered is not None and metered.model else None) or call.model or None
        if call.stand_in:  # a stand-in's tokens are counted, never priced as the model it names
            return usage, model, None
        cost = self.prices.cost(model, usage)
        if cost is None and usage is not None and call.model and call.model != model:
            cost = self.prices.cost(call.model, usage)
        return usage, model, cost

    def _add(self, call: Call, usage: Usage | None, cost: float | None) -> None:
        """A call's tokens and cost into the run's totals, once (under ``_lock``)."""
        if call.counted:
            return
        call.counted = True
        self._release(call)
        if usage is not None:
            self._tokens += usage.input_tokens + usage.output_tokens
        self._cost += cost or 0.0


def call_row(call: Call, usage: Usage | None, model: str | None, cost: float | None, *, complete: bool,
             error: str | None, refused: bool) -> dict[str, Any]:
    """A call's ``llm_calls`` row (``RunStore.add_llm_call``'s arguments), its error scrubbed."""
    return {
        "at": call.at, "protocol": call.protocol, "endpoint": call.endpoint, "method": call.method,
        "path": call.path[:2000], "model": model, "status": call.status,
        "latency_s": round(time.monotonic() - call.started, 4), "ttfb_s": call.ttfb_s, "streamed": int(call.streamed),
        "input_tokens": usage.input_tokens if usage else None, "output_tokens": usage.output_tokens if usage else None,
        "cached_tokens": usage.cached_tokens if usage else None,
        "cache_write_tokens": usage.cache_write_tokens if usage else None,
        "reasoning_tokens": usage.reasoning_tokens if usage else None,
        "cost_usd": cost, "complete": int(complete), "refused": int(refused),
        "error": scrub(error, call.secrets) if error else None,
        "request_bytes": call.request_bytes, "response_bytes": call.response_bytes,
    }


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        text = text.replace(secret, "[key]")
    return text[:1000]


def secrets_of(headers: list[tuple[str, str]], target: str) -> tuple[str, ...]:
    """Every credential a request carries (header values, the bearer token alone, a ``key`` in the
    query), longest first, so none of them is ever written."""
    found: set[str] = set()
    for name, value in headers:
        if name.lower() in SECRET_HEADERS and value:
            found.add(value.strip())
            parts = value.strip().split(None, 1)
            if len(parts) == 2:
                found.add(parts[1].strip())
    if "?" in target:
        for k, v in parse_qsl(target.split("?", 1)[1]):
            if k.lower() in SECRET_QUERY and v:
                found.add(v)
    return tuple(sorted((s for s in found if len(s) >= 4), key=len, reverse=True))
