"""Stored transcripts: batched writes, pages, kind filters, search and time lookups on run.db."""

from __future__ import annotations

import json
from pathlib import Path

from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.record.transcripts import (
    TranscriptRecorder,
    count_steps,
    page_steps,
    position_of,
    search_steps,
    step_near,
    steps_by_seq,
    transcript_totals,
)
from agent2rl_tui.run.streams import make_normalizer


def test_a_long_transcript_is_paged_filtered_and_searched(tmp_path: Path) -> None:
    with RunStore(tmp_path / "run.db", create=True) as store:
        store.create_run(RunRecord(id="r", task="arith", agent="claude-code", base_model="m", base_model_source="/m",
                         budget_s=60, grace_s=1, status="running", created_at=0.0))
    rec = TranscriptRecorder(tmp_path, make_normalizer("claude-stream-json"))
    for i in range(3000):
        if i % 3 == 0:
            line = {"type": "assistant", "message": {"id": f"m{i}", "content": [
                {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": f"python train.py --lr {i}"}}],
                "usage": {"input_tokens": 10, "output_tokens": 2}}}
        elif i % 3 == 1:
            line = {"type": "user", "message": {"content": [
                {"type": "tool_result", "tool_use_id": f"t{i - 1}", "content": f"final loss {i}"}]}}
        else:
            line = {"type": "assistant", "message": {"id": f"m{i}", "content": [{"type": "text", "text": f"note {i}"}]}}
        rec.stdout_line(json.dumps(line), 1000.0 + i)
    rec.stderr_line("CUDA warning", 5000.0)
    rec.close()
    with RunStore.of_run(tmp_path) as store:
        assert count_steps(store) == 3001
        assert count_steps(store, ("tool_call",)) == 1000
        page = page_steps(store, 1500, 10)
        assert [p.seq for p in page] == list(range(1501, 1511))
        calls = page_steps(store, 10, 2, ("tool_call",))
        assert [c.args for c in calls] == [{"command": "python train.py --lr 30"}, {"command": "python train.py --lr 33"}]
        assert calls[0].tool == "Bash"
        hits = search_steps(store, "train.py --lr 2997")
        assert [s.args for s in steps_by_seq(store, hits)] == [{"command": "python train.py --lr 2997"}]
        assert [s.text for s in steps_by_seq(store, search_steps(store, "final loss 1000"))] == ["final loss 1000"]
        assert search_steps(store, 'AND OR "NEAR(') == []  # user text is never FTS syntax
        result_hit = search_steps(store, "loss", ("tool_result",))
        assert len(result_hit) == 1000
        assert position_of(store, 3001) == 3000
        assert position_of(store, calls[1].seq, ("tool_call",)) == 11
        assert step_near(store, 1000.0 + 1234.5) == 1235
        assert step_near(store, 0.0) == 1
        totals = transcript_totals(store)
        assert totals["tokens_in"] == 10 * 1000 and totals["tokens_out"] == 2 * 1000
        assert totals["by_kind"]["raw"] == 1
