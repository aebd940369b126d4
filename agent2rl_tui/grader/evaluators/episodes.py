"""The interactive (Level-3) evaluation: play each eval game once with the submitted model.

The task's ``[env]`` table names the environment, its limits and the pool size; its
``[inference]`` table the header of the transcript (``prompt_template``, filled with the
game's goal) and the decoding. Every episode becomes one result line in evals/<n>/ with
all its turns, so a reviewer can replay what the model did.
"""

from __future__ import annotations

from typing import Any

from agent2rl_tui.envs import EnvSpec
from agent2rl_tui.grader.engines.base import Engine
from agent2rl_tui.grader.episodes import Episode, EpisodeFormat, Pending, PlayStats, play, summarize
from agent2rl_tui.grader.evaluators.base import ItemResult
from agent2rl_tui.tasks.registry import InferenceSettings, Task


def episode_result(ep: Episode) -> ItemResult:
    return ItemResult(
        index=ep.index, prompt=ep.prompt, output="\n".join(t.action for t in ep.turns), extracted=ep.end,
        gold="won", correct=ep.won,
        extra={"game": ep.game, "kind": ep.kind, "goal": ep.goal, "steps": ep.steps, "end": ep.end,
               "score": ep.score, "first_observation": ep.first_observation,
               "turns": [{"action": t.action, "observation": t.observation, "reward": t.reward,
                          "completion": t.completion} for t in ep.turns]},
    )


def context_check(engine: Engine, settings: InferenceSettings) -> Any:
    """A prompt fits when its tokens and the new ones stay within the model's positions."""
    tokenizer = getattr(engine, "tokenizer", None)
    model = getattr(engine, "model", None)
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if tokenizer is None or not limit:
        return None
    return lambda prompt: len(tokenizer(prompt)["input_ids"]) + settings.max_new_tokens <= limit


def play_task(task: Task, engine: Engine, items: list[dict[str, Any]],
              settings: InferenceSettings) -> tuple[list[ItemResult], dict[str, Any]]:
    """Per-episode results and the summary (score, games won, by kind, generate calls)."""
    spec = EnvSpec.from_table(task.raw.get("env", {}))
    fmt = EpisodeFormat(header=settings.prompt_template, think_prefix=spec.think_prefix)

    def policy(batch: list[Pending]) -> list[str]:
        return engine.generate([p.prompt for p in batch], settings)

    stats = PlayStats()
    episodes = play([str(item["game"]) for item in items], spec.factory(), policy, fmt=fmt,
                    max_steps=spec.max_steps, pool_size=spec.pool_size,
                    fits=context_check(engine, settings), stats=stats)
    summary = summarize(episodes) | {"generate_calls": stats.policy_calls, "largest_batch": stats.largest_batch}
    return [episode_result(ep) for ep in episodes], summary
