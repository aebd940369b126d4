"""The interactive (Level-3) evaluation: play each eval game once with the submitted model.

The task's ``[env]`` table names the environment, its limits, the pool size and the
transcript's layout; its ``[inference]`` table the header of the transcript
(``prompt_template``, filled with the game's goal and, where ``[env] examples`` names a file
of few-shot examples, the examples of the game's kind) and the decoding. Every episode
becomes one result line in evals/<n>/ with all its turns, so a reviewer can replay what the
model did.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any, Protocol

from agent2rl_tui.envs import PROFILE_TRANSCRIPTS, TRANSCRIPTS, EnvSpec
from agent2rl_tui.envs.base import EnvError, Start
from agent2rl_tui.envs.webshop import WebShopSpec
from agent2rl_tui.grader.engines.base import Engine, Messages
from agent2rl_tui.grader.episode_runner import (
    Episode,
    EpisodeFormat,
    Pending,
    PlayStats,
    ReActFormat,
    ReferenceSearchReActFormat,
    SearchReActFormat,
    WebShopFormat,
    play,
    summarize,
)
from agent2rl_tui.grader.evaluators.base import ItemResult
from agent2rl_tui.record.results import EpisodeRow, Turn
from agent2rl_tui.tasks.registry import InferenceSettings, Task, task_cache


def episode_result(ep: Episode) -> ItemResult:
    """The episode's results line (``record.results.EpisodeRow``), as an item."""
    item = ItemResult(index=ep.index, prompt=ep.prompt, output="\n".join(t.action for t in ep.turns),
                      extracted=ep.end, gold="won", correct=ep.won)
    return EpisodeRow(item=item, game=ep.game, kind=ep.kind, goal=ep.goal, steps=ep.steps, end=ep.end,
                      score=ep.score, first_observation=ep.first_observation,
                      turns=[Turn(action=t.action, observation=t.observation, reward=t.reward,
                                  completion=t.completion) for t in ep.turns]).to_item()


def context_check(engine: Engine, settings: InferenceSettings) -> Any:
    """A prompt fits when its tokens and the new ones stay within the engine's context."""
    tokenizer = getattr(engine, "tokenizer", None)
    limit = engine.context_limit()
    if tokenizer is None or not limit:
        return None
    return lambda prompt: len(tokenizer(prompt)["input_ids"]) + settings.max_new_tokens <= limit


class ChatRenderer(Protocol):
    """What a WebShop transcript needs of an engine: its chat template (an ``Engine``, or the train
    environment's ``TemplateRenderer``)."""

    def render(self, messages: Messages, *, require_template: bool = False) -> str: ...


def episode_format(spec: EnvSpec, settings: InferenceSettings, engine: ChatRenderer | None = None) -> EpisodeFormat:
    """The transcript layout the prompt profile's ``transcript`` names, else the task's ``[env]
    transcript`` (WebShop's: a chat, rendered by the engine's chat template)."""
    transcript = settings.transcript or spec.transcript
    if transcript not in TRANSCRIPTS + PROFILE_TRANSCRIPTS:
        raise EnvError(f"prompt profile {settings.prompt_profile!r}: transcript {transcript!r} is not known; "
                       f"known: {', '.join(TRANSCRIPTS + PROFILE_TRANSCRIPTS)}")
    if transcript in ("webshop", "webshop-reference"):
        render = (lambda messages: engine.render(messages, require_template=True)) if engine else None
        window = spec.window if isinstance(spec, WebShopSpec) else WebShopFormat.window  # WebShop's layout, another kind
        return WebShopFormat(window=window, render=render, given_instruction=transcript == "webshop-reference")
    cls = {"react": ReActFormat, "search-react": SearchReActFormat,
           "search-react-reference": ReferenceSearchReActFormat}.get(transcript, EpisodeFormat)
    return cls(header=settings.prompt_template, think_prefix=spec.think_prefix)


def header_maker(task: Task, spec: EnvSpec, template: str) -> Callable[[Start], str] | None:
    """Per-game headers where the task has few-shot examples by kind, else None (one header).

    The template's ``{example_<i>}`` is the file's entry ``react_<kind>_<i>`` for the game's
    kind (ReAct puts ``react_<kind>_1`` then ``react_<kind>_0`` before each ALFWorld game);
    ``str.format`` puts the examples in as they are, braces and all.
    """
    if not spec.examples:
        return None
    path = task.folder / spec.examples
    try:
        examples: dict[str, str] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EnvError(f"task {task.name}: [env] examples {path}: {exc}") from exc

    def header(start: Start) -> str:
        kind = start.info.get("kind")
        fields = {"example_" + key.rsplit("_", 1)[1]: text for key, text in examples.items()
                  if key.startswith(f"react_{kind}_")}
        if not fields:
            raise EnvError(f"task {task.name}: {path.name} has no react_{kind}_<i> examples for game {start.info.get('game')}")
        return template.format(goal=start.goal, **fields)

    return header


def judge_episodes(task: Task, episodes: list[Episode], items: list[dict[str, Any]],
                   judge: dict[str, Any] | None, fmt: EpisodeFormat | None = None,
                   style: str = "") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A searching task's episodes are won when the judge calls their answer correct: per
    episode the answer (as ``fmt`` reads it), the gold, the verdict; and the judging's summary.
    ``style``: the profile's ``answer_judge`` (``reference``: as the reference judges)."""
    from agent2rl_tui.judge import JudgeError, JudgeSettings
    from agent2rl_tui.judge.verdict import REFERENCE, REFERENCE_VERSION, VERSION, judge_answers

    if not judge:
        raise JudgeError(f"task {task.name} is graded by a judge, and this run names none: start it with "
                         "--judge-url URL --judge-model NAME [--judge-key-env VAR]")
    settings = JudgeSettings.for_task(task.judge, judge, modes=False)
    fmt = fmt or SearchReActFormat()
    answers = [fmt.answer_of(ep) for ep in episodes]
    triples = [(a, str(item["answer"]), str(item.get("answer_type") or "Single Answer"))
               for a, item in zip(answers, items)]
    verdicts, calls = judge_answers(triples, settings, task_cache(task) / "judge-cache.sqlite", style=style)
    for ep, v in zip(episodes, verdicts):
        ep.won = v.correct
        ep.score = 1.0 if v.correct else 0.0
        if ep.end == "done":
            ep.end = "won" if v.correct else "wrong answer"
    extras = [{"answer": a, "gold_answer": item["answer"], "judge_raw": v.raw, "judge_error": v.error,
               "cached": v.cached, "searches": [t.action[len("search["):-1] for t in ep.turns
                                                if t.action.startswith("search[")],
               **({"judge_fallback": "string match"} if v.fallback else {})}
              for a, item, v, ep in zip(answers, items, verdicts, episodes)]
    failed = [{"index": ep.index, "error": v.error} for ep, v in zip(episodes, verdicts)
              if v.error and v.error != "no answer"]
    version = REFERENCE_VERSION if style == REFERENCE else VERSION
    return extras, {"judge": {**settings.to_dict(), "prompt_version": version, "style": style or "ours"},
                    "judge_calls": calls, "n_answered": sum(a is not None for a in answers),
                    "n_judge_failed": len(failed), "n_string_match": sum(v.fallback for v in verdicts),
                    "judge_failed": failed[:50]}


def shopping_summary(episodes: list[Episode]) -> dict[str, Any]:
    """WebShop's figures beside the score (success at reward >= 0.5, AutoRL-Bench's): the mean
    reward and the success rate at reward = 1.0 (WebShop's and most papers')."""
    n = len(episodes) or 1
    return {"mean_reward": sum(ep.score for ep in episodes) / n,
            "success_rate_at_0.5": 100.0 * sum(ep.score >= 0.5 for ep in episodes) / n,
            "success_rate_at_1.0": 100.0 * sum(ep.score >= 1.0 for ep in episodes) / n}


def engine_policy(engine: Engine, settings: InferenceSettings, *,
                  turn_cache: bool = True) -> Callable[[list[Pending]], list[str]]:
    """The model's next action for every live episode of a batch, from one call: through the
    engine's ``generate_turns`` where it has one (it reuses each episode's earlier turns), unless
    ``turn_cache`` is off, else ``generate``."""
    play_id = object()  # these episodes, for an engine that keeps their turns' cache
    turns = getattr(engine, "generate_turns", None) if turn_cache else None

    def generate(batch: list[Pending], chosen: InferenceSettings) -> list[str]:
        prompts = [p.prompt for p in batch]
        if turns is not None:
            return turns([(play_id, p.episode.index) for p in batch], prompts, chosen)
        return engine.generate(prompts, chosen)

    def policy(batch: list[Pending]) -> list[str]:
        """One call per decoding in the batch (a format's follow-up requests decode otherwise)."""
        by_decoding: dict[tuple[tuple[str, Any], ...], list[int]] = {}
        for i, p in enumerate(batch):
            by_decoding.setdefault(p.decoding, []).append(i)
        out = [""] * len(batch)
        for decoding, where in by_decoding.items():
            chosen = dataclasses.replace(settings, **dict(decoding)) if decoding else settings
            for i, text in zip(where, generate([batch[i] for i in where], chosen), strict=True):
                out[i] = text
        return out

    return policy


def play_task(task: Task, engine: Engine, items: list[dict[str, Any]], settings: InferenceSettings, *,
              judge: dict[str, Any] | None = None, search: dict[str, Any] | None = None,
              store: dict[str, Any] | None = None,
              ended: Callable[[int], None] | None = None) -> tuple[list[ItemResult], dict[str, Any]]:
    """Per-episode results and the summary (score, games won, by kind, generate calls); a
    searching task's answers judged by the run's judge; ``ended(n)`` as n more episodes end."""
    spec = EnvSpec.from_table(task.env_table, data_dir=task_cache(task), search=search, store=store)
    fmt = episode_format(spec, settings, engine)

    policy = engine_policy(engine, settings)
    stats = PlayStats()
    count = getattr(engine, "prefill", None)
    before = (count.prompt_tokens, count.cached_tokens) if count is not None else None
    episodes = play([str(item["game"]) for item in items], spec.factory(), policy, fmt=fmt,
                    max_steps=spec.max_steps, pool_size=spec.pool_size, workers=spec.workers,
                    header_for=header_maker(task, spec, settings.prompt_template),
                    fits=context_check(engine, settings), stats=stats, ended=ended)
    judged: dict[str, Any] = {}
    extras: list[dict[str, Any]] = [{} for _ in episodes]
    if spec.kind == "search-qa":
        extras, judged = judge_episodes(task, episodes, items, judge, fmt, settings.answer_judge)
    if spec.kind == "webshop":
        judged = shopping_summary(episodes)
    summary = summarize(episodes) | {"generate_calls": stats.policy_calls, "largest_batch": stats.largest_batch}
    if count is not None and before is not None:  # what re-reading the growing transcripts cost the engine
        summary["prompt_tokens"] = count.prompt_tokens - before[0]
        summary["prefilled_tokens"] = summary["prompt_tokens"] - (count.cached_tokens - before[1])
    results = [episode_result(ep) for ep in episodes]
    for r, extra in zip(results, extras):
        r.extra.update(extra)
        if extra:
            r.extracted, r.gold = extra["answer"], str(extra["gold_answer"])
    return results, summary | judged
