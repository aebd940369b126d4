"""Level-3 items on the Items screen: episodes of real twc games, shown turn by turn.

The run folder is made by the real pipeline's parts: twc games played by the grader's episode
runner on the real TextWorldExpress with a scripted policy (the gold path for some games,
nonsense or endless looking around for others), each episode serialised by the grader's own
``episode_result``, written to evals/<n>/results.jsonl and recorded through the store. The
row builder (review/episodes_view.py) is tested on episodes built from the grader's
dataclasses, without Java.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from support.synthetic import make_episode_run, make_run
from support.tui import footer_keys, open_items, plain, settle, table_rows
from textual.widgets import Static

from agent2rl_tui.grader.episode_runner import Episode, Turn
from agent2rl_tui.grader.evaluators.episodes import episode_result
from agent2rl_tui.record.results import ItemRow
from agent2rl_tui.review.episodes_view import (
    END_MEANINGS,
    MAX_TEXT_CHARS,
    all_episodes,
    episode_rows,
    facts,
    is_episode,
)
from agent2rl_tui.ui.app import Agent2RLApp
from agent2rl_tui.ui.screens.run import RunScreen
from agent2rl_tui.ui.widgets.episode_view import EpisodeView, wrap_offsets
from agent2rl_tui.ui.widgets.virtual_table import VirtualTable

needs_java = pytest.mark.skipif(shutil.which("java") is None, reason=(
    "java is missing (TextWorldExpress runs on it): sudo apt install openjdk-17-jre-headless"))
SIZE = (160, 48)
GAMES = [f"test:{20000 + i}" for i in range(6)]
PLANS = [
    ["gold", "nonsense", "nonsense", "look", "nonsense", "nonsense"],  # the baseline: 1 of 6 won
    ["gold", "gold", "nonsense", "look", "gold", "nonsense"],          # submission 1: 3 of 6
    ["look", "gold", "gold", "gold", "gold", "nonsense"],              # submission 2: 4 of 6
]


def flat(text: str) -> str:
    """Text with its wrapping and label columns folded away, to look for a whole passage."""
    return " ".join(text.split())


def results(run: Path, sub_id: int) -> list[dict]:
    path = run / "evals" / str(sub_id) / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def made_episode(turns: list[tuple[str, str, float, str]], *, end: str = "step limit", index: int = 3,
                 kind: str | None = "pick") -> ItemRow:
    """A result row exactly as the grader writes it, from the runner's own dataclasses."""
    ep = Episode(index=index, game="test:20003", goal="Put the apple in the fridge.",
                 first_observation="You are in the kitchen. \n", kind=kind, end=end, won=end == "won",
                 score=1.0 if end == "won" else 0.25, prompt="Your task: ...",
                 turns=[Turn(action=a, observation=o, reward=r, completion=c) for a, o, r, c in turns])
    return episode_result(ep)


# -- the row builder (no UI, no Java) ---------------------------------------------------------

def test_episode_rows_show_facts_then_each_turn() -> None:
    item = made_episode([("take apple", "You take the apple.", 0.5, " take apple"),
                         ("open fridge", "The fridge is open.", 0.0, "open fridge\nthen put the apple in it"),
                         ("dance", "Unknown action.", 0.0, "dance")])
    assert is_episode(item) and all_episodes([item])
    assert not is_episode(ItemRow(index=0, prompt="1+1=", output="2", extracted="2", gold="2", correct=True))
    assert not all_episodes([]) and not all_episodes([item, ItemRow.from_dict({"index": 1, "correct": False})])
    f = facts(item)
    assert (f.game, f.kind, f.end, f.steps, f.won) == ("test:20003", "pick", "step limit", 3, False)
    assert f.outcome == "lost (step limit)" and f.end_meaning == END_MEANINGS["step limit"]
    assert f.actions == ["take apple", "open fridge", "dance"]

    rows = episode_rows(item)
    assert [(r.kind, r.label) for r in rows] == [
        ("lost", ""), ("field", "game"), ("field", "kind"), ("field", "goal"), ("field", "end"), ("field", "steps"),
        ("observation", "start"),
        ("action", "1 >"), ("observation", ""),
        ("action", "2 >"), ("completion", "raw"), ("observation", ""),  # the completion said more than the action
        ("action", "3 >"), ("observation", ""),
    ]
    assert rows[0].text == "episode 3 · lost (step limit) after 3 steps · score 0.25"
    assert rows[6].text == "You are in the kitchen."  # trailing whitespace of the game's text dropped
    take, open_ = rows[7], rows[9]
    assert (take.text, take.turn, take.note, take.note_good) == ("take apple", 1, "reward +0.5", True)
    assert (open_.note, open_.note_good) == ("reward 0", False)
    assert rows[10].text == json.dumps("open fridge\nthen put the apple in it")
    assert [r.turn for r in rows if r.kind != "field"] == [None, None, 1, 1, 2, 2, 2, 3, 3]

    won = episode_rows(made_episode([("take apple", "Done.", 1.0, "take apple")], end="won", kind=None))
    assert won[0].kind == "won" and won[0].text.startswith("episode 3 · won after 1 step ·")
    assert "kind" not in [r.label for r in won]


def test_episode_rows_cap_long_texts_and_turns_and_say_how_much_is_hidden() -> None:
    long = "You see " + "a very long corridor, " * 600
    item = made_episode([(f"go {i}", long, 0.0, f"go {i}") for i in range(50)], end="context full")
    rows = episode_rows(item, max_turns=20)
    observations = [r for r in rows if r.kind == "observation" and r.turn is not None]
    assert len(observations) == 20 and all(len(r.text) == MAX_TEXT_CHARS for r in observations)
    hidden = [r for r in rows if r.kind == "hidden"]
    assert hidden[0].text == f"… {len(long.rstrip()) - MAX_TEXT_CHARS:,} more characters not shown"
    assert hidden[-1].text.startswith("… 30 more turns not shown (turns 21-50)")
    assert facts(item).outcome == "lost (context full)"


def test_wrap_offsets_break_at_words_and_cut_long_ones() -> None:
    text = "look around\nYou take the notebook from the table.\n\n" + "x" * 25
    lines = [text[a:b] for a, b in wrap_offsets(text, 12)]
    assert [ln.rstrip() for ln in lines] == ["look around", "You take the", "notebook", "from the", "table.", "",
                                             "x" * 12, "x" * 12, "x"]
    assert wrap_offsets("", 10) == [(0, 0)]


@pytest.mark.asyncio
async def test_episode_view_lays_out_fifty_long_turns_at_once() -> None:
    """The layout of a capped 50-turn episode (4,000-character observations) is quick, and only
    the lines on screen are drawn."""
    long = "You are in the kitchen. " * 400
    item = made_episode([(f"look {i}", long, 0.0, f"look {i}") for i in range(50)])
    rows = episode_rows(item)
    app = Agent2RLApp(root=Path("/nonexistent"))
    async with app.run_test(size=SIZE) as pilot:
        view = EpisodeView()
        await app.screen.mount(view)
        await pilot.pause()
        t = time.perf_counter()
        view.set_rows(rows)
        laid_out = time.perf_counter() - t
        assert view.turn_count == 50 and view.line_count > 50 * (MAX_TEXT_CHARS // SIZE[0])
        assert laid_out < 0.5, f"laying out 50 long turns took {laid_out:.3f}s"
        assert "more characters not shown" in view.text()


# -- the Items screen ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def episode_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("episodes")
    make_episode_run(root, "20261122T233320-twc-example", PLANS, games=GAMES)
    return root


@needs_java
@pytest.mark.slow
@pytest.mark.asyncio
async def test_items_screen_shows_episodes_won_lost_flips_and_turns(episode_root: Path) -> None:
    run_dir = next(episode_root.iterdir())
    mine, prev, base = results(run_dir, 2), results(run_dir, 1), results(run_dir, 0)
    app = Agent2RLApp(root=episode_root)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_items(pilot, run_dir.name, "2")
        run_screen = app.screen_stack[-2]
        table = screen.query_one("#items-table", VirtualTable)
        view = screen.query_one("#episode-view", EpisodeView)
        assert screen.episodes and not screen.query("#item-text")

        # The list: won / lost, the flips against submission 1 and the baseline, the end, the steps.
        title = plain(screen.query_one("#items-title", Static))
        assert "submission 2: 4 of 6 games won" in title and "vs prev: previous submission #1" in title
        rows = table_rows(table)
        assert len(rows) == len(mine) == len(GAMES)

        def flip(now: bool, was: bool) -> str:
            return "solved" if now and not was else "broke" if was and not now else ""

        for row, item, p, b in zip(rows, mine, prev, base, strict=True):
            index, won, vs_prev, vs_base, end, steps, game, actions = row
            extra = item["extra"]
            assert index == str(item["index"]) and won == ("✓" if item["correct"] else "✗")
            assert (vs_prev, vs_base) == (flip(item["correct"], p["correct"]), flip(item["correct"], b["correct"]))
            assert (end, steps, game) == (extra["end"], str(len(extra["turns"])), extra["game"])
            assert actions.startswith(" · ".join(t["action"] for t in extra["turns"])[:40])
        # Game 2 is won now, lost by submission 1 and by the baseline: solved against both.
        assert rows[2][1:5] == ["✓", "solved", "solved", "won"]
        # Game 0 was won by both; now its transcript outgrew the context: broke against both.
        assert rows[0][1:5] == ["✗", "broke", "broke", "context full"]
        assert rows[1][1:5] == ["✓", "", "solved", "won"]
        assert rows[5][1:5] == ["✗", "", "", "step limit"]

        # The highlighted episode, turn by turn: its facts, then each action and observation.
        def shows(item: dict) -> bool:
            return f"episode {item['index']} ·" in view.text()

        await settle(pilot, lambda: shows(mine[0]), what="episode 0")
        text = flat(view.text())
        assert "episode 0 · lost (context full) after" in text
        assert f"game {GAMES[0]}" in text and flat(mine[0]["extra"]["goal"]) in text
        assert flat(END_MEANINGS["context full"]) in text
        assert flat(mine[0]["extra"]["first_observation"]) in text
        for n, turn in enumerate(mine[0]["extra"]["turns"], start=1):
            assert f"{n} > {turn['action']} reward 0" in text
            assert flat(turn["observation"]) in text
        await pilot.press("down", "down")
        await settle(pilot, lambda: shows(mine[2]), what="episode 2")
        text = flat(view.text())
        assert "episode 2 · won after" in text
        turns = mine[2]["extra"]["turns"]
        for turn in turns:
            assert f"> {turn['action']} reward" in text and flat(turn["observation"]) in text
        # The gold policy's second completion said more than the action: shown raw, once.
        assert text.count("raw ") == sum(t["completion"].strip() != t["action"] for t in turns) == 1
        assert flat(json.dumps(turns[1]["completion"])) in text
        assert "reward +0.5" in text  # twc gives half a point for each of the two steps that count

        # Keys: t (or enter) reads the turns, n / p between them, ] / [ between episodes.
        keys = footer_keys(screen)
        assert keys.get("t") == "Turns" and keys.get("f") == "Filter" and keys.get("escape") == "Back"
        assert keys.get("right_square_bracket") == keys.get("left_square_bracket") == "Episode"
        await pilot.press("t")
        assert app.focused is view
        await settle(pilot, lambda: footer_keys(screen).get("n") == "Turn", what="the turn keys")
        await pilot.press("n")
        assert view.current_turn == 1
        await pilot.press("n", "n", "n", "n")
        assert view.current_turn == len(turns)  # stops at the last turn
        await pilot.press("p")
        assert view.current_turn == len(turns) - 1
        await pilot.press("right_square_bracket")
        await settle(pilot, lambda: shows(mine[3]), what="episode 3")
        assert table.cursor == 3 and app.focused is view and view.current_turn is None
        assert "episode 3 · won after" in flat(view.text())
        await pilot.press("left_square_bracket", "left_square_bracket")
        await settle(pilot, lambda: shows(mine[1]), what="episode 1")
        await pilot.press("escape")  # from the turns back to the list
        assert app.focused is table and app.screen is screen
        await pilot.press("enter")
        assert app.focused is view
        await pilot.press("t")
        assert app.focused is table

        # The filter, named for episodes: lost ones, then won ones.
        await pilot.press("f")
        assert [r[0] for r in table_rows(table)] == [str(i["index"]) for i in mine if not i["correct"]]
        assert "filter: lost (2 shown)" in plain(screen.query_one("#items-title", Static))
        await pilot.press("f")
        assert [r[0] for r in table_rows(table)] == [str(i["index"]) for i in mine if i["correct"]]
        await pilot.press("f", "f")  # changed since the baseline
        assert [r[0] for r in table_rows(table)] == ["0", "1", "2", "3", "4"]
        await pilot.press("escape")
        await settle(pilot, lambda: app.screen is run_screen and isinstance(app.screen, RunScreen), what="back")

        # The Scores pane sums the episodes up in the same words: games won, and which flipped.
        summary = run_screen.query_one("#items-text", Static)
        await settle(pilot, lambda: "games won" in plain(summary), what="the Scores summary")
        assert "4 of 6 games won" in plain(summary)
        assert f"- #0 {GAMES[0]}: lost (context full) after" in plain(summary)
        assert f"+ #2 {GAMES[2]}: won after 3 steps" in plain(summary)


@needs_java
@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_fifty_turn_episode_opens_without_stalling(tmp_path: Path) -> None:
    """Fifty turns of looking around (the room's whole description each time) to the step limit."""
    run_dir = make_episode_run(tmp_path, "20261122T233320-twc-example", [["nonsense", "look"], ["look", "look"]],
                               games=GAMES[3:5], max_steps=50, context_chars=None)
    items = results(run_dir, 1)
    assert [len(i["extra"]["turns"]) for i in items] == [50, 50]
    app = Agent2RLApp(root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_items(pilot, run_dir.name, "1")
        view = screen.query_one("#episode-view", EpisodeView)
        assert table_rows(screen.query_one("#items-table", VirtualTable))[0][4:6] == ["step limit", "50"]
        await settle(pilot, lambda: view.turn_count == 50, what="the first episode")
        t = time.perf_counter()
        await pilot.press("down")
        await settle(pilot, lambda: "episode 1 ·" in view.text(), what="the second episode")
        switched = time.perf_counter() - t
        assert switched < 2.0, f"showing a 50-turn episode took {switched:.2f}s"
        await pilot.press("t", "end")
        await pilot.pause()
        last = items[1]["extra"]["turns"][-1]["observation"]
        top = round(view.scroll_y)
        on_screen = flat("\n".join(view.row_text(y) for y in range(top, view.line_count)))
        assert top > 0 and flat(last) in on_screen
        for _ in range(60):
            await pilot.press("n")
        assert view.current_turn == 50


@pytest.mark.asyncio
async def test_level_one_items_keep_their_columns_and_keys(tmp_path: Path) -> None:
    """Items that are not episodes: the same columns and detail as before, no episode keys."""
    run_dir = make_run(tmp_path, "20261122T233320-arith-example")
    app = Agent2RLApp(root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_items(pilot, run_dir.name, "2")
        assert not screen.episodes and not screen.query(EpisodeView)
        table = screen.query_one("#items-table", VirtualTable)
        # The item's question, the last user turn of its prompt; w shows the whole prompt (issue 43, 4).
        assert [c.label for c in table.columns] == ["#", "ok", "vs prev", "vs base", "extracted", "gold", "question"]
        assert "items correct" in plain(screen.query_one("#items-title", Static))
        await settle(pilot, lambda: "item 0" in plain(screen.query_one("#item-text", Static)), what="item 0")
        keys = footer_keys(screen)
        assert keys.get("escape") == "Back" and keys.get("f") == "Filter" and keys.get("w") == "Whole prompt"
        assert not {"t", "right_square_bracket", "left_square_bracket"} & set(keys)
        await pilot.press("t", "right_square_bracket")  # nothing happens
        assert table.cursor == 0 and app.screen is screen
        await pilot.press("escape")
        await settle(pilot, lambda: isinstance(app.screen, RunScreen), what="back to the Run screen")
