"""Benchmark: a 100,000-line Claude Code stream through the recorder, then paged and searched.

Prints the time to normalize and store the lines (as the supervisor does, in batches), and
the time of the reads the TUI makes: a page deep in the transcript, a kind filter, a count,
a full-text search. Run: ``python bench/transcript.py``.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from pathlib import Path

from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.record.transcripts import (
    TranscriptRecorder,
    count_steps,
    page_steps,
    search_steps,
    transcript_totals,
)
from agent2rl_tui.run.transcripts import make_normalizer

N = 100_000


def lines() -> list[str]:
    rng = random.Random(0)
    out = []
    for i in range(N):
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


def timed(label: str, fn):  # noqa: ANN001, ANN201
    t = time.perf_counter()
    value = fn()
    print(f"{label:44} {(time.perf_counter() - t) * 1000:9.1f} ms")
    return value


def main() -> None:
    run = Path(tempfile.mkdtemp(prefix="bench-transcript-"))
    with RunStore(run / "run.db", create=True) as store:
        store.create_run(RunRecord(id="b", task="arith", agent="claude-code", base_model="m", base_model_source="/m",
                         budget_s=3600, grace_s=1, status="running", created_at=0.0))
    stream = lines()
    rec = TranscriptRecorder(run, make_normalizer("claude-stream-json"))

    def record() -> None:
        t0 = time.time()
        for i, line in enumerate(stream):
            rec.stdout_line(line, t0 + i * 0.01)
        rec.close()

    timed(f"normalize + store {N:,} lines", record)
    print(f"run.db size {(run / 'run.db').stat().st_size / 1e6:.1f} MB")
    with RunStore.of_run(run) as store:
        n = timed("count all steps", lambda: count_steps(store))
        timed("count tool_call steps", lambda: count_steps(store, ("tool_call",)))
        timed("page of 100 at offset 90,000", lambda: page_steps(store, 90_000, 100))
        timed("page of 100 tool_calls at offset 20,000", lambda: page_steps(store, 20_000, 100, ("tool_call",)))
        hits = timed("search 'seed 4242' (prefixes)", lambda: search_steps(store, "seed 4242"))
        timed("totals (tokens, cost, kinds)", lambda: transcript_totals(store))
        print(f"{n:,} steps; search found {len(hits)}")


if __name__ == "__main__":
    main()
