"""Statistics over runs keep apart what differs and count the runs that failed (issue 42, 2).

Real run folders (run.db written by RunStore), grouped by ``review.compare`` and printed by the
real ``agent2rl-tui compare``; every expected number is worked out here by hand.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import pytest
from support.runs import cli
from support.synthetic import make_run

from agent2rl_tui.record.store import BASELINE_ID, RunStore
from agent2rl_tui.review.compare import ci_text, compare
from agent2rl_tui.review.index import summarize
from agent2rl_tui.review.outcome import STILL_RUNNING, outcome
from agent2rl_tui.review.stats import bootstrap_ci


def run(root: Path, name: str, *, scores: tuple[float, ...], baseline: float = 10.0, weights: str = "w-tiny",
        eval_limit: int | None = None, status: str = "finished", heartbeat: float | None = None) -> Path:
    """A finished arith run of the example agent on base folder "tiny-llama" whose weights hash is ``weights``."""
    folder = make_run(root, name, scores=scores, baseline=baseline, status=status, heartbeat=heartbeat)
    with RunStore.of_run(folder) as store:
        store.update_submission(BASELINE_ID, weights_hash=weights)
        config = {"task_folder": "tasks/arith", **({"eval_limit": eval_limit} if eval_limit is not None else {})}
        store.update_run(config_json=json.dumps(config))
    return folder


def test_a_run_without_a_valid_submission_counts_at_zero_and_lowers_its_groups_mean(tmp_path: Path) -> None:
    # make_run scores 20 items, so a score is a multiple of 5.
    run(tmp_path, "r1", scores=(30.0, 50.0))          # best 50, improvement +40
    run(tmp_path, "r2", scores=(40.0,))               # +30
    run(tmp_path, "r3", scores=(25.0,))               # +15
    run(tmp_path, "r4", scores=())                    # never submitted: best of budget = baseline, +0
    runs = [summarize(p) for p in sorted(tmp_path.iterdir())]
    assert outcome(runs[3]).valid is False and outcome(runs[3]).improvement == 0.0

    (group,) = compare(runs)
    assert group.runs == 4 and group.tally.valid == 3 and group.tally.valid_text() == "3 of 4 valid"
    improvements = [40.0, 30.0, 15.0, 0.0]
    assert group.improvement_mean == pytest.approx(21.25)  # the survivors alone would say 28.33
    assert group.improvement_sd == pytest.approx(statistics.stdev(improvements))
    assert group.best_mean == pytest.approx((50 + 40 + 25 + 10) / 4)
    assert group.improvement_ci == bootstrap_ci(improvements) and group.improvement_ci is not None

    out = cli("compare", root=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "4 runs (3 of 4 valid; 4 finished)" in out.stdout
    assert f"improvement 21.25 ± {statistics.stdev(improvements):.2f} 95% CI [" in out.stdout


def test_two_base_models_never_share_a_group_even_under_one_folder_name(tmp_path: Path) -> None:
    run(tmp_path, "a1", scores=(50.0,), weights="w-one")
    run(tmp_path, "a2", scores=(60.0,), weights="w-one")
    run(tmp_path, "b1", scores=(20.0,), weights="w-two")  # another model, copied to a folder of the same name
    groups = compare([summarize(p) for p in sorted(tmp_path.iterdir())])
    assert [(g.base_model, g.runs) for g in groups] == [("tiny-llama (weights w-one)", 2),
                                                         ("tiny-llama (weights w-two)", 1)]
    assert groups[0].improvement_mean == pytest.approx(45.0) and groups[1].improvement_mean == pytest.approx(10.0)


def test_an_eval_limit_makes_another_measurement(tmp_path: Path) -> None:
    run(tmp_path, "full", scores=(50.0,))
    run(tmp_path, "quick", scores=(90.0,), eval_limit=4)
    groups = compare([summarize(p) for p in sorted(tmp_path.iterdir())])
    assert [(g.setting_text(), g.best_mean) for g in groups] == [("mode free", 50.0),
                                                                 ("mode free, first 4 eval items", 90.0)]


def test_below_three_runs_there_is_no_interval_and_a_live_run_is_not_counted(tmp_path: Path) -> None:
    run(tmp_path, "r1", scores=(30.0,))
    run(tmp_path, "r2", scores=(50.0,))
    run(tmp_path, "r3", scores=(95.0,), status="running", heartbeat=time.time())  # alive: its number is not known yet
    runs = [summarize(p) for p in sorted(tmp_path.iterdir())]
    (group,) = compare(runs)
    assert group.runs == 2 and group.members == 3 and group.tally.not_counted == {STILL_RUNNING: 1}
    assert group.tally.valid_text() == "2 of 2 valid; 1 still running, not counted"
    assert group.improvement_mean == pytest.approx(30.0)  # (20 + 40) / 2, the live run's 85 left out
    assert group.improvement_ci is None and ci_text(group.improvement_ci, group.runs) == "too few runs for an interval"
    out = cli("compare", root=tmp_path)
    (line,) = [x for x in out.stdout.splitlines() if "best of budget" in x]
    assert line.endswith("improvement 30.00 ± 14.14 95% CI too few runs for an interval") and "[" not in line
