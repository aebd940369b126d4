"""WebShop: the adapter against a small store served by a real process (tests/support/webshop_server.py,
AgentGym's environment-server protocol), the reference's prompt, and the rewards recorded.

WebShop itself (its 1,000-product catalogue, not on PyPI) is not installed here; the store
process has five products and four goals with known attributes, and WebShop's reward shape.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support import local_server

from agent2rl_tui.envs import EnvSpec
from agent2rl_tui.envs.webshop import RemoteWebShop, WebShop, clean_action
from agent2rl_tui.grader.episode_runner import WEBSHOP_SYSTEM, Pending, WebShopFormat, play
from agent2rl_tui.grader.evaluators.episodes import play_task, shopping_summary
from agent2rl_tui.record.root import RunError
from agent2rl_tui.run.lifecycle import create_run
from agent2rl_tui.run.request import RunRequest
from agent2rl_tui.tasks.data import prepare
from agent2rl_tui.tasks.registry import TaskError, load_task


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc, port = local_server.start("webshop_server.py", tmp_path_factory.mktemp("webshop"))
    yield f"http://127.0.0.1:{port}"
    proc.kill()
    proc.wait()


# The shopper's plan per session: what it searches, which product it opens, which options it clicks.
RIGHT = {0: ("red cotton t-shirt", "b001", ["red", "large"]), 1: ("leather wallet", "b003", ["brown"]),
         2: ("mesh running shoes", "b004", ["10"]), 3: ("polyester t-shirt", "b002", ["black", "large"])}
WRONG = {0: ("t-shirt", "b002", ["red", "large"]),   # polyester: type, options, price right, no attribute: 3/5
         1: ("wallet", "b005", ["black"])}            # slim and cheap only: 2/5


def shopper(plans: dict[int, tuple[str, str, list[str]]]):
    def policy(batch: list[Pending]) -> list[str]:
        out = []
        for p in batch:
            query, asin, options = plans[int(p.episode.game.split(":")[1])]
            script = [f"search[{query}]", f"click[{asin}]", *[f"click[{o}]" for o in options], "click[buy now]"]
            out.append(script[len(p.episode.turns)])
        return out
    return policy


def test_a_shopper_that_buys_the_right_item_wins_and_a_wrong_one_gets_partial_reward(store_url: str) -> None:
    spec = EnvSpec.from_table(load_task("webshop").raw["env"], store={"url": store_url})
    plans = {**RIGHT, **WRONG}
    games = [f"session:{i}" for i in range(4)]
    episodes = play(games, spec.factory(), shopper(plans), fmt=WebShopFormat(), max_steps=50, pool_size=4)
    right = play(games[2:], spec.factory(), shopper(RIGHT), fmt=WebShopFormat(), max_steps=50)
    assert [ep.score for ep in right] == [1.0, 1.0] and all(ep.won and ep.end == "won" for ep in right)
    shirt, wallet = episodes[0], episodes[1]
    assert shirt.score == pytest.approx(0.6) and shirt.won  # a success at 0.5, not at 1.0
    assert wallet.score == pytest.approx(0.4) and not wallet.won and wallet.end == "done"
    assert [t.action for t in shirt.turns] == ["search[t-shirt]", "click[b002]", "click[red]", "click[large]",
                                              "click[buy now]"]
    summary = shopping_summary(episodes)
    assert summary["success_rate_at_0.5"] == 75.0 and summary["success_rate_at_1.0"] == 50.0
    assert summary["mean_reward"] == pytest.approx((0.6 + 0.4 + 1.0 + 1.0) / 4)


def test_the_prompt_is_the_references_with_the_last_five_turns(store_url: str) -> None:
    env = WebShop(RemoteWebShop(store_url))
    start = env.reset("session:0")
    assert start.goal.startswith("i need a red cotton") and start.admissible == ["search[<your query>]", "click[search]"]
    fmt = WebShopFormat()
    first = fmt.first_prompt(start)
    assert first.startswith(WEBSHOP_SYSTEM + "\n\nYou are shopping on an e-commerce website.")
    assert "\nAvailable actions:\n  search[<your query>]\n  click[search]\n\nRules:\n" in first
    assert first.endswith(f"Now it's your turn:\n\nObservation 1: {start.observation}\nAction 1:")
    episodes = play(["session:0"], lambda: WebShop(RemoteWebShop(store_url)),
                    shopper({0: ("cotton t-shirt", "b001", ["red", "small", "blue", "large", "red", "large"])}),
                    fmt=fmt, max_steps=50)
    ep = episodes[0]
    assert ep.steps == 9 and ep.score == 1.0
    last_prompt_user = fmt.user_text(ep.goal, ep.turns[:8], ep.turns[7].observation, None)
    # Turns 4-8 shown (the last five), numbered as in the episode; the reference's pairing kept.
    assert "Observation 3:" not in last_prompt_user and f"Observation 4: {ep.turns[3].observation}\n" in last_prompt_user
    assert "Action 8: click[large]\n" in last_prompt_user and last_prompt_user.endswith("Action 9:")
    assert clean_action("Action: choose[Buy Now]") == "click[Buy Now]"
    env.close()


def test_the_history_shows_the_action_as_cleaned_and_played(store_url: str) -> None:
    """The reference cleans the model's action ("Action:" dropped, choose[ read as click[) before it
    plays it and before its history window shows it: so do we."""
    def sloppy(batch: list[Pending]) -> list[str]:
        script = ["Action: search[red cotton t-shirt]\nObservation: made up", "choose[b001]", "click[red]"]
        return [script[len(p.episode.turns)] for p in batch]

    fmt = WebShopFormat()
    [ep] = play(["session:0"], lambda: WebShop(RemoteWebShop(store_url)), sloppy, fmt=fmt, max_steps=3)
    assert [t.action for t in ep.turns] == ["search[red cotton t-shirt]", "click[b001]", "click[red]"]
    shown = fmt.user_text(ep.goal, ep.turns, ep.turns[-1].observation, None)
    assert "Action 1: search[red cotton t-shirt]\n" in shown and "Action 2: click[b001]\n" in shown
    assert "Action:" not in shown.split("Now it's your turn:")[1].replace("Action 1:", "").replace(
        "Action 2:", "").replace("Action 3:", "").replace("Action 4:", "")
    assert ep.turns[0].completion.startswith("Action: search[")  # the raw completion is kept


def test_the_grader_shops_with_the_model_and_records_both_success_rates(store_url: str, tiny_model: Path,
                                                                       prepared_data: Path, tmp_path: Path) -> None:
    from agent2rl_tui.grader.engines.hf import TransformersEngine

    task = load_task("webshop")
    with pytest.raises(TaskError, match="web_agent_site"):
        prepare(task, [tmp_path])
    meta = prepare(task)  # the sessions only: the store comes from --webshop-url
    assert (meta["eval"], meta["train"]) == (100, 1000) and meta["webshop_dir"] is None
    engine = TransformersEngine()
    engine.load(tiny_model)
    items = task.load_split("eval")[:2]
    settings = task.settings_for(None)
    results, summary = play_task(task, engine, items, settings, store={"url": store_url})
    assert summary["games"] == 2 and {"mean_reward", "success_rate_at_0.5", "success_rate_at_1.0"} <= set(summary)
    assert results[0].extra["turns"] and results[0].prompt.startswith("<|im_start|>system\n" + WEBSHOP_SYSTEM)
    assert results[0].extra["turns"][0]["observation"]  # the store answered the model's first action

    def start(**kw: object) -> str:
        with pytest.raises(RunError) as caught:
            create_run(RunRequest.of(task="webshop", agent="example", model=tiny_model, budget_s=60,
                                  root=tmp_path / "runs", **kw))
        return str(caught.value)

    assert "--webshop-url URL" in start()
    assert "--webshop-url: WebShop server http://127.0.0.1:9/create" in start(webshop={"url": "http://127.0.0.1:9"})


def test_a_run_grades_its_baseline_in_the_store_it_names(store_url: str, tiny_model: Path, prepared_data: Path,
                                                         tmp_path: Path) -> None:
    import json
    import re

    from support.runs import cli

    from agent2rl_tui.record.store import RunStore

    prepare(load_task("webshop"))
    proc = cli("run", "start", "--task", "webshop", "--agent", "command", "--command", "true", "--model",
               str(tiny_model), "--budget", "2m", "--eval-limit", "2", "--webshop-url", store_url,
               root=tmp_path / "runs", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = Path(re.search(r"run folder: (\S+)", proc.stdout).group(1))
    with RunStore.of_run(run) as store:
        baseline = store.baseline()
    assert baseline.status == "scored" and baseline.n_items == 2, baseline.error
    from agent2rl_tui.record.progress import read_progress  # each episode counted as it ended (issue 43, 2)

    progress = read_progress(run, 0)
    assert progress is not None and progress.phase == "play" and progress.done == progress.total == 2
    played = json.loads(baseline.settings_json)["episodes"]
    assert played["games"] == 2 and "success_rate_at_1.0" in played and "mean_reward" in played
    kit = (run / "workspace" / "data" / "play.py").read_text()  # a client of the run's train-environment service
    assert (run / "workspace" / "data" / "env.json").exists() and "TRAIN_ENV_URL" in kit
    assert "TRAIN_ENV_URL" in (run / "workspace" / "instructions.md").read_text()


def reference_prompt(instruction: str, history: list[tuple[str, str]], observation: str, available: str) -> str:
    """AutoRL-Bench's ``build_react_prompt`` (benchmarks/webshop/eval.py), its template copied here
    word for word: the test checks our prompt against the reference's construction, not ours."""
    prompt = ("You are shopping on an e-commerce website. Find and purchase a product matching the user's "
              f"instruction.\n\nInstruction: {instruction}\n\nAvailable actions:\n{available}\n\nRules:\n"
              "- Output ONLY one action from the available actions list above.\n"
              "- For search, use: search[your query]\n- For clicking, use: click[exact text from the list]\n"
              "- Do NOT output anything other than the action.\n\nNow it's your turn:\n")
    recent = history[-5:]
    offset = len(history) - len(recent)
    for i, (action, obs) in enumerate(recent):
        prompt += f"\nObservation {offset + i + 1}: {obs}\nAction {offset + i + 1}: {action}\n"
    return prompt + f"\nObservation {len(history) + 1}: {observation}\nAction {len(history) + 1}:"


@pytest.mark.parametrize("profile", ["default", "reference"])
def test_the_reference_profile_states_the_instruction_as_the_store_gives_it(store_url: str, profile: str) -> None:
    """WebShop's own instruction text begins "Instruction:", and the reference passes it on as it
    comes: under the ``reference`` profile every prompt reads "Instruction: Instruction: …", as
    the reference's; ours (``default``) states it once. The rest is the same."""
    from agent2rl_tui.grader.evaluators.episodes import episode_format

    task = load_task("webshop")
    spec = EnvSpec.from_table(task.raw["env"], store={"url": store_url})
    fmt = episode_format(spec, task.settings_for(profile))
    [ep] = play(["session:0"], spec.factory(), shopper({0: RIGHT[0]}), fmt=fmt, max_steps=3)
    given = RemoteWebShop(store_url)
    given.reset(0)
    instruction = given.instruction() if profile == "reference" else given.instruction()[len("Instruction: "):]
    given.close()
    assert ep.goal == instruction
    history = [(t.action, t.observation) for t in ep.turns[:2]]
    available = "\n".join(f"  {a}" for a in ["search[<your query>]", "click[search]"])
    ours = fmt.user_text(ep.goal, ep.turns[:2], ep.turns[1].observation, ["search[<your query>]", "click[search]"])
    assert ours == reference_prompt(instruction, history, ep.turns[1].observation, available)
    assert ("Instruction: Instruction: i need a red cotton" in ours) == (profile == "reference")
