"""DeepSearchQA: the ReAct search loop against a real search server and a real judge server
(processes on 127.0.0.1), the BM25 corpus offline, strict verdicts, and the reference's
stop-string trap avoided.

DeepSearchQA's questions are on the hub only, so the data here is made for the test in its
shape (problem, answer, answer_type): 330 questions about invented projects whose code names
only the corpus knows, so an answer can only be right after a search.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import local_server
from support.runs import cli

from agent2rl_tui.envs import EnvSpec
from agent2rl_tui.envs.search import BM25Corpus, HTTPSearch, SearchQA, parse_action
from agent2rl_tui.grader.episode_runner import Pending, SearchReActFormat, play
from agent2rl_tui.grader.evaluators.episodes import judge_episodes, play_task
from agent2rl_tui.judge import Unparseable
from agent2rl_tui.judge.verdict import read_verdict
from agent2rl_tui.record.root import RunError
from agent2rl_tui.run.lifecycle import create_run
from agent2rl_tui.run.request import RunRequest
from agent2rl_tui.tasks.data import prepare
from agent2rl_tui.tasks.registry import load_task, task_cache

N_QUESTIONS = 330
WORDS = ["amber", "basalt", "cobalt", "dune", "ember", "fjord", "garnet", "heron", "indigo", "jade", "kestrel"]
REFERENCE_STOPS = ["\nAction:", "\nThought:", "\nObservation:"]


def code_name(i: int) -> str:
    return f"{WORDS[i % len(WORDS)]}-{i}"


def question(i: int) -> dict[str, str]:
    if i % 5 == 4:  # a Set Answer: two code names
        return {"problem": f"What are the code names of projects {i} and {i + 1000}?",
                "answer": f"{code_name(i)}, {code_name(i + 1000)}", "answer_type": "Set Answer"}
    return {"problem": f"What is the code name of project {i}?", "answer": code_name(i), "answer_type": "Single Answer"}


def write_questions(folder: Path) -> tuple[Path, Path]:
    """The invented questions as DeepSearchQA's CSV, and the corpus that answers them (JSONL)."""
    import csv as csv_module

    csv = folder / "deepsearchqa.csv"
    with csv.open("w", newline="", encoding="utf-8") as fh:
        writer = csv_module.DictWriter(fh, fieldnames=["problem", "answer", "answer_type", "problem_category"])
        writer.writeheader()
        for i in range(N_QUESTIONS):
            writer.writerow({**question(i), "problem_category": "invented"})
    corpus = folder / "corpus.jsonl"
    with corpus.open("w", encoding="utf-8") as fh:
        for i in list(range(N_QUESTIONS)) + list(range(1000, 1000 + N_QUESTIONS)):
            fh.write(json.dumps({"title": f"Project {i}", "text": f"Project {i} is code-named {code_name(i)}.",
                                 "url": f"https://example.org/{i}"}) + "\n")
    return csv, corpus


@pytest.fixture(scope="module")
def dsqa(prepared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("dsqa")
    csv, corpus = write_questions(folder)
    meta = prepare(load_task("deepsearchqa"), [csv])
    return {"csv": csv, "corpus": corpus, "meta": meta, "folder": folder}


@pytest.fixture
def servers(dsqa: dict, tmp_path: Path) -> Iterator[dict]:
    log = tmp_path / "queries.jsonl"
    log.touch()
    search, search_port = local_server.start("search_server.py", tmp_path, "--corpus", str(dsqa["corpus"]), "--log", str(log),
                                       "--key", "s-key")
    judge, judge_port = local_server.start("judge_server.py", tmp_path)
    yield {"search_url": f"http://127.0.0.1:{search_port}/search", "judge_url": f"http://127.0.0.1:{judge_port}/v1",
           "log": log, "queries": lambda: [json.loads(line)["q"] for line in log.read_text().splitlines()]}
    for proc in (search, judge):
        proc.kill()
        proc.wait()


def rows(split: str) -> list[dict]:
    with (task_cache(load_task("deepsearchqa")) / f"{split}.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def test_the_questions_are_split_as_the_reference_splits_them(dsqa: dict) -> None:
    import numpy as np

    train, evals = rows("train"), rows("eval")
    assert (len(train), len(evals)) == (100, 200) and dsqa["meta"]["total"] == N_QUESTIONS
    order = np.random.default_rng(42).permutation(N_QUESTIONS)  # datasets' shuffle(seed=42)
    assert [r["problem"] for r in train] == [question(int(i))["problem"] for i in order[:100]]
    assert [r["problem"] for r in evals] == [question(int(i))["problem"] for i in order[100:300]]
    assert evals[0]["game"] == "eval:0" and train[99]["game"] == "train:99"


def test_actions_are_read_from_the_whole_completion_and_the_stop_trap_is_avoided() -> None:
    completion = "Thought: I need project 7's code name.\nAction: search[project 7 code name]\nObservation: made up"
    fmt = SearchReActFormat()
    assert fmt.action_from(completion) == "search[project 7 code name]"
    assert fmt.next_turn("search[project 7 code name]", "Project 7 is code-named heron-7.", completion) == (
        " Thought: I need project 7's code name.\nAction: search[project 7 code name]\n"
        "Observation: Project 7 is code-named heron-7.\nThought:")
    # The reference stops at "\nAction:": what it would keep of the same reply holds no action.
    cut = completion.split(REFERENCE_STOPS[0])[0]
    assert parse_action(cut) is None
    stops = load_task("deepsearchqa").inference.stop
    assert "\nAction:" not in stops and "\nObservation:" in stops
    assert parse_action("Action: answer[amber-0, basalt-1]") == ("answer", "amber-0, basalt-1")
    assert parse_action("I think it is amber") is None


def test_verdicts_are_read_strictly() -> None:
    assert read_verdict("correct") and read_verdict("Correct.") and read_verdict("  CORRECT!\n")
    assert not read_verdict("incorrect") and not read_verdict("Incorrect.\nThe gold answer lists two names.")
    for hedge in ("correct, but incomplete", "The answer is correct", "", "partially correct", "yes"):
        with pytest.raises(Unparseable):
            read_verdict(hedge)


def scripted(answers: dict[str, str]):
    """A policy that searches for the project's code name, then answers from what it saw
    (or with ``answers[game]`` where given: a wrong answer on purpose)."""
    def policy(batch: list[Pending]) -> list[str]:
        out = []
        for p in batch:
            ep = p.episode
            if not ep.turns:
                out.append(f"Thought: I should search.\nAction: search[{ep.goal}]")
            else:
                seen = ep.turns[-1].observation
                found = [w.rstrip(".") for w in seen.split() if "-" in w and w.rstrip(".")[-1].isdigit()]
                wanted = [int(n) for n in ep.goal.replace("?", "").split() if n.isdigit()]
                names = [f for f in found if int(f.rsplit("-", 1)[1]) in wanted]
                guess = answers.get(ep.game, ", ".join(dict.fromkeys(names)))
                out.append(f"Thought: The results say it.\nAction: answer[{guess}]")
        return out
    return policy


def test_a_scripted_searcher_that_answers_right_wins_and_a_wrong_one_does_not(dsqa: dict, servers: dict) -> None:
    task = load_task("deepsearchqa")
    items = rows("eval")[:10]
    spec = EnvSpec.from_table(task.raw["env"], data_dir=task_cache(task),
                              search={"url": servers["search_url"], "key_env": "TEST_SEARCH_KEY"})
    os.environ["TEST_SEARCH_KEY"] = "s-key"
    try:
        wrong = {items[1]["game"]: "amber-999", items[4]["game"]: code_name(0)}
        episodes = play([it["game"] for it in items], spec.factory(), scripted(wrong),
                        fmt=SearchReActFormat(header="SYSTEM\n\n"), max_steps=6)
    finally:
        del os.environ["TEST_SEARCH_KEY"]
    # Every episode's search reached the backend, as the model wrote it.
    assert servers["queries"]() == [it["problem"] for it in items]
    assert episodes[0].prompt.startswith(f"SYSTEM\n\nQuestion: {items[0]['problem']}\nAnswer type: ")
    assert "\nObservation: Project " in episodes[0].prompt
    extras, summary = judge_episodes(task, episodes, items, {"base_url": servers["judge_url"], "model": "local-judge"})
    won = [ep.won for ep in episodes]
    assert won == [i not in (1, 4) for i in range(10)], [(e["answer"], e["gold_answer"]) for e in extras]
    assert [ep.end for ep in episodes][:2] == ["won", "wrong answer"]
    assert extras[0]["judge_raw"] == "correct" and extras[1]["judge_raw"] == "incorrect"
    assert extras[0]["searches"] == [items[0]["problem"]] and extras[1]["answer"] == "amber-999"
    assert summary["judge_calls"] == 10 and summary["n_answered"] == 10
    # What the Items screen shows of an episode: the answer, the gold one, the verdict.
    from agent2rl_tui.grader.evaluators.episodes import episode_result
    from agent2rl_tui.review.episodes_view import episode_rows

    item = episode_result(episodes[1])
    item.extra.update(extras[1])
    shown = {(r.label, r.text) for r in episode_rows(item)}
    assert {("answer", "amber-999"), ("gold", items[1]["answer"]), ("judge", "incorrect")} <= shown
    assert ("end", "lost: the judge called the answer wrong") in shown
    # Judged again: every verdict from the cache.
    _, again = judge_episodes(task, episodes, items, {"base_url": servers["judge_url"], "model": "local-judge"})
    assert again["judge_calls"] == 0


def test_a_set_answer_needs_every_item_and_a_hedged_verdict_is_not_correct(dsqa: dict, servers: dict,
                                                                        tmp_path: Path) -> None:
    task = load_task("deepsearchqa")
    set_items = [r for r in rows("eval") if r["answer_type"] == "Set Answer"][:2]
    spec = EnvSpec.from_table(task.raw["env"], data_dir=task_cache(task), search={"corpus": str(dsqa["corpus"])})
    first = set_items[0]["answer"].split(", ")[0]
    episodes = play([it["game"] for it in set_items], spec.factory(), scripted({set_items[0]["game"]: first}),
                    fmt=SearchReActFormat(), max_steps=6)
    _, _ = judge_episodes(task, episodes, set_items, {"base_url": servers["judge_url"], "model": "local-judge"})
    assert [ep.won for ep in episodes] == [False, True]  # one of two names: wrong; both: right
    hedging, port = local_server.start("judge_server.py", tmp_path, "--verdict-text", "correct, mostly", "--model", "hedger")
    try:
        extras, summary = judge_episodes(task, episodes, set_items,  # another judge model: not from the cache
                                         {"base_url": f"http://127.0.0.1:{port}/v1", "model": "hedger"})
    finally:
        hedging.kill()
    assert not any(ep.won for ep in episodes) and summary["n_judge_failed"] == 2
    assert "neither 'correct' nor 'incorrect'" in extras[1]["judge_error"]


def test_bm25_finds_the_document_that_answers() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.jsonl"
        path.write_text("\n".join(json.dumps(d) for d in [
            {"title": "Paris", "text": "Paris is the capital of France."},
            {"title": "Lyon", "text": "Lyon is a city in France known for food."},
            {"title": "Berlin", "text": "Berlin is the capital of Germany."}]))
        hits = BM25Corpus(path).search("capital of Germany", 2)
        assert [h.title for h in hits] == ["Berlin", "Paris"]
        env = SearchQA({"eval:0": {"problem": "Capital of Germany?", "answer": "Berlin"}}, BM25Corpus(path))
        start = env.reset("eval:0")
        assert start.observation == "Question: Capital of Germany?\nAnswer type: Single Answer"
        assert "Berlin is the capital" in env.step("search[capital of Germany]").observation
        assert "Invalid action" in env.step("look around").observation
        assert env.step("answer[Berlin]").done
    with pytest.raises(Exception, match="not set"):
        HTTPSearch("http://127.0.0.1:9/search", "UNSET_SEARCH_KEY_VAR")


def test_the_grader_plays_questions_with_the_model_and_the_run_needs_search_and_judge(
        dsqa: dict, servers: dict, tiny_model: Path, tmp_path: Path) -> None:
    from agent2rl_tui.grader.engines.hf import TransformersEngine

    task = load_task("deepsearchqa")
    engine = TransformersEngine()
    engine.load(tiny_model)
    items = rows("eval")[:3]
    results, summary = play_task(task, engine, items, task.settings_for(None),
                                 judge={"base_url": servers["judge_url"], "model": "local-judge"},
                                 search={"corpus": str(dsqa["corpus"])})
    assert summary["games"] == 3 and summary["score"] == 0.0  # an untrained tiny model writes no action
    assert all(r.extra["turns"] and r.extra["answer"] is None for r in results)
    assert all(r.extra["judge_error"] == "no answer" and r.gold == items[i]["answer"] for i, r in enumerate(results))
    assert results[0].extra["turns"][0]["observation"].startswith("Invalid action")
    assert summary["judge"]["model"] == "local-judge" and summary["judge_calls"] == 0

    def start(**kw: object) -> str:
        with pytest.raises(RunError) as caught:
            create_run(RunRequest.of(task="deepsearchqa", agent="example", model=tiny_model, budget_s=60,
                                  root=tmp_path / "runs", **kw), env=dict(os.environ))
        return str(caught.value)

    judge = {"base_url": servers["judge_url"], "model": "local-judge"}
    assert "--search-url URL" in start(judge=judge)
    assert "TEST_KEY_UNSET is not set" in start(judge=judge, search={"url": servers["search_url"],
                                                                     "key_env": "TEST_KEY_UNSET"})
    assert "HTTP Error 401" in start(judge=judge, search={"url": servers["search_url"]})  # the wrong key
    assert "--search-corpus" in start(judge=judge, search={"corpus": str(tmp_path / "missing.jsonl")})
    assert "graded by a judge" in start(search={"corpus": str(dsqa["corpus"])})
    proc = cli("run", "start", "--task", "arith", "--agent", "example", "--model", str(tiny_model),
               "--search-corpus", str(dsqa["corpus"]), root=tmp_path / "runs")
    assert proc.returncode != 0 and "does not search" in proc.stderr


def test_a_run_grades_its_baseline_through_the_grader_with_its_search_and_judge(
        dsqa: dict, servers: dict, tiny_model: Path, tmp_path: Path) -> None:
    import re

    from agent2rl_tui.record.store import RunStore

    proc = cli("run", "start", "--task", "deepsearchqa", "--agent", "command", "--command", "true",
               "--model", str(tiny_model), "--budget", "2m", "--eval-limit", "2", "--search-url", servers["search_url"],
               "--search-key-env", "TEST_SEARCH_KEY_2", "--judge-url", servers["judge_url"], "--judge-model",
               "local-judge", root=tmp_path / "runs", timeout=300, env={**os.environ, "TEST_SEARCH_KEY_2": "s-key"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = Path(re.search(r"run folder: (\S+)", proc.stdout).group(1))
    with RunStore.of_run(run) as store:
        baseline = store.baseline()
        config = json.loads(store.run().config_json)
    assert baseline.status == "scored" and baseline.n_items == 2, baseline.error
    settings = json.loads(baseline.settings_json)
    assert settings["episodes"]["judge"]["model"] == "local-judge" and settings["episodes"]["games"] == 2
    assert config["search"] == {"url": servers["search_url"], "key_env": "TEST_SEARCH_KEY_2"}
    assert "s-key" not in json.dumps(config) + baseline.settings_json
    items = [json.loads(line) for line in (run / "evals" / "0" / "results.jsonl").open()]
    assert [i["gold"] for i in items] == [r["answer"] for r in rows("eval")[:2]]


@pytest.mark.asyncio
async def test_the_new_run_form_takes_the_search_backend(dsqa: dict, servers: dict, tiny_model: Path,
                                                         tmp_path: Path) -> None:
    from support.tui import open_new_run, plain, settle
    from textual.widgets import Input, Static

    from agent2rl_tui.ui.app import Agent2RLApp
    from agent2rl_tui.ui.screens.new_run import search_options

    assert search_options("https://serpapi.com/search", "K") == {"url": "https://serpapi.com/search", "key_env": "K"}
    assert search_options("/data/corpus.jsonl", "") == {"corpus": "/data/corpus.jsonl"}
    root = tmp_path / "runs"
    root.mkdir()
    app = Agent2RLApp(root=root)
    async with app.run_test(size=(160, 48)) as pilot:
        form = await open_new_run(pilot, "deepsearchqa", tiny_model)
        form.query_one("#judge-url", Input).value = servers["judge_url"]
        form.query_one("#judge-model", Input).value = "local-judge"
        error = form.query_one("#new-run-error", Static)
        await pilot.press("ctrl+s")
        await settle(pilot, lambda: "--search-url URL" in plain(error), timeout=30, what="the missing search")
        form.query_one("#search", Input).value = str(tmp_path / "no-corpus.jsonl")
        await pilot.press("ctrl+s")
        await settle(pilot, lambda: "--search-corpus" in plain(error), timeout=30, what="the missing corpus")
    assert not any(root.iterdir())
