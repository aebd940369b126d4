"""The train-environment service as a real process: train games only, played as the grader plays
them, every call recorded, hostile input refused.

DeepSearchQA against the stand-in search server (with a key) and judge server, WebShop against
the stand-in store, TextWorldExpress against the workspace's own play kit. The episodes the
service plays are compared with the grader's own episode runner (``grader.episode_runner.play``) given
the same completions: the same prompts, turn by turn.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import local_server
from support.runs import make_prepared_run, scripted_env
from test_deepsearchqa import write_questions

from agent2rl_tui.envs import EnvSpec
from agent2rl_tui.envs.search import HTTPSearch, SearchQA
from agent2rl_tui.envs.webshop import RemoteWebShop, WebShop
from agent2rl_tui.grader.episode_runner import Pending, play
from agent2rl_tui.grader.evaluators.episodes import episode_format
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.tasks.data import prepare
from agent2rl_tui.tasks.registry import load_task, task_cache
from agent2rl_tui.trainenv import SECRET_ENV

SEARCH_KEY = "s-key-never-in-the-sandbox"


class Service:
    """``python -m agent2rl_tui.trainenv`` over a prepared run, on a free port."""

    def __init__(self, run_dir: Path, env: dict[str, str] | None = None) -> None:
        self.run_dir = run_dir
        self.proc = subprocess.Popen([sys.executable, "-m", "agent2rl_tui.trainenv", "--run-dir", str(run_dir),
                                      "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, SECRET_ENV: "the-runs-secret", **(env or {})})
        self.url = (self.proc.stdout.readline() if self.proc.stdout else "").strip()
        assert self.url.startswith("http://127.0.0.1:"), self.proc.stderr.read() if self.proc.stderr else ""
        self.http = httpx.Client(timeout=120)

    def call(self, method: str, path: str, body: Any = None, **kw: Any) -> tuple[int, dict[str, Any]]:
        resp = self.http.request(method, self.url + path, json=body, **kw)
        return resp.status_code, resp.json()

    def new_env(self) -> int:
        status, body = self.call("POST", "/envs")
        assert status == 201, body
        return body["env_id"]

    def rows(self) -> list[dict[str, Any]]:
        with RunStore.of_run(self.run_dir) as store:
            return store.env_calls()

    def close(self) -> str:
        self.http.close()
        self.proc.terminate()
        _, err = self.proc.communicate(timeout=30)
        return err


def with_limits(run_dir: Path, **limits: int) -> Path:
    with RunStore.of_run(run_dir) as store:
        cfg = json.loads(store.run().config_json)
        store.update_run(config_json=json.dumps({**cfg, "train_env": limits}))
    return run_dir


# -- DeepSearchQA ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dsqa(prepared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("trainenv-dsqa")
    csv, corpus = write_questions(folder)
    prepare(load_task("deepsearchqa"), [csv])
    queries = folder / "queries.jsonl"
    queries.touch()
    search, search_port = local_server.start("search_server.py", folder, "--corpus", str(corpus), "--log", str(queries),
                                             "--key", SEARCH_KEY)
    judge, judge_port = local_server.start("judge_server.py", folder)
    yield {"folder": folder, "search_url": f"http://127.0.0.1:{search_port}/search",
           "judge_url": f"http://127.0.0.1:{judge_port}/v1",
           "queries": lambda: [json.loads(line)["q"] for line in queries.read_text().splitlines()]}
    for proc in (search, judge):
        proc.kill()
        proc.wait()


def dsqa_run(dsqa: dict[str, Any], tiny_model: Path, root: Path, prompt_profile: str | None = None) -> Path:
    os.environ["TEST_TRAIN_SEARCH_KEY"] = SEARCH_KEY  # the pre-flight's one query needs it
    try:
        return make_prepared_run(root, tiny_model, task="deepsearchqa",
                                 search={"url": dsqa["search_url"], "key_env": "TEST_TRAIN_SEARCH_KEY"},
                                 judge={"base_url": dsqa["judge_url"], "model": "local-judge"},
                                 prompt_profile=prompt_profile)
    finally:
        del os.environ["TEST_TRAIN_SEARCH_KEY"]


def train_rows() -> list[dict[str, Any]]:
    return load_task("deepsearchqa").load_split("train")


def searcher(answers: dict[str, str]):
    """Searches for the question, then answers ``answers[game]`` (what the episode is scripted to say)."""
    def policy(batch: list[Pending]) -> list[str]:
        return [f"Thought: I should search.\nAction: search[{p.episode.goal}]\nObservation: invented" if not
                p.episode.turns else f"Thought: Found it.\nAction: answer[{answers[p.episode.game]}]"
                for p in batch]
    return policy


def test_a_searching_task_plays_its_train_questions_as_the_grader_plays_its_own(dsqa: dict[str, Any], tiny_model: Path,
                                                                               tmp_path: Path) -> None:
    run = dsqa_run(dsqa, tiny_model, tmp_path / "runs")
    service = Service(run, env={"TEST_TRAIN_SEARCH_KEY": SEARCH_KEY})
    try:
        status, games = service.call("GET", "/games")
        assert status == 200 and games["games"] == [r["game"] for r in train_rows()] and len(games["games"]) == 100
        assert games["reward_modes"] == ["exact", "f1", "judge"] and games["max_steps"] == 6
        rows = train_rows()[:3]
        right, wrong = rows[0], rows[1]
        answers = {right["game"]: right["answer"], wrong["game"]: "amber-999", rows[2]["game"]: rows[2]["answer"]}
        env = service.new_env()
        played = {}
        for row, reward in ((right, "exact"), (wrong, "f1"), (rows[2], "judge")):
            status, first = service.call("POST", f"/envs/{env}/reset", {"game": row["game"], "reward": reward})
            assert status == 200 and first["step"] == 0 and first["reward_mode"] == reward
            turns = [first]
            policy = searcher(answers)
            while not turns[-1].get("done"):
                completion = policy([Pending(_Episode(row["game"], row["problem"], len(turns) - 1), "", None)])[0]
                status, turn = service.call("POST", f"/envs/{env}/step", {"completion": completion})
                assert status == 200, turn
                turns.append(turn)
            played[row["game"]] = turns
        # The grader's runner, given the same completions, writes the same prompts.
        task = load_task("deepsearchqa")
        spec = EnvSpec.from_table(task.raw["env"], data_dir=task_cache(task))
        fmt = episode_format(spec, task.settings_for(None))
        backend = HTTPSearch(dsqa["search_url"], "K", env={"K": SEARCH_KEY})
        train = {r["game"]: r for r in train_rows()}
        episodes = play([r["game"] for r in rows], lambda: SearchQA(train, backend), searcher(answers), fmt=fmt,
                        max_steps=6)
        for ep in episodes:
            turns = played[ep.game]
            assert turns[0]["prompt"] == fmt.first_prompt(SearchQA(train, backend).reset(ep.game))
            assert turns[-1]["prompt"] == ep.prompt  # the whole transcript, as the grader writes it
            assert [t["action"] for t in turns[1:]] == [t.action for t in ep.turns]
        # Rewards by the mode chosen: exact match right, F1 on a wrong code name, the run's judge.
        assert (played[right["game"]][-1]["reward"], played[right["game"]][-1]["won"]) == (1.0, True)
        assert (played[wrong["game"]][-1]["reward"], played[wrong["game"]][-1]["won"]) == (0.0, False)
        assert played[rows[2]["game"]][-1]["reward"] == 1.0 and played[rows[2]["game"]][-1]["judge_calls"] == 1
        # The searches reached the run's backend with its key, which never reached the agent.
        assert dsqa["queries"]().count(right["problem"]) == 2  # once by the service, once by the grader's runner
    finally:
        err = service.close()
    calls = service.rows()
    steps = [c for c in calls if c["op"] == "step"]
    assert len(steps) == 6 and sum(c["searches"] for c in steps) == 3 and sum(c["judge_calls"] for c in steps) == 1
    assert [c["game"] for c in calls if c["op"] == "reset"] == [r["game"] for r in rows]
    blob = json.dumps(calls) + err + json.dumps(played)
    assert SEARCH_KEY not in blob


def test_under_the_reference_profile_a_step_without_an_action_is_asked_again_as_the_grader_asks(
        dsqa: dict[str, Any], tiny_model: Path, tmp_path: Path) -> None:
    """The reference's forced answer: the service answers a completion without an action with the
    same step's next prompt (ending "Action: answer[") and its decoding; the next completion is
    the answer. The grader's runner, given the same completions, writes the same transcript."""
    run = dsqa_run(dsqa, tiny_model, tmp_path / "runs", prompt_profile="reference")
    row = train_rows()[0]
    completions = ["I should search for it.", f"{row['answer']}"]
    service = Service(run, env={"TEST_TRAIN_SEARCH_KEY": SEARCH_KEY})
    try:
        env = service.new_env()
        status, first = service.call("POST", f"/envs/{env}/reset", {"game": row["game"], "reward": "exact"})
        assert status == 200
        status, asked = service.call("POST", f"/envs/{env}/step", {"completion": completions[0]})
        assert status == 200 and not asked["done"] and asked["step"] == 0 and asked["action"] is None
        assert asked["follow_up"] == {"temperature": 0.0, "max_new_tokens": 128, "stop": ["]"]}
        assert asked["prompt"] == first["prompt"] + f" {completions[0]}\nAction: answer["
        status, answered = service.call("POST", f"/envs/{env}/step", {"completion": completions[1]})
        assert status == 200 and answered["done"] and answered["action"] == f"answer[{row['answer']}]"
        assert (answered["reward"], answered["won"], answered["step"]) == (1.0, True, 1)
    finally:
        service.close()
    task = load_task("deepsearchqa")
    fmt = episode_format(EnvSpec.from_table(task.raw["env"]), task.settings_for("reference"))
    backend = HTTPSearch(dsqa["search_url"], "K", env={"K": SEARCH_KEY})
    [ep] = play([row["game"]], lambda: SearchQA({r["game"]: r for r in train_rows()}, backend),
                lambda batch: [completions[1] if p.decoding else completions[0] for p in batch], fmt=fmt, max_steps=6)
    assert ep.prompt == answered["prompt"] and fmt.answer_of(ep) == row["answer"]


class _Episode:
    """Enough of an episode for the ``searcher`` policy."""

    def __init__(self, game: str, goal: str, steps: int) -> None:
        self.game, self.goal, self.turns = game, goal, [None] * steps


def test_f1_credits_part_of_a_set_answer_and_budgets_are_kept(dsqa: dict[str, Any], tiny_model: Path,
                                                            tmp_path: Path) -> None:
    run = with_limits(dsqa_run(dsqa, tiny_model, tmp_path / "runs"), searches_per_minute=2, judge_calls=1, max_envs=2)
    service = Service(run, env={"TEST_TRAIN_SEARCH_KEY": SEARCH_KEY})
    try:
        sets = [r for r in train_rows() if r["answer_type"] == "Set Answer"]
        half = sets[0]["answer"].split(", ")[0]
        env = service.new_env()
        assert service.call("POST", f"/envs/{env}/reset", {"game": sets[0]["game"], "reward": "f1"})[0] == 200
        status, turn = service.call("POST", f"/envs/{env}/step", {"action": f"answer[{half}]"})
        assert status == 200 and 0.0 < turn["reward"] < 1.0 and not turn["won"] and turn["done"]
        assert service.call("POST", f"/envs/{env}/reset", {"game": sets[0]["game"], "reward": "exact"})[0] == 200
        status, turn = service.call("POST", f"/envs/{env}/step", {"action": f"answer[{sets[0]['answer']}]"})
        assert (turn["reward"], turn["won"]) == (1.0, True)
        # Two searches a minute: the third is refused and the episode does not move.
        service.call("POST", f"/envs/{env}/reset", {"game": sets[1]["game"], "reward": "judge"})
        for _ in range(2):
            assert service.call("POST", f"/envs/{env}/step", {"action": "search[code names]"})[0] == 200
        status, refused = service.call("POST", f"/envs/{env}/step", {"action": "search[more]"})
        assert (status, refused["error"]) == (429, "search_rate_limited")
        status, turn = service.call("POST", f"/envs/{env}/step", {"action": "answer[x]"})
        assert status == 200 and turn["step"] == 3 and turn["judge_calls"] == 1  # the refused search was no step
        service.call("POST", f"/envs/{env}/reset", {"game": sets[1]["game"], "reward": "judge"})
        status, spent = service.call("POST", f"/envs/{env}/step", {"action": "answer[x]"})
        assert (status, spent["error"]) == (429, "judge_calls_spent")
        assert service.new_env() and service.call("POST", "/envs")[1]["error"] == "too_many_envs"
    finally:
        service.close()


def test_the_service_refuses_what_is_not_a_train_game_and_hostile_bodies(dsqa: dict[str, Any], tiny_model: Path,
                                                                        tmp_path: Path) -> None:
    run = dsqa_run(dsqa, tiny_model, tmp_path / "runs")
    service = Service(run, env={"TEST_TRAIN_SEARCH_KEY": SEARCH_KEY})
    try:
        env = service.new_env()
        eval_game = load_task("deepsearchqa").load_split("eval")[0]["game"]
        cases = [
            ("POST", f"/envs/{env}/reset", {"game": eval_game}, 403, "not_a_train_game"),
            ("POST", f"/envs/{env}/reset", {"game": "test:20000"}, 403, "not_a_train_game"),
            ("POST", f"/envs/{env}/reset", {"game": "train:0", "reward": "psychic"}, 400, "invalid_reward"),
            ("POST", f"/envs/{env}/reset", {"game": ["train:0"]}, 400, "invalid_game"),
            ("POST", f"/envs/{env}/reset", {}, 400, "no_game"),
            ("POST", f"/envs/{env}/step", {"action": "search[x]"}, 409, "no_episode"),
            ("POST", "/envs/424242/reset", {"game": "train:0"}, 404, "no_such_env"),
            ("POST", "/envs/99999999999999999999/step", {"action": "x"}, 404, "no_such_env"),
            ("POST", "/envs/\u00b2/step", {"action": "x"}, 404, "no_such_env"),  # isdigit(), and int() raises
            ("POST", "/envs/\u0661/reset", {"game": "train:0"}, 404, "no_such_env"),  # isdigit(), and int() reads 1
            ("POST", f"/envs/{env}/reset", {"game": "train:\u00b9"}, 403, "not_a_train_game"),
            ("POST", f"/envs/{env}/step", {"completion": "x" * 20_000}, 413, "too_long"),
            ("POST", f"/envs/{env}/step", {"completion": "a", "action": "b"}, 400, "invalid_step"),
            ("DELETE", "/envs", None, 405, "method_not_allowed"),
            ("GET", "/../games", None, 404, "not_found"),
        ]
        for method, path, body, status, code in cases:
            got, answer = service.call(method, path, body)
            assert (got, answer["error"]) == (status, code), (path, body and str(body)[:60], answer)
        nested = b'{"game": ' + b"[" * 30_000 + b"]" * 30_000 + b"}"  # deep, and under the size limit
        resp = service.http.post(f"{service.url}/envs/{env}/reset", content=nested)
        assert (resp.status_code, resp.json()["error"]) == (400, "invalid_json")
        resp = service.http.post(f"{service.url}/envs/{env}/reset", content=b'{"game": "' + b"x" * (1 << 20) + b'"}')
        assert (resp.status_code, resp.json()["error"]) == (413, "too_large")
        outside = service.url.rsplit("/", 1)[0] + "/guessing/games"  # without the run's secret
        assert service.http.get(outside).status_code == 404
        # The service still plays after all that.
        train0 = train_rows()[0]["game"]
        assert service.call("POST", f"/envs/{env}/reset", {"game": train0})[0] == 200
        assert service.call("DELETE", f"/envs/{env}")[0] == 200
        assert service.call("POST", f"/envs/{env}/step", {"action": "x"})[1]["error"] == "no_such_env"
    finally:
        err = service.close()
    assert "Traceback" not in err, err[-3000:]
    rows = service.rows()
    refused = [r for r in rows if r["status"] >= 400]
    assert len(refused) == len(cases) + 4 and all(r["error"] for r in refused)  # nested, too large, no secret, closed
    assert {r["game"] for r in rows if r["error"] and r["error"].startswith("not_a_train_game")} == {eval_game, "test:20000",
                                                                                                 "train:\u00b9"}


def test_another_user_cannot_play_a_runs_train_environments(dsqa: dict[str, Any], tiny_model: Path,
                                                            tmp_path: Path) -> None:
    if os.getuid() != 0 or shutil.which("setpriv") is None or shutil.which("curl") is None:
        pytest.skip("needs root and setpriv to act as another user (nobody): run the suite as root to test this")
    service = Service(dsqa_run(dsqa, tiny_model, tmp_path / "runs"), env={"TEST_TRAIN_SEARCH_KEY": SEARCH_KEY})
    try:
        out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "curl", "-s", "-w",
                              "\n%{http_code}", "-X", "POST", service.url + "/envs"], capture_output=True, text=True,
                             timeout=60)
        body, status = out.stdout.rsplit("\n", 1)
        assert status == "403" and json.loads(body)["error"] == "not_your_run", out
    finally:
        service.close()
    assert [r["op"] for r in service.rows()] == ["refused"]


# -- WebShop --------------------------------------------------------------------------------------

def shopper(plans: dict[str, tuple[str, str, list[str]]]):
    def policy(batch: list[Pending]) -> list[str]:
        out = []
        for p in batch:
            query, asin, options = plans[p.episode.game]
            script = [f"search[{query}]", f"click[{asin}]", *[f"click[{o}]" for o in options], "click[buy now]"]
            out.append(script[len(p.episode.turns)] + "\nand more text the action rule cuts")
        return out
    return policy


def test_a_shopping_task_plays_train_sessions_with_the_base_models_chat_template(prepared_data: Path, tiny_model: Path,
                                                                                tmp_path: Path) -> None:
    store, port = local_server.start("webshop_server.py", tmp_path)
    url = f"http://127.0.0.1:{port}"
    try:
        task = load_task("webshop")
        prepare(task)
        run = make_prepared_run(tmp_path / "runs", tiny_model, task="webshop", webshop={"url": url})
        service = Service(run)
        plans = {"session:100": ("red cotton t-shirt", "b001", ["red", "large"]),  # session 100: the store's goal 0
                 "session:101": ("wallet", "b005", ["black"])}                    # goal 1, bought wrong: 2/5
        try:
            assert service.call("POST", "/envs/1/reset", {"game": "session:100"})[1]["error"] == "no_such_env"
            env = service.new_env()
            assert service.call("POST", f"/envs/{env}/reset", {"game": "session:5"})[0] == 403  # an eval session
            played = {}
            for game in plans:
                status, turn = service.call("POST", f"/envs/{env}/reset", {"game": game})
                turns = [turn]
                while not turns[-1].get("done"):
                    ep = _Episode(game, "", len(turns) - 1)
                    completion = shopper(plans)([Pending(ep, "", None)])[0]
                    status, turn = service.call("POST", f"/envs/{env}/step", {"completion": completion})
                    assert status == 200, turn
                    turns.append(turn)
                played[game] = turns
        finally:
            service.close()
        # The grader's runner with the base model's chat template: the same prompts, the same rewards.
        from agent2rl_tui.trainenv.core import TemplateRenderer

        spec = EnvSpec.from_table(task.raw["env"], store={"url": url})
        fmt = episode_format(spec, task.settings_for(None), TemplateRenderer(tiny_model))  # type: ignore[arg-type]
        episodes = play(list(plans), lambda: WebShop(RemoteWebShop(url)), shopper(plans), fmt=fmt, max_steps=50)
        for ep in episodes:
            turns = played[ep.game]
            start = WebShop(RemoteWebShop(url)).reset(ep.game)
            assert turns[0]["prompt"] == fmt.first_prompt(start)  # the system and user turns, templated
            assert turns[0]["prompt"].startswith("<|im_start|>system\n")
            assert [t["action"] for t in turns[1:]] == [t.action for t in ep.turns]
            assert turns[-1]["prompt"] == ep.prompt and turns[-1]["score"] == ep.score  # the last five turns in it
        assert played["session:100"][-1]["won"] and played["session:100"][-1]["reward"] == 1.0
        assert not played["session:101"][-1]["won"] and played["session:101"][-1]["reward"] == pytest.approx(0.4)
    finally:
        store.kill()
        store.wait()


# -- TextWorldExpress: the service and the workspace's own kit agree -------------------------------

def test_a_game_task_gives_the_same_episode_as_the_workspaces_play_kit(prepared_data: Path, tiny_model: Path,
                                                                       tmp_path: Path) -> None:
    run = make_prepared_run(tmp_path / "runs", tiny_model, task="twc")
    data = run / "workspace" / "data"
    sys.path.insert(0, str(data))
    try:
        import play as kit  # the workspace's data/play.py, in process
    finally:
        sys.path.remove(str(data))
    service = Service(run)
    try:
        env = service.new_env()
        for game in ("train:3", "train:57"):
            local = kit.make_env()
            prompt, _goal = kit.reset(local, game)
            status, first = service.call("POST", f"/envs/{env}/reset", {"game": game})
            assert status == 200 and first["prompt"] == prompt
            gold = local.getGoldActionSequence()
            for action in gold:
                obs, reward, won, over, score = kit.step(local, action)
                prompt += kit.next_turn(action, obs)
                status, turn = service.call("POST", f"/envs/{env}/step", {"completion": f" {action}\nmore"})
                assert status == 200 and turn["action"] == action and turn["reward"] == reward
                if over:
                    break
                assert turn["prompt"] == prompt
            assert turn["won"] and turn["done"] and turn["end"] == "won"
        assert service.call("POST", f"/envs/{env}/reset", {"game": "test:20001"})[1]["error"] == "not_a_train_game"
    finally:
        service.close()
        sys.modules.pop("play", None)


# -- through `run start`: the agent's own route ------------------------------------------------------

EXAMPLE_ENV = {"EXAMPLE_SFT_STEPS": "4", "EXAMPLE_GRPO_STEPS": "1", "EXAMPLE_GAMES": "4", "EXAMPLE_GENERATIONS": "2"}


def example_run(tmp_path: Path, tiny_model: Path, task: str, *extra: str, env: dict[str, str] | None = None) -> Path:
    """The example agent's whole run on ``task``, its training through the service; graded by the scripted
    eval worker, since what is tested is the agent's route (the grading of these tasks is test_deepsearchqa's
    and test_webshop's)."""
    import re

    from support.runs import cli

    args = ["run", "start", "--task", task, "--agent", "example", "--model", str(tiny_model), "--budget", "15m",
            "--grace", "5s", "--eval-limit", "2", *extra]
    for key, value in EXAMPLE_ENV.items():
        args += ["--env", f"{key}={value}"]
    proc = cli(*args, root=tmp_path / "runs", timeout=1200, env=scripted_env({**os.environ, **(env or {})}))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return Path(re.search(r"run folder: (\S+)", proc.stdout).group(1))


def check_route(run: Path) -> tuple[str, list[dict[str, Any]]]:
    log = (run / "logs" / "agent.log").read_text()
    with RunStore.of_run(run) as store:
        subs = store.submissions(kind="agent")
        calls = store.env_calls()
        events = {e["kind"] for e in store.events()}
    assert [(s.model_path.rsplit("/", 1)[-1], s.status) for s in subs] == [("v1", "scored"), ("v2", "scored")], log[-3000:]
    assert "train_envs" in events and "GRPO step 1/1" in log
    assert not (run / "workspace" / "code" / "NOTES.md").read_text().count("failed")
    return log, calls


@pytest.mark.slow
def test_the_example_agent_trains_online_on_a_searching_task_through_the_service(dsqa: dict[str, Any], tiny_model: Path,
                                                                                 tmp_path: Path) -> None:
    run = example_run(tmp_path, tiny_model, "deepsearchqa", "--search-url", dsqa["search_url"], "--search-key-env",
                      "TEST_TRAIN_SEARCH_KEY", "--judge-url", dsqa["judge_url"], "--judge-model", "local-judge",
                      env={"TEST_TRAIN_SEARCH_KEY": SEARCH_KEY})
    log, calls = check_route(run)
    assert "demonstrations: 4 games played through the service, 4 rewarded above 0.0" in log
    resets = [c for c in calls if c["op"] == "reset" and c["status"] == 200]
    assert len(resets) == 4 + 2 * 2 and all(c["game"].startswith("train:") for c in resets)  # SFT's 4, GRPO's 2x2
    assert sum(c["searches"] for c in calls) >= 4
    env_text = (run / "workspace" / "output").rglob("*")
    assert SEARCH_KEY not in json.dumps(calls) and not any(SEARCH_KEY in p.read_text(errors="replace")
                                                         for p in env_text if p.is_file() and p.suffix == ".json")


@pytest.mark.slow
def test_the_example_agent_trains_online_on_a_shopping_task_through_the_service(prepared_data: Path, tiny_model: Path,
                                                                               tmp_path: Path) -> None:
    store, port = local_server.start("webshop_server.py", tmp_path)
    try:
        prepare(load_task("webshop"))
        run = example_run(tmp_path, tiny_model, "webshop", "--webshop-url", f"http://127.0.0.1:{port}")
    finally:
        store.kill()
        store.wait()
    log, calls = check_route(run)
    assert "demonstrations: 4 games played through the service" in log
    assert all(c["game"].startswith("session:") and int(c["game"].split(":")[1]) >= 100
               for c in calls if c["op"] == "reset")  # the train sessions only


AGENT = """
import json, os, pathlib, time, urllib.request
url = os.environ["TRAIN_ENV_URL"]
def get(path, body=None):
    req = urllib.request.Request(url + path, data=None if body is None else json.dumps(body).encode(),
                                 method="GET" if body is None else "POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())
print("games", len(get("/games")["games"]), flush=True)
while not pathlib.Path("go").exists():
    time.sleep(0.1)
env = get("/envs", {})["env_id"]
print("reset", get(f"/envs/{env}/reset", {"game": "train:0"})["step"], flush=True)
"""


def test_a_service_that_dies_is_started_again_on_the_same_url_and_ends_with_the_agent(dsqa: dict[str, Any],
                                                                                      tiny_model: Path,
                                                                                      tmp_path: Path) -> None:
    import re
    import signal

    from support.runs import cli, processes_with, wait_for

    from agent2rl_tui.review.index import summarize

    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    proc = cli("run", "start", "--task", "deepsearchqa", "--agent", "command", "--command", f"{sys.executable} {script}",
               "--read-only-path", str(script), "--model", str(tiny_model), "--budget", "5m", "--grace", "5s",
               "--eval-limit", "1", "--search-url", dsqa["search_url"], "--search-key-env", "TEST_TRAIN_SEARCH_KEY",
               "--judge-url", dsqa["judge_url"], "--judge-model", "local-judge", "--detach", root=tmp_path / "runs",
               timeout=300, env=scripted_env({**os.environ, "TEST_TRAIN_SEARCH_KEY": SEARCH_KEY}))  # the service is tested
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = Path(re.search(r"run folder: (\S+)", proc.stdout).group(1))
    log = run / "logs" / "agent.log"
    wait_for(lambda: log.exists() and "games 100" in log.read_text(), timeout=240, what="the agent's first call")
    with RunStore.of_run(run) as store:
        pid = store.last_event_data("train_envs")["pid"]
    os.kill(pid, signal.SIGKILL)
    with RunStore.of_run(run) as store:
        died = wait_for(lambda: store.last_event_data("train_envs_died"), timeout=300, what="the supervisor to see it")
    assert died == {"exit_code": -9, "restarts": 1}
    (run / "workspace" / "go").touch()
    wait_for(lambda: summarize(run).status == "finished", timeout=240, what="the run to end")
    assert "reset 0" in log.read_text()  # the same URL answered after the restart
    with RunStore.of_run(run) as store:
        ops = [(c["op"], c["status"]) for c in store.env_calls()]
    assert ops == [("games", 200), ("create", 201), ("reset", 200)]
    assert processes_with(f"agent2rl_tui.trainenv --run-dir {run}") == []  # it ended with the agent's phase


def test_a_flood_of_refused_calls_is_recorded_one_in_a_hundred_past_ten_thousand(tmp_path: Path) -> None:
    from agent2rl_tui.trainenv.core import REFUSALS_RECORDED, Recorder

    db = tmp_path / "run.db"
    RunStore(db, create=True).close()
    recorder = Recorder(db)
    for n in range(REFUSALS_RECORDED + 250):
        recorder.add({"at": float(n), "op": "refused", "status": 404, "error": "not_found"})
    recorder.add({"at": 0.0, "op": "games", "status": 200})  # the agent's real calls are always kept
    recorder.flush()
    recorder.close()
    with RunStore(db) as store:
        totals = store.env_totals()
        ops = [c["op"] for c in store.env_calls(offset=REFUSALS_RECORDED - 1)]
    assert totals.refused == REFUSALS_RECORDED + 2 and totals.calls == REFUSALS_RECORDED + 3
    assert ops == ["refused", "refused", "refused", "games"]  # the 10,000th, the 10,100th, the 10,200th
