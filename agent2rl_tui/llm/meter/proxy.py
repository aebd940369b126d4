"""The meter as one object: its server, its account, and its life (started, stopped).

Kept apart from the handler and the account so that what holds them together is short: a
`Meter` binds the loopback socket, says where it forwards in the run's record, tracks the calls
under way (at most ``MAX_CALLS`` at once), and when stopped gives them a grace, records the rest
as they stand and closes the record. `serve_meter` runs one in this process.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from agent2rl_tui.llm.meter.accounting import Call, Caps, Ledger, Recorder
from agent2rl_tui.llm.meter.handler import MAX_CALLS, MeterServer
from agent2rl_tui.llm.meter.keys import KeyRing
from agent2rl_tui.llm.meter.upstream import Upstream
from agent2rl_tui.llm.prices import PriceTable, load_prices


class Meter:
    """The proxy and its record. ``start`` listens and returns the base URL; ``stop`` ends it."""

    def __init__(self, db: Path, upstream: str, *, caps: Caps | None = None, prices: PriceTable | None = None,
                 host: str = "127.0.0.1", port: int = 0, connect_timeout_s: float = 30.0,
                 read_timeout_s: float = 900.0, log: TextIO | None = None, keys: KeyRing | None = None) -> None:
        self.upstream = Upstream.parse(upstream)
        self.keys = keys or KeyRing()
        self.caps = caps or Caps()
        self.prices = prices if prices is not None else load_prices()
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.log = log
        self.recorder = Recorder(Path(db), log)
        self.ledger = Ledger(self.recorder, self.caps, self.prices, log)
        self._lock = threading.Lock()
        self._inflight: set[Call] = set()
        self._slots = threading.BoundedSemaphore(MAX_CALLS)
        self._server = MeterServer((host, port), self)
        self._thread: threading.Thread | None = None
        self._stopped = False
        self.foreign = 0  # requests refused from other users of the machine

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def start(self) -> str:
        self.recorder.event("meter", f"metering calls to {self.upstream.display} at {self.url}", {
            "metered": True, "url": self.url, "upstream": self.upstream.display, "caps": self.caps.as_json(),
            "prices": self.prices.files, "pid": os.getpid(), "keys": self.keys.record()})
        self._thread = threading.Thread(target=self._server.serve_forever, name="meter", daemon=True)
        self._thread.start()
        return self.url

    def flush(self) -> None:
        """Wait until every call recorded so far is written."""
        self.recorder.flush()

    def stop(self, grace_s: float = 5.0) -> None:
        """Take no new connections, give the calls under way ``grace_s`` to end, record the rest as
        they stand, and close the record."""
        if self._stopped:
            return
        self._stopped = True
        if self._thread is not None:
            self._server.shutdown()
        self._server.server_close()
        left = self._left_after(grace_s)
        for call in left:
            self.abandon(call, "the meter was stopped before the reply ended")
        calls, tokens, cost = self.ledger.totals()
        self.recorder.event("meter_stopped", "the meter stopped", {"abandoned": len(left), "tokens": tokens,
                                                                   "cost_usd": round(cost, 6), "calls": calls})
        self.recorder.close()

    def refusal(self) -> str | None:
        """Why a generation call must be refused now (a cap reached), else None."""
        return self.ledger.refusal()

    @contextmanager
    def under_way(self, call: Call) -> Iterator[None]:
        """Handle ``call`` in one of the meter's slots, known as under way until it ends."""
        with self._slots:
            with self._lock:
                self._inflight.add(call)
            try:
                yield
            finally:
                self.ledger.release(call)  # whatever ended it: what it held under the caps goes back
                with self._lock:
                    self._inflight.discard(call)

    def abandon(self, call: Call, why: str) -> None:
        """Record a call that is still under way as it stands, and cut it."""
        with call.lock:
            if call.done:
                return
            call.done = True
            metered = call.reader.close() if call.reader is not None else call.metered
            sock = call.upstream_sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.ledger.record(call, metered, complete=False, error=why)

    def _left_after(self, grace_s: float) -> list[Call]:
        """The calls still under way once they have had ``grace_s`` to end."""
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            with self._lock:
                if not self._inflight:
                    break
            time.sleep(0.02)
        with self._lock:
            return list(self._inflight)


@contextmanager
def serve_meter(run_dir: Path, upstream: str, *, caps: Caps | None = None, prices: PriceTable | None = None,
                host: str = "127.0.0.1", port: int = 0, grace_s: float = 5.0,
                keys: KeyRing | None = None) -> Iterator[Meter]:
    """A meter for ``run_dir`` (its run.db must exist) in this process, for the ``with`` block."""
    meter = Meter(Path(run_dir) / "run.db", upstream, caps=caps, prices=prices, host=host, port=port, keys=keys)
    meter.start()
    try:
        yield meter
    finally:
        meter.stop(grace_s)
