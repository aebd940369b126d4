"""The run folder's typed eval job and summary (record.evaljob): a real grader's job and summary
go to JSON and back unchanged, and old or hostile settings_json rows read without error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.runs import LiveGrader

from agent2rl_tui.grader.server.config import GraderConfig
from agent2rl_tui.grader.server.intake import Intake
from agent2rl_tui.grader.server.queue import Grader
from agent2rl_tui.record.evaljob import EvalJob, EvalJobError, EvalSummary, WorkerSummary
from agent2rl_tui.record.runconfig import RunConfig
from agent2rl_tui.record.store import (
    Submission,
    decoding_row_of,
    judgement_of,
    prompt_profile_of,
    strict_of,
)

JOB_KEYS = ["submission_id", "model_path", "weight_files", "task_folder", "out_dir", "limit", "engine",
            "prompt_profile", "decoding_row", "judge", "eval_seed", "search", "store"]
"""The job line's keys before it was typed, in their order."""


def test_a_real_job_goes_to_json_and_back(live_grader: LiveGrader) -> None:
    grader = Grader(GraderConfig.from_run(live_grader.run_dir))
    try:
        base = grader.store.baseline()
        assert base is not None and base.intake_json
        manifest = Intake.from_json(base.intake_json).manifest
        job = grader._job(base, "/tmp/intake/0", manifest, live_grader.run_dir / "evals" / "0")
    finally:
        grader.store.close()
    line = json.dumps(job.to_json())
    assert list(json.loads(line)) == JOB_KEYS
    assert EvalJob.from_json(line) == job
    assert job.weight_files and job.eval_seed is not None


def test_a_job_missing_what_it_needs_is_a_clear_error() -> None:
    minimal = {"submission_id": 3, "model_path": "/m", "task_folder": "/t", "out_dir": "/o"}
    job = EvalJob.from_json(minimal)
    assert (job.engine, job.limit, job.judge, job.weight_files) == ({}, None, None, None)
    with pytest.raises(EvalJobError, match="out_dir"):
        EvalJob.from_json({k: v for k, v in minimal.items() if k != "out_dir"})
    for bad in ("[1]", "not json", {**minimal, "submission_id": "3"}, {**minimal, "model_path": 5}):
        with pytest.raises(EvalJobError):
            EvalJob.from_json(bad)


def test_a_real_summary_goes_to_json_and_back(live_grader: LiveGrader) -> None:
    path = live_grader.run_dir / "evals" / "0" / "summary.json"
    written = json.loads(path.read_text())
    summary = WorkerSummary.from_json(written)
    assert summary.ok and summary.to_json() == written
    assert json.dumps(summary.to_json()) == json.dumps(written)  # same keys, same order
    with live_grader.store() as store:
        base = store.baseline()
    assert base is not None and base.settings_json
    settings = EvalSummary.from_settings_json(base.settings_json)
    assert settings.to_settings_json() == base.settings_json
    assert settings.evaluator and settings.engine_settings and settings.inference
    assert settings.prompt_profile == json.loads(base.settings_json).get("prompt_profile")
    assert prompt_profile_of(RunConfig(), base) == settings.prompt_profile


def test_a_failed_summary_reads_back() -> None:
    failed = {"ok": False, "submission_id": 4, "error_code": "model_load_failed", "error": "no weights"}
    summary = WorkerSummary.from_json(failed)
    assert not summary.ok and summary.error_code == "model_load_failed" and summary.to_json() == failed
    with pytest.raises(EvalJobError):
        WorkerSummary.from_json({"ok": True, "submission_id": 4})


def sub_with(settings_json: str | None) -> Submission:
    return Submission(id=1, kind="agent", model_path=None, resolved_path=None, status="scored", received_at=0.0,
                      started_at=None, finished_at=None, score=1.0, n_items=1, n_correct=1, error=None,
                      weights_hash=None, engine=None, settings_json=settings_json, timings_json=None, gpu=None)


def test_an_old_summary_reads_as_it_was_written() -> None:
    old = {"evaluator": "math", "prompt_profile": "opencompass", "chat": True, "decoding_row": "qwen",
           "max_new_tokens": 512, "engine_settings": {"engine": "vllm"},
           "strict": {"score": 50.0, "n_correct": 1, "n_differ": 0, "differ": [], "rule": "r"},
           "judge": {"model": "gpt", "mode": "pairwise"},
           "winrate": {"metric": "win_rate", "win_rate": 60.0, "n_total": 5, "n_failed": 0},
           "some_later_key": [1, 2]}
    text = json.dumps(old)
    summary = EvalSummary.from_settings_json(text)
    assert summary.to_json() == old and summary.rest == {"some_later_key": [1, 2]}
    sub = sub_with(text)
    assert prompt_profile_of(RunConfig(), sub) == "opencompass" and decoding_row_of(RunConfig(), sub) == "qwen"
    strict = strict_of(sub)
    assert strict is not None and strict.to_json() == old["strict"] and (strict.score, strict.rule) == (50.0, "r")
    judged = judgement_of(sub)
    assert judged is not None and (judged.win_rate, judged.judge_model, judged.n_judged) == (60.0, "gpt", 5)
    assert list(judged.to_json()) == JUDGED_KEYS and judged.to_json()["n_cached"] is None
    assert summary.engine_settings is not None and summary.engine_settings.engine == "vllm"
    # A run without a recorded profile falls back to the run's config, as before.
    assert prompt_profile_of(RunConfig.from_json('{"prompt_profile": "ours"}'), sub_with("{}")) == "ours"


@pytest.mark.parametrize("text", [None, "", "not json", "[1, 2]", "null", "3", '"x"', "[" * 100_000,
                                  '{"strict": 5, "judge": "x", "winrate": [1], "prompt_profile": 7,'
                                  ' "decoding_row": {"a": 1}, "evaluator": null}'])
def test_a_hostile_or_broken_summary_reads_as_none(text: str | None) -> None:
    summary = EvalSummary.from_settings_json(text)
    sub = sub_with(text)
    assert strict_of(sub) is None and judgement_of(sub) is None
    assert prompt_profile_of(RunConfig.from_json("not json"), sub) is None
    assert decoding_row_of(RunConfig.from_json("[]"), sub) is None
    assert summary.prompt_profile is None and summary.strict is None


def test_a_judge_without_rates_is_no_judgement() -> None:
    assert judgement_of(sub_with(json.dumps({"judge": {"model": "m"}}))) is None
    assert judgement_of(sub_with(json.dumps({"judge": {}, "winrate": {"win_rate": 1.0}}))) is None


JUDGED_KEYS = ["metric", "win_rate", "length_controlled_winrate", "lc_unavailable", "n_judged", "n_failed",
               "n_cached", "judge_model", "judge_mode"]
"""report.json's ``judged`` keys before they were typed, in their order."""

HOSTILE_TABLES = {
    "engine_settings": {"engine": 5, "dtype": None, "device": ["cpu"], "later": {"x": 1}},
    "strict": {"rule": ["r"], "score": "high", "differ": [1, "2"], "n_correct": True, "n_differ": float("nan")},
    "judge": {"mode": 3, "model": {"name": "m"}, "prompt_version": None, "base_url": "http://x"},
    "winrate": {"n_total": "5", "win_rate": [60], "metric": 7, "length_controlled_winrate": None, "extra": 1},
    "env": {"kind": 1, "max_steps": 50},
    "episodes": {"by_kind": [1], "score": False, "games": 3, "later": None},
}
"""Each inner table with its typed keys of the wrong type, in another order, and unknown keys."""


def test_hostile_inner_tables_read_without_error_and_write_back_unchanged() -> None:
    data = {"evaluator": "x", **HOSTILE_TABLES, "rest_key": 1}
    text = json.dumps(data)
    summary = EvalSummary.from_settings_json(text)
    assert summary.to_settings_json() == text  # byte-identical: the keys, their order, the odd values kept
    assert summary.engine_settings is not None and summary.engine_settings.engine is None
    assert summary.engine_settings.rest == {"engine": 5, "device": ["cpu"], "later": {"x": 1}}
    strict = strict_of(sub_with(text))
    assert strict is not None and (strict.rule, strict.score, strict.differ, strict.n_correct) == (None,) * 4
    assert strict.n_differ != strict.n_differ  # NaN is a number: kept as written
    assert summary.judge is not None and (summary.judge.model, summary.judge.mode) == (None, None)
    judged = judgement_of(sub_with(text))
    assert judged is not None and (judged.metric, judged.win_rate, judged.n_judged, judged.judge_model) == (None,) * 4
    assert json.dumps(judged.to_json())  # what the report writes
    assert summary.env is not None and summary.env.kind is None and summary.env.rest["max_steps"] == 50
    assert summary.episodes is not None and (summary.episodes.by_kind, summary.episodes.score) == (None, None)
    assert summary.episodes.games == 3


@pytest.mark.parametrize("table", sorted(HOSTILE_TABLES))
@pytest.mark.parametrize("value", [None, 5, "x", [1], [], {}, True])
def test_an_inner_table_of_any_value_reads_and_writes_back(table: str, value: object) -> None:
    text = json.dumps({table: value, "after": 1})
    summary = EvalSummary.from_settings_json(text)
    assert summary.to_settings_json() == text
    part = getattr(summary, table)
    assert (part is None) == (not isinstance(value, dict))
    if isinstance(value, dict):  # an empty table is a part, and empty
        assert part.empty and part.to_json() == {}
    else:  # a table that is not one is kept as found, beside the others
        assert summary.rest[table] == value
    sub = sub_with(text)
    assert judgement_of(sub) is None and (strict_of(sub) is None or strict_of(sub).empty)


def test_a_made_summary_writes_the_workers_keys_in_order() -> None:
    from agent2rl_tui.record.summary_parts import StrictReading

    made = EvalSummary.made_with(
        evaluator="math_answer", engine_choice="why", engine_load="fresh",
        inference={"prompt_profile": "reference", "chat": False, "decoding_row": None},
        engine_settings={"engine": "vllm", "dtype": "bfloat16", "device": "cuda"},
        details={"later": 1, "winrate": {"win_rate": 50.0}, "strict": {"rule": "r", "score": 10}},
        env={"kind": "twc"}, episodes={"score": 10.0, "games": 2})
    assert list(made.to_json()) == ["evaluator", "engine_choice", "engine_load", "prompt_profile", "chat",
                                    "decoding_row", "engine_settings", "strict", "winrate", "later", "env",
                                    "episodes"]
    assert made.strict == StrictReading.from_json({"rule": "r", "score": 10})
    assert list(made.to_json()["strict"]) == ["rule", "score"]  # the evaluator's order, kept
    assert made.env is not None and made.env.kind == "twc" and made.episodes is not None
    assert EvalSummary.from_settings_json(made.to_settings_json()) == made
    # A part made in code writes its typed fields that are set, then the rest.
    assert StrictReading(score=1.0, rule="r", rest={"x": 2}).to_json() == {"score": 1.0, "rule": "r", "x": 2}


# -- the lines of evals/<n>/results.jsonl (record.results) -------------------------------------

def test_a_real_results_file_reads_back_line_for_line(live_grader: LiveGrader) -> None:
    from agent2rl_tui.record.results import ItemRow
    from agent2rl_tui.review.runview import read_rows

    path = live_grader.run_dir / "evals" / "0" / "results.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines and all(ItemRow.from_dict(json.loads(line)).to_line() == line for line in lines)
    assert [r.to_line() for r in read_rows(live_grader.run_dir, 0)] == lines


def test_an_episode_line_is_the_runners_episode() -> None:
    from agent2rl_tui.grader.episode_runner import Episode
    from agent2rl_tui.grader.episode_runner import Turn as PlayedTurn
    from agent2rl_tui.grader.evaluators.episodes import episode_result
    from agent2rl_tui.record.results import EpisodeRow

    ep = Episode(index=2, game="g:1", goal="Find it.", first_observation="Room.", kind="pick", end="won", won=True,
                 score=1.0, prompt="p", turns=[PlayedTurn(action="look", observation="A box.", reward=0.0,
                                                          completion=" look")])
    line = episode_result(ep).to_dict()
    assert list(line["extra"]) == ["game", "kind", "goal", "steps", "end", "score", "first_observation", "turns"]
    row = EpisodeRow.from_dict(line)
    assert (row.index, row.won, row.game, row.steps, row.turns[0].completion) == (2, True, "g:1", 1, " look")
    assert row.to_dict() == line
    judged = {**line, "extra": {**line["extra"], "answer": "x", "gold_answer": "y"}}
    assert EpisodeRow.from_dict(judged).rest == {"answer": "x", "gold_answer": "y"}


def test_hostile_results_lines_are_skipped_not_fatal(tmp_path: Path) -> None:
    from agent2rl_tui.record.results import ItemRow
    from agent2rl_tui.review.episodes_view import all_episodes, episode_rows, facts, is_episode
    from agent2rl_tui.review.runview import compare_items, read_rows

    good = {"index": 0, "prompt": "1+1=", "output": "2", "extracted": "2", "gold": "2", "correct": True}
    hostile = ["not json", "[1, 2]", '"text"', "[" * 50_000, json.dumps({"prompt": "no index"}),
               json.dumps({**good, "index": "0"}), json.dumps({**good, "extra": [1]}),
               json.dumps({**good, "prompt": {"a": 1}}), json.dumps({**good, "correct": "yes"})]
    out = tmp_path / "evals" / "1"
    out.mkdir(parents=True)
    (out / "results.jsonl").write_text("\n".join([*hostile, json.dumps(good)]) + "\n", encoding="utf-8")
    rows = read_rows(tmp_path, 1)
    assert [r.to_dict() for r in rows] == [{**good, "extra": {}}]
    cmp = compare_items(rows, [ItemRow.from_dict({"index": 0, "correct": False})])
    assert cmp.solved == rows and cmp.kept == 0
    weird = ItemRow.from_dict({"index": 1, "correct": 1, "extra": {"turns": [5, {"action": 3, "reward": "big"}],
                                                                   "steps": "many", "score": float("inf"),
                                                                   "game": None}})
    assert is_episode(weird) and all_episodes([weird]) and not is_episode(ItemRow.from_dict({"index": 2}))
    f = facts(weird)
    assert (f.game, f.steps, f.actions) == ("?", 1, ["3"])
    assert any(r.note == "reward ?" for r in episode_rows(weird))
