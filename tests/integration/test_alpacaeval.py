"""Level 2, AlpacaEval 2.0: the judge over real HTTP (a judge server process on 127.0.0.1), the
real reference outputs (../shared/data/alpaca_eval), alpaca-eval's own win-rate functions, and
a whole run of the example agent graded by the judge.

The judge server (tests/support/judge_server.py) prefers the longer of the two outputs it is shown,
with probability logistic((len(first) - len(second)) / 40), so every expected preference
here is computed from the texts' lengths.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import local_server
from support.alpaca import REFERENCE_FILE, reference_items
from support.runs import Judge, cli

from agent2rl_tui.grader.evaluators import evaluator_for
from agent2rl_tui.judge import JudgeError, winrate
from agent2rl_tui.record.root import RunError
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.run.lifecycle import create_run
from agent2rl_tui.run.request import RunRequest
from agent2rl_tui.tasks.alpacaeval import install_lc_file
from agent2rl_tui.tasks.data import prepare
from agent2rl_tui.tasks.registry import TaskError, load_task

SCALE = 40.0


def make_evaluator(judge: Judge, mode: str, **settings: object):
    task = load_task("alpacaeval")
    return evaluator_for(task, judge={"base_url": judge.url, "model": "local-judge", "mode": mode,
                                      "backoff_s": 0.05, **settings})


def expected_preference(model_output: str, reference: str, mode: str) -> float:
    """alpaca_eval's orientation (1: the reference is better, 2: the model's output is)."""
    p_model = 1 / (1 + math.exp(-(len(model_output) - len(reference)) / SCALE))
    if mode == "weighted":
        return 1 + min(max(p_model, 1e-6), 1 - 1e-6)
    return 2.0 if len(model_output) > len(reference) else 1.0


def test_prepare_reads_the_reference_outputs_and_alpaca_rows(alpaca_data: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    evals = [json.loads(line) for line in (alpaca_data / "eval.jsonl").open(encoding="utf-8")]
    assert len(evals) == 805 and {e["generator"] for e in evals} == {"gpt4_1106_preview"}
    assert evals[0]["instruction"] == json.loads(REFERENCE_FILE.read_text())[0]["instruction"]
    train = [json.loads(line) for line in (alpaca_data / "train.jsonl").open(encoding="utf-8")]
    assert len(train) == 48
    assert train[1]["question"] == "Solve this math word problem.\n\n" + train[1]["input"]  # as AutoRL-Bench joins them
    assert train[0]["question"] == train[0]["instruction"] and train[0]["answer"] == train[0]["output"]
    meta = json.loads((alpaca_data / "source.json").read_text())
    assert meta["lc_source"].startswith("unavailable") and meta["train_source"].endswith("alpaca_data.json")

    # The agent's rows missing, offline: the error says what to give.
    monkeypatch.setenv("AGENT2RL_DATA", str(tmp_path / "cache"))
    with pytest.raises(TaskError, match="--from FILE"):
        prepare(load_task("alpacaeval"), [REFERENCE_FILE])
    proc = cli("data", "prepare", "alpacaeval", "--from", str(REFERENCE_FILE), env={
        **os.environ, "AGENT2RL_DATA": str(tmp_path / "cache")})
    assert proc.returncode != 0 and "tatsu-lab/alpaca" in proc.stderr and "Traceback" not in proc.stderr


def test_the_judge_sees_each_pair_in_alpaca_evals_own_order(alpaca_data: Path) -> None:
    """alpaca_eval's own processor, run on the reference items, switches output_1 (the reference)
    and output_2 (the model's) on exactly the items where we show the model's output first."""
    import pandas as pd
    from alpaca_eval.processors import RandomSwitchTwoColumnsProcessor

    from agent2rl_tui.grader.evaluators.pairwise import model_shown_first

    items = reference_items(805)
    frame = pd.DataFrame({"instruction": [it["instruction"] for it in items], "output_1": [it["output"] for it in items],
                          "output_2": ["model"] * len(items)})
    switch = RandomSwitchTwoColumnsProcessor(two_columns_to_switch=["output_1", "output_2"],
                                             random_seed_columns=["instruction"], _switch_column="is_switched_outputs",
                                             seed=0)  # as alpaca_eval's PairwiseAnnotator (seed 0) builds it
    switched = switch.preprocess(frame)["is_switched_outputs"].tolist()
    assert [model_shown_first(it["instruction"]) for it in items] == switched
    assert 300 < sum(switched) < 505  # about half each way


def test_an_output_identical_to_the_reference_is_a_tie_without_asking(alpaca_data: Path, judge_server) -> None:
    judge = judge_server()
    items = reference_items(3)
    outputs = [items[0]["output"], "x" * (len(items[1]["output"]) + 900), items[2]["output"] + "  \n"]
    results = make_evaluator(judge, "ranking").judge_all(items, ["prompt"] * 3, outputs)
    # alpaca_eval's rule: the same output (ours after stripping, as AutoRL-Bench keeps them) is 1.5.
    assert [r.extra["preference"] for r in results] == [1.5, 2.0, 1.5]
    assert [r.correct for r in results] == [False, True, False]
    assert judge.requests() == 1  # only the item that differs was judged


@pytest.mark.parametrize("mode", ["ranking", "weighted"])
def test_preferences_are_read_in_both_modes_and_both_orders(alpaca_data: Path, judge_server, mode: str) -> None:
    judge = judge_server()
    items = reference_items(8)
    # Shorter and longer than each reference, by a margin and by a little.
    outputs = [("x" * (len(it["output"]) + delta)) for it, delta in zip(items, (-900, 900, -20, 20, -3, 60, -200, 5))]
    ev = make_evaluator(judge, mode)
    results = ev.judge_all(items, ["prompt"] * len(items), outputs)
    assert {r.extra["model_shown_as"] for r in results} == {"m", "M"}  # both orders drawn
    for r, item, out in zip(results, items, outputs):
        want = expected_preference(out, item["output"], mode)
        assert r.extra["preference"] == pytest.approx(want, abs=1e-6), (r.index, r.extra)
        assert r.correct == (want > 1.5) and r.extra["error"] is None and r.gold == item["output"]
        assert r.extra["judge_raw"]  # what the judge said, kept
    if mode == "ranking":
        assert json.loads(results[0].extra["judge_raw"])["ordered_models"][0]["rank"] == 1
    else:
        assert {t["token"] for t in json.loads(results[0].extra["judge_raw"])} >= {"m", "M"}
    # The win rate by hand: the mean of (preference - 1), in percent.
    by_hand = 100 * sum(expected_preference(o, it["output"], mode) - 1 for o, it in zip(outputs, items)) / len(items)
    details = ev.details(results)
    assert details["winrate"]["win_rate"] == pytest.approx(by_hand, abs=1e-4)
    assert ev.score(results) == pytest.approx(by_hand, abs=1e-4)  # no LC data prepared: the win rate
    assert details["winrate"]["metric"] == "win_rate" and "df_gamed.csv" in details["winrate"]["lc_unavailable"]
    assert details["judge"]["mode"] == mode and details["judge"]["prompt_version"].startswith(mode)
    assert details["winrate"]["n_wins"] == sum(r.correct for r in results)


def test_the_same_pairs_are_judged_once(alpaca_data: Path, judge_server) -> None:
    judge = judge_server()
    items = reference_items(6)
    # Answers of this test's own: the judge cache is shared by the worker's session, and another
    # file judged an empty answer of these items first when the suite ran longest files first.
    outputs = [f"judged-once answer {i} " * (i * 30 + 1) for i in range(6)]
    first = make_evaluator(judge, "ranking")
    first_results = first.judge_all(items, ["p"] * 6, outputs)
    calls = judge.requests()
    assert first.calls == 6 and calls == 6
    again = make_evaluator(judge, "ranking")  # a re-submission of the same model
    again_results = again.judge_all(items, ["p"] * 6, outputs)
    assert judge.requests() == calls and again.calls == 0
    assert all(r.extra["cached"] for r in again_results)
    assert [r.extra["preference"] for r in again_results] == [r.extra["preference"] for r in first_results]
    changed = make_evaluator(judge, "ranking")
    changed.judge_all(items, ["p"] * 6, outputs[:5] + ["a new answer"])
    assert changed.calls == 1 and judge.requests() == calls + 1
    other_mode = make_evaluator(judge, "weighted")  # another prompt version: judged afresh
    other_mode.judge_all(items, ["p"] * 6, outputs)
    assert other_mode.calls == 6


def test_a_failing_judge_is_retried_then_the_item_counts_as_failed(alpaca_data: Path, judge_server) -> None:
    items = reference_items(5)
    outputs = ["a fine answer"] * 5  # each server below gets answers of its own, so none comes from the cache
    flaky = judge_server("--fail-first", "3")
    ev = make_evaluator(flaky, "ranking", concurrency=1)
    results = ev.judge_all(items, ["p"] * 5, outputs)
    assert all(r.extra["preference"] is not None for r in results)
    assert results[0].extra["judge_attempts"] == 4  # three HTTP 500s, then an answer

    reset = judge_server("--reset-first", "2")  # connections reset without an answer are retried too
    results = make_evaluator(reset, "ranking", concurrency=1).judge_all(items, ["p"] * 5, ["a reset answer"] * 5)
    assert all(r.extra["preference"] is not None for r in results)
    assert results[0].extra["judge_attempts"] == 3

    marker = items[1]["instruction"][:40]
    slow = items[2]["instruction"][:40]
    odd = items[3]["instruction"][:40]
    broken = judge_server("--fail-on", marker, "--slow-on", slow, "--delay", "3", "--garbage-on", odd)
    outputs = ["another answer"] * 5
    ev = make_evaluator(broken, "ranking", retries=1, timeout_s=0.5)
    results = ev.judge_all(items, ["p"] * 5, outputs)
    assert "HTTP 500" in results[1].extra["error"] and "after 2 attempts" in results[1].extra["error"]
    assert "no answer within 0.5 s" in results[2].extra["error"]
    assert "not JSON" in results[3].extra["error"] and results[3].extra["judge_raw"] == "Both are fine, really."
    failed = [r for r in results if r.extra["preference"] is None]
    assert [r.index for r in failed] == [1, 2, 3] and not any(r.correct for r in failed)
    metrics = ev.details(results)["winrate"]
    assert metrics["n_failed"] == 3 and metrics["n_total"] == 2  # the score is over the judged items, and says so
    assert [f["index"] for f in metrics["failed"]] == [1, 2, 3]

    no_logprobs = judge_server("--no-logprobs")
    outputs = ["a third answer"] * 5
    with pytest.raises(JudgeError, match="judge failed on all 5 items.*--judge-mode ranking"):
        make_evaluator(no_logprobs, "weighted").judge_all(items, ["p"] * 5, outputs)
    assert make_evaluator(no_logprobs, "ranking").judge_all(items, ["p"] * 5, outputs)[0].extra["error"] is None


def write_gamed_baselines(path: Path) -> None:
    """A df_gamed.csv of AlpacaEval's shape (two length-gamed baselines over the 805 items: index,
    instruction_difficulty, preference in [0, 1], std_delta_len, not_gamed_baseline=False), where
    the judge's preference follows length."""
    import random

    rng = random.Random(0)
    difficulty = [rng.gauss(0, 1) for _ in range(805)]
    lines = ["model,index,instruction_difficulty,preference,std_delta_len,not_gamed_baseline"]
    # std_delta_len = (len(output_1) - len(output_2)) / sd: negative where the model (output_2) is longer.
    for model, shift in (("gpt4_gamed_verbose", -1.5), ("gpt4_gamed_concise", 1.5)):
        for i in range(805):
            delta = shift + rng.gauss(0, 0.5)
            p = 1 / (1 + math.exp(-(-1.5 * math.tanh(delta) + 0.3 * difficulty[i])))
            lines.append(f"{model},{i},{difficulty[i]},{p},{delta},False")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_the_length_controlled_win_rate_discounts_winning_by_length(tmp_path: Path) -> None:
    gamed = tmp_path / "df_gamed.csv"
    write_gamed_baselines(gamed)
    hub = tmp_path / "hub"
    install_lc_file(gamed, hub)
    n = 40
    references = ["r" * 400] * n
    outputs = ["o" * (500 + 15 * i) for i in range(n)]  # always longer, and always preferred
    rows = winrate.annotation_rows([1.9] * n, outputs, references, list(range(n)), "model", "judge")
    with_lc = winrate.win_rates(rows, hub)
    assert with_lc["win_rate"] == pytest.approx(90.0)
    assert with_lc["length_controlled_winrate"] is not None and with_lc["length_controlled_winrate"] < 90.0
    without = winrate.win_rates(rows, None)
    assert without["length_controlled_winrate"] is None and without["win_rate"] == pytest.approx(90.0)


@pytest.fixture(scope="module")
def alpaca_run(alpaca_data: Path, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """A whole run of the example agent on 6 AlpacaEval items, judged by a judge that needs a key."""
    tmp = tmp_path_factory.mktemp("alpaca-run")
    server, port = local_server.start("judge_server.py", tmp, "--key", "sk-test-123")
    try:
        url = f"http://127.0.0.1:{port}/v1"
        env = {**os.environ, "MY_JUDGE_KEY": "sk-test-123"}
        proc = cli("run", "start", "--task", "alpacaeval", "--agent", "example", "--model", str(tiny_model),
                   "--budget", "10m", "--eval-limit", "6", "--judge-url", url, "--judge-model", "local-judge",
                   "--judge-key-env", "MY_JUDGE_KEY", "--env", "EXAMPLE_SFT_STEPS=5",
                   root=tmp / "runs", timeout=600, env=env)
        yield {"proc": proc, "url": url, "root": tmp / "runs", "env": env}
    finally:
        server.kill()
        server.wait()


def test_a_run_of_the_example_agent_is_graded_by_the_judge(alpaca_run: dict) -> None:
    proc = alpaca_run["proc"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = Path(re.search(r"run folder: (\S+)", proc.stdout).group(1))
    with RunStore.of_run(run) as store:
        baseline = store.baseline()
        subs = store.submissions(kind="agent")
        config = json.loads(store.run().config_json)
    assert baseline.status == "scored" and baseline.n_items == 6
    assert [s.status for s in subs] == ["scored"]  # SFT only: a judge-graded task has no exact reward
    settings = json.loads(subs[0].settings_json)
    assert settings["evaluator"] == "pairwise_judge" and settings["max_new_tokens"] == 512
    assert settings["judge"]["model"] == "local-judge" and settings["judge"]["key_env"] == "MY_JUDGE_KEY"
    assert settings["winrate"]["metric"] == "win_rate" and settings["winrate"]["n_failed"] == 0
    assert "sk-test-123" not in json.dumps(config) + json.dumps(settings)  # the key's value is never recorded
    assert (run / "workspace" / "description.md").read_text().startswith("# Task: alpacaeval")
    items = [json.loads(line) for line in (run / "evals" / "1" / "results.jsonl").open()]
    assert len(items) == 6
    for item in items:
        extra = item["extra"]
        assert extra["instruction"] and extra["model_shown_as"] in ("m", "M") and extra["judge_raw"]
        assert item["correct"] == (len(item["output"]) > len(item["gold"]))  # the judge prefers the longer
    assert items[0]["prompt"].startswith("<|im_start|>user\n" + items[0]["extra"]["instruction"])
    report = json.loads((run / "report" / "report.json").read_text())
    judged = report["submissions"][0]["judged"]
    assert judged["judge_model"] == "local-judge" and judged["metric"] == "win_rate" and judged["n_failed"] == 0
    assert judged["win_rate"] == pytest.approx(subs[0].score)
    assert "Scores are judged by `local-judge` (ranking mode)" in (run / "report" / "report.md").read_text()
    code = run / "workspace" / "code"
    assert "judge-graded" in (code / "NOTES.md").read_text() and not (code / "grpo.py").exists()


def test_a_judge_graded_run_needs_a_judge_that_answers(alpaca_run: dict, tiny_model: Path, tmp_path: Path) -> None:
    no_judge = cli("run", "start", "--task", "alpacaeval", "--agent", "example", "--model", str(tiny_model),
                   root=tmp_path)
    assert no_judge.returncode != 0 and "--judge-url URL --judge-model NAME" in no_judge.stderr
    assert "Traceback" not in no_judge.stderr

    def start(judge: dict, task: str = "alpacaeval", env: dict | None = None) -> str:
        with pytest.raises(RunError) as caught:
            create_run(RunRequest.of(task=task, agent="example", model=tiny_model, budget_s=60, root=tmp_path,
                                  judge=judge), env=env or dict(os.environ))
        return str(caught.value)

    assert "cannot reach" in start({"base_url": "http://127.0.0.1:9/v1", "model": "x"})
    judge = {"base_url": alpaca_run["url"], "model": "local-judge"}
    assert "HTTP 401" in start(judge)  # this judge needs its key
    assert "UNSET_JUDGE_KEY is not set" in start({**judge, "key_env": "UNSET_JUDGE_KEY"})
    wrong = start({**judge, "model": "other", "key_env": "MY_JUDGE_KEY"}, env=alpaca_run["env"])
    assert "HTTP 404" in wrong and "not found" in wrong
    assert "judge mode 'best'" in start({**judge, "mode": "best"})
    assert "not judge-graded" in start(judge, task="arith")
    assert not any(tmp_path.iterdir())  # nothing half-made is left


def rendered(renderable: object, width: int = 160) -> str:
    from rich.console import Console

    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(renderable)
    return console.export_text()


@pytest.mark.asyncio
async def test_the_items_screen_shows_each_judgement_side_by_side(alpaca_run: dict) -> None:
    from support.tui import open_items, plain, settle, table_rows
    from textual.widgets import Static

    from agent2rl_tui.ui.app import Agent2RLApp
    from agent2rl_tui.ui.widgets.virtual_table import VirtualTable

    run = Path(re.search(r"run folder: (\S+)", alpaca_run["proc"].stdout).group(1))
    mine = [json.loads(line) for line in (run / "evals" / "1" / "results.jsonl").open()]
    app = Agent2RLApp(root=alpaca_run["root"])
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await open_items(pilot, run.name, "1")
        assert screen.judged and not screen.episodes
        won = sum(i["correct"] for i in mine)
        assert f"submission 1: {won} of 6 judgements won" in plain(screen.query_one("#items-title", Static))
        table = screen.query_one("#items-table", VirtualTable)
        rows = table_rows(table)
        for row, item in zip(rows, mine, strict=True):
            index, mark, _prev, _base, p_model, shown, lengths, instruction = row
            assert mark == ("✓" if item["correct"] else "✗") and shown == item["extra"]["model_shown_as"]
            assert p_model == f"{item['extra']['preference'] - 1:.2f}"
            assert lengths == f"{len(item['output'])}/{len(item['gold'])}"
            assert instruction.startswith(item["extra"]["instruction"][:30].replace("\n", " "))
        table.move_to(2)
        await pilot.pause(0.1)
        text = rendered(screen.query_one("#item-text", Static).content)
        assert "item 2 · " in text and "the model's output (" in text and "the reference: gpt4_1106_preview" in text
        assert " ".join(mine[2]["gold"].split()[:3]) in " ".join(text.split())  # the reference's text, beside
        assert "ordered_models" in text  # the judge's raw answer
        await pilot.press("f")  # lost
        await settle(pilot, lambda: len(table_rows(table)) == sum(not i["correct"] for i in mine), what="lost")


@pytest.mark.asyncio
async def test_the_new_run_form_takes_the_judge(alpaca_data: Path, tiny_model: Path, tmp_path: Path,
                                                judge_server) -> None:
    from support.tui import open_new_run, plain, settle
    from textual.widgets import Input, Static

    from agent2rl_tui.ui.app import Agent2RLApp

    judge = judge_server("--key", "k-1")
    root = tmp_path / "runs"
    root.mkdir()
    app = Agent2RLApp(root=root)
    async with app.run_test(size=(160, 48)) as pilot:
        form = await open_new_run(pilot, "alpacaeval", tiny_model)
        error = form.query_one("#new-run-error", Static)
        await pilot.press("ctrl+s")
        await settle(pilot, lambda: "graded by a judge" in plain(error), timeout=30, what="the judge is missing")
        form.query_one("#judge-url", Input).value = judge.url
        form.query_one("#judge-model", Input).value = "local-judge"
        await pilot.press("ctrl+s")
        await settle(pilot, lambda: "HTTP 401" in plain(error), timeout=30, what="the judge refuses without its key")
        form.query_one("#judge-key-env", Input).value = "UNSET_JUDGE_KEY_2"
        await pilot.press("ctrl+s")
        await settle(pilot, lambda: "UNSET_JUDGE_KEY_2 is not set" in plain(error), timeout=30, what="the key")
    assert not any(root.iterdir())  # nothing half-made
