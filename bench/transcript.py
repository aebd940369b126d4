"""Benchmark: a 100,000-line Claude Code stream through the recorder, then paged and searched.

Prints the time to normalize and store the lines (as the supervisor does, in batches), and
the time of the reads the TUI makes: a page deep in the transcript, a kind filter, a count,
a full-text search. Run: ``python bench/transcript.py [--quick]`` (``--quick``: 5,000 lines, the
same steps in seconds; the reads go as deep into the transcript, in proportion).
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.record.transcripts import (
    TranscriptRecorder,
    count_steps,
    page_steps,
    search_steps,
    transcript_totals,
)
from agent2rl_tui.run.streams import make_normalizer

T = TypeVar("T")

N, QUICK_N = 100_000, 5_000


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_N:,} lines: the same steps in seconds")
    return parser.parse_args()


def lines(n: int) -> list[str]:
    """``n`` lines of a Claude Code stream (seeded: the same lines every time, the first ones whatever ``n``)."""
    rng = random.Random(0)
    out = []
    for i in range(n):
        r = rng.random()
        if r < 0.4:
            out.append(json.dumps({"type": "assistant", "message": {"id": f"m{i}", "content": [
                {"type": "text", "text": f"step {i}: I will tune the learning rate to {rng.random():.4f}"}],
                "usage": {"input_tokens": 1000, "output_tokens": 50}}}))
        elif r < 0.7:
            out.append(json.dumps({"type": "assistant", "message": {"id": f"m{i}", "content": [
                {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": f"python train.py --seed {i}"}}]}}))
        else:
            out.append(json.dumps({"type": "user", "message": {"content": [
                {"type": "tool_result", "tool_use_id": f"t{i - 1}", "content": "loss 0.5\n" * rng.randint(1, 400)}]}}))
    return out


def timed(label: str, fn: Callable[[], T]) -> T:
    t = time.perf_counter()
    value = fn()
    print(f"{label:44} {(time.perf_counter() - t) * 1000:9.1f} ms")
    return value


def main() -> None:
    n = QUICK_N if parse_args().quick else N
    with tempfile.TemporaryDirectory(prefix="bench-transcript-") as tmp:
        run = Path(tmp)
        with RunStore(run / "run.db", create=True) as store:
            store.create_run(RunRecord(id="b", task="arith", agent="claude-code", base_model="m", base_model_source="/m",
                             budget_s=3600, grace_s=1, status="running", created_at=0.0))
        stream = lines(n)
        record(run, stream)
        reads(run, n, search_term(stream))


def record(run: Path, stream: list[str]) -> None:
    """Normalize and store the stream as the supervisor does."""
    rec = TranscriptRecorder(run, make_normalizer("claude-stream-json"))

    def feed() -> None:
        t0 = time.time()
        for i, line in enumerate(stream):
            rec.stdout_line(line, t0 + i * 0.01)
        rec.close()

    timed(f"normalize + store {len(stream):,} lines", feed)
    print(f"run.db size {(run / 'run.db').stat().st_size / 1e6:.1f} MB")


def search_term(stream: list[str]) -> str:
    """A search the TUI might make: the seed of the first tool call past 42% of the stream, its
    last digit dropped (a prefix: it finds that call and any whose seed goes on from it)."""
    for line in stream[len(stream) * 42 // 100:]:
        if '"tool_use"' in line:
            seed = json.loads(line)["message"]["content"][0]["input"]["command"].rsplit(" ", 1)[1]
            return f"seed {seed[:-1]}"
    raise ValueError("no tool call in the stream's last 58%")


def reads(run: Path, n: int, searched: str) -> None:
    """The TUI's reads, as deep into the transcript as the full run's (offsets in proportion)."""
    deep, tools = n * 9 // 10, n // 5
    with RunStore.of_run(run) as store:
        count = timed("count all steps", lambda: count_steps(store))
        timed("count tool_call steps", lambda: count_steps(store, ("tool_call",)))
        timed(f"page of 100 at offset {deep:,}", lambda: page_steps(store, deep, 100))
        timed(f"page of 100 tool_calls at offset {tools:,}", lambda: page_steps(store, tools, 100, ("tool_call",)))
        hits = timed(f"search '{searched}' (prefixes)", lambda: search_steps(store, searched))
        timed("totals (tokens, cost, kinds)", lambda: transcript_totals(store))
        print(f"{count:,} steps; search found {len(hits)}")


if __name__ == "__main__":
    main()
