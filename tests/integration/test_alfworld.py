"""ALFWorld on real games: the adapter, the ReAct transcript, the task through the grader's
evaluation, ``data prepare alfworld`` and the agent's play kit.

The games are the five shipped for offline tests (../shared/data/alfworld: one train game,
four valid_unseen games, all on one kitchen) played by alfworld 0.4.2 itself. A scripted
policy stands in for the model: the planner's plan wins, wrong actions lose at the step
limit. The expected ReAct prompt is built here from react_prompts.json and the game's raw
observations, independently of the grader's code, as ReAct's notebook builds it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
from support.paths import SHARED_DATA
from support.runs import cli

from agent2rl_tui.envs import EnvSpec
from agent2rl_tui.envs.base import EnvError, Outcome, Start
from agent2rl_tui.grader.episode_runner import Episode, Pending, ReActFormat, play, summarize
from agent2rl_tui.tasks.registry import InferenceSettings, Task, TaskError, load_task

ALFWORLD = SHARED_DATA / "alfworld"
# Installed by make (the alfworld extra): its absence fails the collection, never skips.
assert find_spec("alfworld") is not None, "ALFWorld is not installed: `make setup` (or pip install -e '.[alfworld]')"
pytestmark = pytest.mark.skipif(not (ALFWORLD / "json_2.1.1").is_dir(), reason=(
    f"the ALFWorld games are missing: put ../shared/data/alfworld beside the clone ({ALFWORLD})"))

TRAIN = "train/pick_heat_then_place_in_recep-Potato-None-SinkBasin-14/trial_T20190908_231731_054988"
EVAL = ["valid_unseen/pick_and_place_simple-Egg-None-Fridge-14/trial_synth",
        "valid_unseen/pick_clean_then_place_in_recep-Mug-None-CoffeeMachine-14/trial_synth",
        "valid_unseen/pick_cool_then_place_in_recep-Apple-None-CounterTop-14/trial_synth",
        "valid_unseen/pick_heat_then_place_in_recep-Tomato-None-CounterTop-14/trial_synth"]
GAMES = [TRAIN, *EVAL]
THOUGHT = "think: To solve the task, I need to find the object first."

# ReAct's alfworld.ipynb, as it is.
PREFIXES = {"pick_and_place": "put", "pick_clean_then_place": "clean", "pick_heat_then_place": "heat",
            "pick_cool_then_place": "cool", "look_at_obj": "examine", "pick_two_obj": "puttwo"}


def react_first_prompt(game: str, raw_first_observation: str) -> str:
    """ReAct's prompt before the first action of ``game``, built as its notebook does."""
    d = json.loads((ALFWORLD / "react_prompts.json").read_text())
    name = "/".join(game.split("/")[-2:])
    v = next(v for k, v in PREFIXES.items() if name.startswith(k))
    prompt = ("Interact with a household to solve a task. Here are two examples.\n"
              + d[f"react_{v}_1"] + d[f"react_{v}_0"] + "\nHere is the task.\n")
    ob = "\n".join(raw_first_observation.split("\n\n")[1:])
    return prompt + ob + "\n>"


def react_turn(action: str, raw_observation: str) -> str:
    observation = raw_observation
    if observation.startswith("You arrive at loc "):
        observation = observation[observation.find(". ") + 2:]
    if action.startswith("think:"):
        observation = "OK."
    return f" {action}\n{observation}\n>"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The data cache with the shipped games prepared by the real command line."""
    root = tmp_path_factory.mktemp("alfworld-cache")
    old = os.environ.get("AGENT2RL_DATA")
    os.environ["AGENT2RL_DATA"] = str(root)
    proc = cli("data", "prepare", "alfworld", "--from", str(ALFWORLD), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "alfworld: 1 train and 4 eval rows" in proc.stdout
    yield root
    if old is None:
        os.environ.pop("AGENT2RL_DATA", None)
    else:
        os.environ["AGENT2RL_DATA"] = old


@pytest.fixture(scope="module")
def task(cache: Path) -> Task:
    return load_task("alfworld")


class Recorder:
    """A real environment, watched: its starts, plans and raw answers, for the checks below."""

    seen: dict[str, dict[str, Any]] = {}

    def __init__(self, env: Any) -> None:
        self.env, self.name, self.game = env, env.name, ""

    def reset(self, game: str) -> Start:
        start = self.env.reset(game)
        self.game = game
        self.seen[game] = {"start": start, "gold": self.env.gold_actions(), "raw": []}
        return start

    def step(self, action: str) -> Outcome:
        outcome = self.env.step(action)
        self.seen[self.game]["raw"].append((action, outcome))
        return outcome

    def gold_actions(self) -> list[str] | None:
        return self.env.gold_actions()

    def close(self) -> None:
        self.env.close()


@pytest.fixture(scope="module")
def expert_run(task: Task, cache: Path) -> tuple[list[Episode], dict[str, dict[str, Any]], list[str], float]:
    """The five games through the grader's episode runner with the task's own format: a
    thought, then the planner's plan (from the adapter's gold_actions), two games at a time,
    each in its own process (a child costs ~2 s of imports: two keep two cores busy)."""
    from agent2rl_tui.envs.alfworld import ALFWorld
    from agent2rl_tui.envs.subproc import InChildProcess
    from agent2rl_tui.grader.evaluators.episodes import episode_format, header_maker

    Recorder.seen = {}
    spec = EnvSpec.from_table(task.raw["env"], data_dir=cache / "alfworld")
    first_prompts: list[str] = []

    def policy(batch: list[Pending]) -> list[str]:
        out = []
        for p in batch:
            ep = p.episode
            if ep.steps == 0:
                first_prompts.append(p.prompt)
                out.append(" " + THOUGHT + "\nmore text")
            else:
                out.append(" " + Recorder.seen[ep.game]["gold"][ep.steps - 1])
        return out

    t0 = time.perf_counter()
    episodes = play(GAMES, lambda: Recorder(InChildProcess(partial(ALFWorld, cache / "alfworld" / "games"))), policy,
                    fmt=episode_format(spec, task.inference), max_steps=spec.max_steps, pool_size=2, workers=2,
                    header_for=header_maker(task, spec, task.inference.prompt_template))
    return episodes, dict(Recorder.seen), first_prompts, time.perf_counter() - t0


def test_prepare_copies_the_games_and_lists_each_split(task: Task, cache: Path) -> None:
    train, evals = task.load_split("train"), task.load_split("eval")
    assert [r["game"] for r in train] == [TRAIN] and [r["game"] for r in evals] == EVAL
    assert [r["kind"] for r in evals] == ["put", "clean", "cool", "heat"] and train[0]["kind"] == "heat"
    assert evals[0]["goal"] == "Your task is to: put some egg on fridge."
    for game in GAMES:
        assert (cache / "alfworld" / "games" / game / "game.tw-pddl").is_file()
    source = json.loads((cache / "alfworld" / "source.json").read_text())
    assert (source["train"], source["eval"]) == (1, 4) and source["source"].endswith("json_2.1.1")


def test_prepare_without_games_says_what_to_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent2rl_tui.tasks.data import prepare

    monkeypatch.setenv("AGENT2RL_DATA", str(tmp_path / "cache"))
    task = load_task("alfworld")
    (tmp_path / "empty").mkdir()
    for source in (tmp_path / "empty", tmp_path / "missing"):
        with pytest.raises(TaskError, match=r"alfworld-download.*data prepare alfworld --from"):
            prepare(task, source)
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "missing"))  # the default: alfworld's own cache
    with pytest.raises(TaskError, match="alfworld-download"):
        prepare(task)
    with pytest.raises(TaskError, match="data prepare alfworld"):
        task.load_split("eval")


def test_the_planner_wins_every_game(expert_run: tuple) -> None:
    episodes, seen, _, _ = expert_run
    assert [e.game for e in episodes] == GAMES
    for ep in episodes:
        gold = seen[ep.game]["gold"]
        assert gold and ep.won and ep.end == "won", (ep.game, ep.end)
        assert [t.action for t in ep.turns] == [THOUGHT, *gold]
        assert [t.observation for t in ep.turns][0] == "OK."
        start: Start = seen[ep.game]["start"]
        assert start.info == {"game": ep.game, "kind": ep.kind} and start.goal.startswith("Your task is to: ")
        assert start.observation.startswith("-= Welcome to TextWorld, ALFRED! =-\n\n")
        assert gold[0] in (start.admissible or [])
        # The thought never reached the game; the last action won it, none before.
        raw = seen[ep.game]["raw"]
        assert [a for a, _ in raw] == gold
        assert [o.won for _, o in raw] == [False] * (len(gold) - 1) + [True]
    assert summarize(episodes)["by_kind"] == {
        "clean": {"games": 1, "won": 1, "score": 100.0}, "cool": {"games": 1, "won": 1, "score": 100.0},
        "heat": {"games": 2, "won": 2, "score": 100.0}, "put": {"games": 1, "won": 1, "score": 100.0}}


def test_the_prompt_is_reacts_character_for_character(expert_run: tuple) -> None:
    episodes, seen, first_prompts, _ = expert_run
    assert len(first_prompts) == len(GAMES)
    for ep in episodes:
        expected = react_first_prompt(ep.game, seen[ep.game]["start"].observation)
        assert expected in first_prompts
        assert expected.endswith("Here is the task.\nYou are in the middle of a room. Looking quickly around you, "
                                 "you see " + expected.split("you see ")[-1])
        raw = iter(seen[ep.game]["raw"])
        for turn in ep.turns:
            observation = "ignored" if turn.action.startswith("think:") else next(raw)[1].observation
            expected += react_turn(turn.action, observation)
        assert ep.prompt == expected


def test_wrong_actions_lose_every_game_at_the_step_limit(task: Task, cache: Path) -> None:
    spec = EnvSpec.from_table(task.raw["env"] | {"pool_size": 2}, data_dir=cache / "alfworld")
    # ReAct's examples place things with "put X in/on Y"; alfworld 0.4 knows only "move X to Y".
    wrong = ["put egg 3 in/on fridge 1", "xyzzy"]
    episodes = play(GAMES, spec.factory(), lambda batch: [wrong[p.episode.steps % 2] for p in batch],
                    fmt=ReActFormat(think_prefix="think:"), max_steps=3, pool_size=spec.pool_size, workers=spec.workers)
    assert summarize(episodes)["score"] == 0.0
    for ep in episodes:
        assert not ep.won and ep.end == "step limit" and ep.steps == 3
        assert [t.observation for t in ep.turns] == ["Nothing happens."] * 3


class ScriptedEngine:
    """An engine that plays the planner's plan for put and heat games and only thinks in the
    others (a thought costs a step but no game time), reading nothing but its prompts."""

    name = "scripted"

    def __init__(self, plans: dict[str, list[str]]) -> None:
        self.plans, self.calls = plans, 0

    def context_limit(self) -> None:
        return None  # a plan has no context to outgrow

    def generate(self, prompts: list[str], settings: InferenceSettings) -> list[str]:
        self.calls += 1
        out = []
        for prompt in prompts:
            game = prompt.split("\nHere is the task.\n", 1)[1]
            goal = next(line for line in game.split("\n") if line.startswith("Your task is to: "))
            plan = self.plans[goal] if goal.split()[4] in ("put", "heat") else []
            step = game.count("\n>") - 1
            out.append(" " + (plan[step] if step < len(plan) else "think: where could it be?") + "\n")
        return out


def test_the_task_is_graded_through_the_evaluators_episode_runner(task: Task, expert_run: tuple) -> None:
    from agent2rl_tui.grader.evaluators.episodes import play_task

    _, seen, _, _ = expert_run
    plans = {v["start"].goal: v["gold"] for v in seen.values()}
    engine = ScriptedEngine(plans)
    results, summary = play_task(task, engine, task.load_split("eval"), task.inference)  # type: ignore[arg-type]
    assert [r.extra["game"] for r in results] == EVAL
    assert summary["score"] == 50.0 and summary["games"] == 4 and summary["won"] == 2
    assert summary["by_kind"] == {"clean": {"games": 1, "won": 0, "score": 0.0},
                                  "cool": {"games": 1, "won": 0, "score": 0.0},
                                  "heat": {"games": 1, "won": 1, "score": 100.0},
                                  "put": {"games": 1, "won": 1, "score": 100.0}}
    assert summary["largest_batch"] == 4 and summary["generate_calls"] == engine.calls == 50
    for r in results:
        assert r.correct == (r.extra["kind"] in ("put", "heat"))
        assert r.extra["end"] == ("won" if r.correct else "step limit")
        assert r.extra["steps"] == (len(plans[r.extra["goal"]]) if r.correct else 50)
        assert r.prompt.startswith(react_first_prompt(r.extra["game"], r.extra["first_observation"]))


def test_the_play_kit_builds_the_graders_prompts(task: Task, expert_run: tuple, tmp_path: Path) -> None:
    """data/play.py (standalone, for the agent) plays the train game as the grader would."""
    from agent2rl_tui.run.workspace import write_play_kit
    from agent2rl_tui.tasks.registry import write_jsonl

    _, seen, _, _ = expert_run
    data = tmp_path / "data"
    data.mkdir()
    write_jsonl(data / "train.jsonl", task.load_split("train"))
    write_play_kit(data, task, task.inference)
    assert sorted(p.name for p in data.iterdir()) == ["env.json", "games", "play.py", "react_prompts.json", "train.jsonl"]
    assert [p.name for p in (data / "games").iterdir()] == ["train"]  # never the grader's games
    out = tmp_path / "expert.jsonl"
    proc = subprocess.run([sys.executable, str(data / "play.py"), "expert", "--out", str(out)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (t,) = [json.loads(line) for line in out.read_text().splitlines()]
    gold, start = seen[TRAIN]["gold"], seen[TRAIN]["start"]
    assert t["game"] == TRAIN and t["won"] and t["kind"] == "heat" and t["goal"] == start.goal
    assert [turn["action"] for turn in t["turns"]] == gold
    expected = react_first_prompt(TRAIN, start.observation)
    assert t["turns"][0]["prompt"] == expected  # what `play.py show GAME` prints
    for action, outcome in seen[TRAIN]["raw"]:
        expected += react_turn(action, outcome.observation)
    assert t["prompt"] == expected

    # The example agent's SFT stage reads this kit as it reads twc's: one pair per gold turn.
    from agent2rl_tui.agents.example import scripts

    code = ("import json, sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); import episodes_sft as s; "
            "pairs, won = s.expert_turns(s.load_play_kit(Path(sys.argv[2])), [sys.argv[3]]); "
            "print(json.dumps({'pairs': pairs, 'won': won}))")
    proc = subprocess.run([sys.executable, "-c", code, str(Path(scripts.__file__).parent), str(data), TRAIN],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    sft = json.loads(proc.stdout.splitlines()[-1])
    assert sft["won"] == 1 and [p["completion"] for p in sft["pairs"]] == [f" {a}\n" for a in gold]
    assert [p["prompt"] for p in sft["pairs"]] == [turn["prompt"] for turn in t["turns"]]


def test_the_adapter_shows_what_alfworlds_own_env_shows(cache: Path, tmp_path: Path) -> None:
    """AlfredTWEnv, built from a config as ReAct and AutoRL-Bench build it, against the adapter:
    the same observations, admissible commands, wins and ends, unknown commands included.

    The reference reads a copy of the games under tmp_path: textworld, inside alfworld's own env,
    picks its backend by searching the whole path for ".z[1-8]", and a clone under
    /tmp/fresh-clone.z4GFMf/ failed there (our adapter no longer asks it: the test below)."""
    import alfworld.info
    from alfworld.agents.environment import get_environment

    from agent2rl_tui.envs.alfworld import ALFWorld

    games = shutil.copytree(ALFWORLD / "json_2.1.1", tmp_path / "json_2.1.1")
    config = {
        "dataset": {"data_path": str(games / "train"), "eval_id_data_path": str(games / "valid_seen"),
                    "eval_ood_data_path": str(games / "valid_unseen"), "num_train_games": -1, "num_eval_games": 1},
        "logic": {"domain": alfworld.info.ALFRED_PDDL_PATH, "grammar": alfworld.info.ALFRED_TWL2_PATH},
        "env": {"type": "AlfredTWEnv", "domain_randomization": False, "task_types": [1, 2, 3, 4, 5, 6],
                "expert_timeout_steps": 150, "expert_type": "handcoded", "goal_desc_human_anns_prob": 0.0},
        "general": {"training_method": "dagger"}, "dagger": {"training": {"max_nb_steps_per_episode": 50}},
    }
    reference = get_environment("AlfredTWEnv")(config, train_eval="eval_out_of_distribution").init_env(batch_size=1)
    ours = ALFWorld(cache / "alfworld" / "games")
    try:
        ob, infos = reference.reset()
        game = "/".join(infos["extra.gamefile"][0].split("/")[-4:-1])
        start = ours.reset(game)
        assert (start.observation, start.admissible) == (ob[0], infos["admissible_commands"][0])
        for action in ["look", "put egg 3 in/on fridge 1", "think: where?", *(ours.gold_actions() or [])]:
            ob, _, done, infos = reference.step([action])
            outcome = ours.step(action)
            assert (outcome.observation, outcome.admissible) == (ob[0], infos["admissible_commands"][0])
            assert (outcome.won, outcome.done) == (infos["won"][0], done[0])
        assert outcome.won
    finally:
        reference.close()
        ours.close()


PLAY_ONE = """
import json, sys
from pathlib import Path
import agent2rl_tui.envs.alfworld as alfworld_env
root, game, how = sys.argv[1:4]  # read first: fast-downward's translator rewrites sys.argv
if how == "untranslated":
    alfworld_env.remember_translations = lambda *a, **k: None  # TextWorld's own translations, every time
env = alfworld_env.ALFWorld(Path(root))
trace = []
for _ in range(2):  # the same game twice: the second from the kept translations, where they are kept
    start = env.reset(game)
    plan = env.gold_actions() or []
    trace.append([start.observation, start.admissible, plan])
    for action in ["look", *plan[:3]]:
        outcome = env.step(action)
        trace.append([outcome.observation, outcome.admissible, outcome.won, outcome.done])
import fast_downward
print(json.dumps({"kept": getattr(fast_downward.pddl2sas, "remembers", False), "trace": trace}))
"""


def test_kept_translations_play_as_textworlds_own(cache: Path) -> None:
    """The environment keeps fast-downward's PDDL->SAS translations (``remember_translations``: TextWorld
    translated each game four times a reset): a game reset, planned and played, then again, shows
    exactly what it shows with TextWorld translating every time."""
    traces = {}
    for how in ("kept", "untranslated"):
        out = subprocess.run([sys.executable, "-c", PLAY_ONE, str(cache / "alfworld" / "games"), EVAL[0], how],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        played = json.loads(out.stdout.splitlines()[-1])
        assert played["kept"] is (how == "kept")
        traces[how] = played["trace"]
    assert traces["kept"] == traces["untranslated"]
    assert traces["kept"][0][2] and traces["kept"][0] == traces["kept"][5]  # a plan; the replay starts alike


def test_games_under_a_path_that_looks_like_a_z_machine_file_play(cache: Path, tmp_path: Path) -> None:
    """textworld's own loader takes any path with ".z[1-8]" in it for a Z-machine game; the adapter loads
    the PDDL games itself."""
    from agent2rl_tui.envs.alfworld import ALFWorld

    root = shutil.copytree(cache / "alfworld" / "games", tmp_path / "runs.z4ab" / "games")
    env = ALFWorld(root)
    try:
        env.reset(EVAL[0])
        for action in env.gold_actions() or []:
            outcome = env.step(action)
        assert outcome.won
    finally:
        env.close()


def test_bad_games_and_missing_data_say_what_to_do(cache: Path, tmp_path: Path) -> None:
    from agent2rl_tui.envs.alfworld import ALFWorld
    from agent2rl_tui.envs.subproc import InChildProcess

    env = ALFWorld(cache / "alfworld" / "games")
    try:
        for bad in ("", "/etc/passwd", "../x/y", "valid_unseen/nope/trial_1"):
            with pytest.raises(EnvError, match="ALFWorld game"):
                env.reset(bad)
        with pytest.raises(EnvError, match="data prepare alfworld --from"):
            env.reset("valid_unseen/nope/trial_1")
    finally:
        env.close()
    with pytest.raises(EnvError, match="does not exist.*data prepare alfworld"):
        ALFWorld(tmp_path / "nowhere")
    with pytest.raises(EnvError, match="does not exist.*data prepare alfworld"):  # the same, from a child process
        InChildProcess(partial(ALFWorld, tmp_path / "nowhere"))
    with pytest.raises(EnvError, match="none were given.*data prepare alfworld"):
        EnvSpec.from_table({"kind": "alfworld"}).factory()
    with pytest.raises(EnvError, match="transcript 'chat' is not known"):
        EnvSpec.from_table({"kind": "alfworld", "transcript": "chat"})


def test_the_train_environment_service_plays_the_train_game_as_the_kit_does(task: Task, expert_run: tuple,
                                                                          tiny_model: Path, tmp_path: Path) -> None:
    """The run's service (``$TRAIN_ENV_URL``) gives the episode the grader and the workspace's kit
    give: ReAct's prompt, the thought answered "OK.", the planner's plan won; eval games refused."""
    from support.runs import make_prepared_run
    from test_trainenv import Service

    _, seen, _, _ = expert_run
    gold, start = seen[TRAIN]["gold"], seen[TRAIN]["start"]
    service = Service(make_prepared_run(tmp_path / "runs", tiny_model, task="alfworld"))
    try:
        env = service.new_env()
        assert service.call("POST", f"/envs/{env}/reset", {"game": EVAL[0]})[1]["error"] == "not_a_train_game"
        status, first = service.call("POST", f"/envs/{env}/reset", {"game": TRAIN})
        expected = react_first_prompt(TRAIN, start.observation)
        assert status == 200 and first["prompt"] == expected
        status, turn = service.call("POST", f"/envs/{env}/step", {"completion": f" {THOUGHT}\nmore text"})
        assert (turn["action"], turn["observation"]) == (THOUGHT, "OK.")
        expected += react_turn(THOUGHT, "")
        for (action, outcome), planned in zip(seen[TRAIN]["raw"], gold, strict=False):
            assert action == planned
            status, turn = service.call("POST", f"/envs/{env}/step", {"completion": f" {action}"})
            assert status == 200, turn
            expected += react_turn(action, outcome.observation)
        assert turn["won"] and turn["done"] and turn["prompt"] == expected
    finally:
        service.close()
