"""The scripted eval worker (grader/scripted_worker.py): the real grader, intake, queue and
record, with evaluations answered from the run's script, so tests of what happens around
evaluations load no model."""

from __future__ import annotations

import json
from pathlib import Path

from support.runs import LiveGrader, make_prepared_run

from agent2rl_tui.record.store import RunStore, SubStatus

SCRIPT = {"scores": {"0": 10.0, "1": 75.0}, "fail": [2], "items": 4}


def outcome(grader: LiveGrader) -> dict:
    """Submit the workspace's copy of the base model and wait for its outcome (scored or failed)."""
    model = next((grader.workspace / "models").iterdir())
    reply = grader.client.request("POST", "/submit", {"model_path": str(model)})  # waits for the outcome
    body = reply.json()
    assert "submission_id" in body, reply.text
    with RunStore.of_run(grader.run_dir) as store:
        sub = store.submission(body["submission_id"])
    assert sub is not None and sub.status in (SubStatus.SCORED, SubStatus.FAILED), body
    return {"status": sub.status, "score": sub.score, "error_code": sub.error_code}


def test_scores_come_from_the_script_through_the_real_grader(tmp_path: Path, tiny_model: Path) -> None:
    run_dir = make_prepared_run(tmp_path, tiny_model, scripted_worker=SCRIPT)
    grader = LiveGrader(run_dir)
    try:
        assert grader.health["baseline"]["score"] == 10.0  # the baseline, scored before the agent's turn
        first = outcome(grader)
        assert (first["status"], first["score"]) == ("scored", 75.0)
        second = outcome(grader)
        assert second["status"] == "failed" and second["error_code"] == "evaluation_failed"
        third = outcome(grader)
        assert (third["status"], third["score"]) == ("scored", 0.0)  # not named by the script: its default
    finally:
        grader.close()
    with RunStore.of_run(run_dir) as store:
        subs = {s.id: s for s in store.submissions()}
    assert subs[1].engine == "scripted" and json.loads(subs[1].settings_json)["evaluator"] == "scripted"
    rows = (run_dir / "evals" / "1" / "results.jsonl").read_text().splitlines()
    assert [json.loads(r)["correct"] for r in rows] == [True, True, True, False]  # 75% of 4 items
    worker_log = "".join(p.read_text() for p in (run_dir / "logs" / "workers").glob("*.log"))
    assert "torch" not in worker_log


def test_an_evaluation_that_never_ends_is_cut_by_the_eval_timeout(tmp_path: Path, tiny_model: Path) -> None:
    run_dir = make_prepared_run(tmp_path, tiny_model, scripted_worker={"hang": [1]}, eval_timeout_s=3)
    grader = LiveGrader(run_dir)
    try:
        hung = outcome(grader)
        assert hung["status"] == "failed" and hung["error_code"] == "eval_timeout"
        after = outcome(grader)
        assert after["status"] == "scored"  # a fresh worker took the next one
    finally:
        grader.close()
