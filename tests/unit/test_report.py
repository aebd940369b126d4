"""Report metrics computed from a real run.db holding a hand-made submission history."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.review.report import build_report, write_report


def make_history(run_dir: Path) -> None:
    run_dir.mkdir()
    t0 = 1_000_000.0
    with RunStore(run_dir / "run.db", create=True) as store:
        store.create_run(RunRecord(id=run_dir.name, task="arith", agent="command", base_model="m",
                         base_model_source="/m", budget_s=100.0, grace_s=5.0, status="finished",
                         created_at=t0 - 10, budget_start=t0, deadline=t0 + 100,
                         agent_ended_at=t0 + 80, ended_at=t0 + 85))
        store.add_submission(kind="baseline", status="scored", score=10.0, weights_hash="BASE")
        history = [  # (status, score, hash, received offset)
            ("rejected", None, None, 5),
            ("scored", 10.0, "BASE", 10),   # a copy of the base model
            ("failed", None, None, 20),
            ("scored", 30.0, "A", 30),
            ("scored", 25.0, "B", 40),
            ("scored", 30.0, "C", 50),      # ties the best; the earlier one counts
        ]
        for status, score, digest, at in history:
            sid = store.add_submission(kind="agent", status=status, score=score, weights_hash=digest)
            store.update_submission(sid, received_at=t0 + at)


def test_metrics_follow_their_definitions(tmp_path: Path) -> None:
    make_history(tmp_path / "run")
    report = build_report(tmp_path / "run")
    m = report.metrics
    assert m.n_submissions == 6 and m.n_valid == 4
    assert m.valid_submission_rate == pytest.approx(4 / 6)
    assert m.first_valid_idx == 2
    assert m.first_valid_delay == pytest.approx(10)
    assert m.time_to_first_improvement == pytest.approx(30)
    assert m.time_to_best == pytest.approx(30)
    assert m.monotonic_ratio == pytest.approx(2 / 3)  # 10->30 up, 30->25 down, 25->30 up
    assert m.time_used_ratio == pytest.approx(0.8)
    assert m.last_submit_gap == pytest.approx(30)
    assert m.base_copy_count == 1
    assert report.to_json()["best"] == {"submission_id": 4, "score": 30.0}
    assert report.improvement == pytest.approx(20.0)
    assert [s.is_base_copy for s in report.submissions] == [False, True, False, False, False, False]


def test_a_run_without_submissions_has_empty_metrics(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    with RunStore(run / "run.db", create=True) as store:
        store.create_run(RunRecord(id="r", task="arith", agent="command", base_model="m", base_model_source="/m",
                         budget_s=100.0, grace_s=5.0, status="failed", created_at=0.0))
    report = write_report(run)
    assert report.best is None and report.improvement is None
    assert report.metrics.valid_submission_rate is None
    assert report.metrics.first_valid_idx is None
    assert (run / "report" / "report.md").exists()


def test_a_run_ended_at_the_deadline_used_exactly_its_budget(tmp_path: Path) -> None:
    make_history(tmp_path / "run")
    with RunStore.of_run(tmp_path / "run") as store:  # TERM at the deadline, then 5 s of grace
        run = store.run()
        store.update_run(agent_ended_at=run.deadline + 5.0, ended_at=run.deadline + 9.0)
    m = build_report(tmp_path / "run").metrics
    assert m.time_used_ratio == pytest.approx(1.0)
    assert m.last_submit_gap == pytest.approx(50)  # deadline (t0+100) - last submission (t0+50)


def test_warnings_from_the_run_reach_the_report(tmp_path: Path) -> None:
    make_history(tmp_path / "run")
    with RunStore.of_run(tmp_path / "run") as store:
        store.event("vitals", "disk_low", "disk nearly full: 1.2 GiB free under the run folder")
        store.event("supervisor", "grader_restarted", "grader exited with code -9; restarted (pid 42)")
        store.event("supervisor", "agent_start", "agent started (pid 7)")  # routine: not a warning
    report = write_report(tmp_path / "run")
    assert [w.kind for w in report.warnings] == ["disk_low", "grader_restarted"]
    md = (tmp_path / "run" / "report" / "report.md").read_text()
    assert "## Warnings (2)" in md and "disk nearly full" in md and "agent started" not in md
