"""Benchmark: what the meter adds to each driver call.

The scripted driver (a real HTTP server on 127.0.0.1) is called with the Anthropic SDK, one
call after another, straight and through the meter (in this process, its rows written to a real
run.db): as an open meter, and as a run's meter holding the key and enforcing a token cap (the
per-run token swapped for the key, each call's most reserved before it goes). Per case: the
median wall time of a call, non-streamed and streamed, and the meter's overhead per call
(median through the meter minus median straight). Then 32 calls at once under a cap: how long
they take, how many went and how many were refused.

Run: ``python bench/meter.py [--quick] [--calls N]`` (200 calls a case, about half a minute;
``--quick``: 30 calls a case, 16 at once). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anthropic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.synthetic import make_run  # noqa: E402

from agent2rl_tui.llm.meter import Caps, KeyRing, serve_meter  # noqa: E402
from agent2rl_tui.llm.meter.keys import HeldKey, new_token  # noqa: E402
from agent2rl_tui.llm.script import build  # noqa: E402
from agent2rl_tui.llm.scripted import serve  # noqa: E402

KEY = "sk-ant-bench-key-0123456789"
SCRIPT = build({"steps": [{"answer": "The answer is 42. " * 20}]})


def timed_calls(url: str, key: str, calls: int, stream: bool) -> list[float]:
    """Wall seconds of each of ``calls`` calls, one after another (after two to warm up)."""
    client = anthropic.Anthropic(base_url=url, api_key=key, max_retries=0)

    def one() -> None:
        body = {"model": "claude-haiku-5-5", "max_tokens": 64, "messages": [{"role": "user", "content": "x"}]}
        if stream:
            with client.messages.stream(**body) as s:
                s.get_final_message()
        else:
            client.messages.create(**body)

    for _ in range(2):
        one()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        one()
        times.append(time.perf_counter() - start)
    return times


def ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def case(name: str, through: Callable[[], tuple[str, str]], calls: int, straight: dict[bool, float]) -> None:
    url, key = through()
    for stream in (False, True):
        median = ms(timed_calls(url, key, calls, stream))
        kind = "streamed" if stream else "whole"
        if name == "straight":
            straight[stream] = median
            print(f"straight to the driver, {kind}: {median:.2f} ms a call (median of {calls})")
        else:
            print(f"{name}, {kind}: {median:.2f} ms a call, overhead {median - straight[stream]:+.2f} ms a call")


def at_once(url: str, key: str, n: int) -> tuple[float, int, int]:
    client = anthropic.Anthropic(base_url=url, api_key=key, max_retries=0)
    barrier = threading.Barrier(n)

    def one(i: int) -> int:
        barrier.wait()
        try:
            client.messages.create(model="claude-haiku-5-5", max_tokens=64,
                                   messages=[{"role": "user", "content": f"call {i}"}])
            return 200
        except anthropic.APIStatusError as exc:
            return exc.status_code

    start = time.perf_counter()
    with ThreadPoolExecutor(n) as pool:
        statuses = list(pool.map(one, range(n)))
    return time.perf_counter() - start, statuses.count(200), statuses.count(429)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="30 calls a case, 16 at once")
    parser.add_argument("--calls", type=int, help="calls per case (default 200; 30 with --quick)")
    args = parser.parse_args()
    calls = args.calls or (30 if args.quick else 200)
    n_at_once = 16 if args.quick else 32
    token = new_token()
    keys = KeyRing((HeldKey("ANTHROPIC_API_KEY", token, KEY),))
    straight: dict[bool, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-meter-") as tmp, serve(SCRIPT, api_key=KEY) as driver:
        root = Path(tmp)
        case("straight", lambda: (driver.url, KEY), calls, straight)
        with serve_meter(make_run(root, "open"), driver.url) as meter:
            case("through an open meter", lambda: (meter.url, KEY), calls, straight)
        with serve_meter(make_run(root, "held"), driver.url, keys=keys, caps=Caps(max_tokens=10**9)) as meter:
            case("through a run's meter (key held, token cap)", lambda: (meter.url, token), calls, straight)
        cap = 40 * n_at_once
        with serve_meter(make_run(root, "capped"), driver.url, keys=keys, caps=Caps(max_tokens=cap)) as meter:
            took, went, refused = at_once(meter.url, token, n_at_once)
        print(f"{n_at_once} calls at once under a {cap:,}-token cap: {took:.2f} s, {went} answered, {refused} refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
