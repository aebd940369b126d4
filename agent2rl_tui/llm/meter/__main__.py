"""The meter as a process: ``python -m agent2rl_tui.llm.meter --run-dir DIR --upstream URL ...``.

How the supervisor runs it (run/metering.py): the first line of stdout is the base URL, a line
per call goes to stderr, SIGTERM or SIGINT stops it (the calls under way get ``--grace``
seconds), exit 0; 2 for a bad argument or run folder, 1 when it cannot listen. With
``--keys-on-stdin`` it first reads the keys it holds for the run from stdin (``keys``), so that
no key is on its command line.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from agent2rl_tui.llm.meter.accounting import Caps
from agent2rl_tui.llm.meter.keys import MAX_LINE, KeyRing
from agent2rl_tui.llm.meter.proxy import Meter
from agent2rl_tui.llm.prices import PriceError, load_prices
from agent2rl_tui.record.store import StoreError
from agent2rl_tui.util.procs import die_with_launcher


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m agent2rl_tui.llm.meter",
                                     description="Meter a run's calls to its driver API: a loopback proxy that "
                                                 "records each call in the run's run.db.")
    parser.add_argument("--run-dir", required=True, type=Path, help="the run folder (its run.db is written)")
    parser.add_argument("--upstream", required=True, help="the driver API's base URL (or the scripted driver's)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 (the default) takes a free port")
    parser.add_argument("--max-tokens", type=int, help="refuse generation calls once the run has used this many "
                                                        "tokens (input + output)")
    parser.add_argument("--max-cost", type=float, help="refuse generation calls once the run has cost this many USD")
    parser.add_argument("--prices", type=Path, help="a price file over the package's table and the user's own")
    parser.add_argument("--grace", type=float, default=5.0, help="seconds calls under way get when the meter stops")
    parser.add_argument("--keys-on-stdin", action="store_true",
                        help="read the keys to hold (one JSON line, KeyRing.to_line) from stdin before listening")
    parser.add_argument("--read-timeout", type=float, default=900.0, help="seconds of silence from the driver API "
                                                                          "before a call is cut")
    return parser


def _problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments before anything is opened, else None."""
    if not (args.run_dir / "run.db").is_file():
        return f"{args.run_dir / 'run.db'} does not exist: is this a run folder?"
    for name, value in (("--max-tokens", args.max_tokens), ("--max-cost", args.max_cost)):
        if value is not None and value < 0:
            return f"{name} must not be negative"
    return None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    die_with_launcher()  # started by a run's supervisor: ends when it does, however it ends
    problem = _problem(args)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        keys = KeyRing.from_line(sys.stdin.readline(MAX_LINE)) if args.keys_on_stdin else KeyRing()
        prices = load_prices(args.prices)
        meter = Meter(args.run_dir / "run.db", args.upstream, caps=Caps(args.max_tokens, args.max_cost),
                      prices=prices, host=args.host, port=args.port, read_timeout_s=args.read_timeout, log=sys.stderr,
                      keys=keys)
    except (PriceError, ValueError, StoreError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(meter.start(), flush=True)
    while not stop.wait(0.5):
        pass
    meter.stop(args.grace)
    return 0


if __name__ == "__main__":
    sys.exit(main())
