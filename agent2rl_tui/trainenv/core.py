"""The service's core: the agent's environments, each playing a train game turn by turn.

Everything a turn does is the grader's own code (``grader.episode_runner``: ``opening``, ``act``,
``advance``; ``grader.evaluators.episodes``: the transcript layout and the per-game header),
so an episode played here is the episode the grader would play with the same completions. Not
HTTP: ``server`` maps requests onto ``TrainEnvs`` and its ``Refusal``s onto 4xx answers. Every
call, refused or not, becomes a row for ``env_calls`` (``Recorder``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from agent2rl_tui.envs import EnvSpec
from agent2rl_tui.envs.base import EnvError, Environment, Outcome, Start
from agent2rl_tui.envs.search import SearchQA, SearchQASpec, backend_from, parse_action
from agent2rl_tui.grader.episode_runner import EpisodeFormat, Pending, act, advance, opening
from agent2rl_tui.grader.evaluators.episodes import episode_format, header_maker
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.record.writer import BackgroundWriter
from agent2rl_tui.tasks.registry import Task, load_task, task_cache
from agent2rl_tui.trainenv import DEFAULT_MAX_ENVS, default_max_envs, rewards

MAX_TEXT = 16_384
"""Characters of a completion or an action the service takes (a turn's completion is at most the
task's new tokens; a longer one is refused, not cut)."""
RECORDED_TEXT = 500
"""Characters of an action kept in ``env_calls``."""
REFUSALS_RECORDED = 10_000
"""Refused calls recorded one row each; past this, one in a hundred (a flood must not fill run.db)."""


class Refusal(Exception):
    """A call the service answers with a 4xx: its status, a code, and what to do instead."""

    def __init__(self, status: int, code: str, detail: str) -> None:
        super().__init__(detail)
        self.status, self.code, self.detail = status, code, detail


@dataclass(frozen=True)
class Limits:
    """What one run's agent may use of the service."""

    max_envs: int = DEFAULT_MAX_ENVS
    """Environments alive at once (an ALFWorld one is a process, a TextWorldExpress one a JVM's game)."""
    searches_per_minute: int = 60
    """Queries to the run's search backend (a paid API) per minute; more wait for the next minute (429)."""
    judge_calls: int = 1_000
    """Calls to the run's judge for ``judge`` rewards over the whole run; past it, 429."""


@dataclass
class Session:
    """One of the agent's environments and the episode it is playing."""

    env: Environment
    lock: threading.Lock = field(default_factory=threading.Lock)
    pending: Pending | None = None  # the live episode, waiting for its next completion
    game: str | None = None
    reward_mode: str | None = None
    gold: dict[str, Any] | None = None  # a searching task's train row (its answer)
    over: bool = False


class Recorder:
    """``env_calls`` rows written by a thread of their own, in batches (a rollout makes thousands;
    ``record.writer``)."""

    def __init__(self, db: Path) -> None:
        self.writer: BackgroundWriter[dict[str, Any]] = BackgroundWriter(
            db, lambda store, rows: store.add_env_calls(rows), name="env-calls", on_failure=_unrecorded)
        self.store = self.writer.store
        self.refused = 0

    def add(self, row: dict[str, Any]) -> None:
        if row["status"] >= 400:
            self.refused += 1
            if self.refused > REFUSALS_RECORDED and self.refused % 100:
                return
        self.writer.put(row)

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close(timeout=30)


def _unrecorded(rows: list[dict[str, Any]], exc: Exception) -> None:
    """A batch run.db would not take: the service goes on, its log says what was lost."""
    logging.getLogger("agent2rl.trainenv").error("could not record %d env call(s): %s", len(rows), exc)


class SearchBudget:
    """A run's searches: at most ``per_minute`` in any minute (a sliding window)."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self.times: list[float] = []
        self.lock = threading.Lock()

    def take(self) -> None:
        with self.lock:
            now = time.monotonic()
            self.times = [t for t in self.times if now - t < 60.0]
            if len(self.times) >= self.per_minute:
                wait = 60.0 - (now - self.times[0])
                raise Refusal(429, "search_rate_limited", f"this run may search {self.per_minute} times a minute; "
                              f"try this step again in {wait:.0f} s (the episode has not moved)")
            self.times.append(now)


class TrainEnvs:
    """The task's train games for one run's agent (thread-safe: one lock per environment)."""

    def __init__(self, task: Task, spec: EnvSpec, fmt: EpisodeFormat, header_for: Callable[[Start], str] | None,
                 make_env: Callable[[], Environment], train: dict[str, dict[str, Any]], recorder: Recorder,
                 *, limits: Limits | None = None, judge: Callable[[str, dict[str, Any]], tuple[float, int]] | None = None,
                 max_new_tokens: int = 0) -> None:
        self.task, self.spec, self.fmt, self.header_for = task, spec, fmt, header_for
        self.make_env, self.train, self.recorder = make_env, train, recorder
        self.limits = limits or Limits()
        self.judge = judge
        self.max_new_tokens = max_new_tokens
        self.sessions: dict[int, Session] = {}
        self.next_id = 1
        self.lock = threading.Lock()
        self.searches = SearchBudget(self.limits.searches_per_minute)
        self.judge_calls = 0

    # -- what the agent may play ------------------------------------------------------------
    def is_train_game(self, game: str) -> bool:
        """Only the train split's games: a train-fold seed outside it may be a test-fold game (the coin
        collector's ``train:20700`` is ``test:20700``), as the workspace's play kit knows too."""
        return game in self.train

    def describe(self) -> dict[str, Any]:
        return {"task": self.task.name, "kind": self.spec.kind, "max_steps": self.spec.max_steps,
                "max_new_tokens": self.max_new_tokens, "games": list(self.train),
                "reward_modes": list(rewards.MODES) if self.spec.kind == "search-qa" else [],
                "max_envs": self.limits.max_envs, "searches_per_minute": self.limits.searches_per_minute,
                "judge_calls_left": max(0, self.limits.judge_calls - self.judge_calls) if self.judge else 0}

    # -- the protocol -----------------------------------------------------------------------
    def create(self) -> int:
        with self.lock:
            if len(self.sessions) >= self.limits.max_envs:
                raise Refusal(429, "too_many_envs", f"at most {self.limits.max_envs} environments at once; "
                              "close one (DELETE /envs/N) and create another")
            env_id = self.next_id
            self.next_id += 1
            self.sessions[env_id] = None  # type: ignore[assignment]  # held while the environment is made
        try:
            env = self.make_env()
        except (EnvError, OSError) as exc:
            with self.lock:
                del self.sessions[env_id]
            raise Refusal(503, "env_unavailable", f"the environment could not be made: {exc}") from exc
        with self.lock:
            self.sessions[env_id] = Session(env)
        return env_id

    def session(self, env_id: int) -> Session:
        s = self.sessions.get(env_id)
        if s is None:
            raise Refusal(404, "no_such_env", f"there is no environment {env_id}; POST /envs makes one")
        return s

    def reset(self, env_id: int, game: str, reward: str | None = None) -> dict[str, Any]:
        if not self.is_train_game(game):
            raise Refusal(403, "not_a_train_game", f"{game[:80]!r} is not a game of the train split: this service "
                          "plays the train split only (GET /games lists it); the grader's games are not for training")
        if self.spec.kind == "search-qa":
            reward = reward or rewards.EXACT
            if reward not in rewards.MODES:
                raise Refusal(400, "invalid_reward", f"reward must be one of {', '.join(rewards.MODES)}")
            if reward == rewards.JUDGE and self.judge is None:
                raise Refusal(400, "no_judge", "this run names no judge; use reward 'exact' or 'f1'")
        elif reward is not None:
            raise Refusal(400, "invalid_reward", "only a searching task takes a reward mode; the game's own reward stands")
        s = self.session(env_id)
        with s.lock:
            try:
                start = s.env.reset(game)
            except EnvError as exc:
                raise Refusal(502, "env_error", f"the environment could not start {game}: {exc}") from exc
            s.pending, s.game, s.reward_mode, s.over = opening(start, 0, game, self.fmt, self.header_for), game, reward, False
            s.gold = self.train.get(game)
            return {"env_id": env_id, "game": game, "goal": start.goal, "observation": start.observation,
                    "admissible": start.admissible, "prompt": s.pending.prompt, "step": 0,
                    "max_steps": self.spec.max_steps, "reward_mode": reward}

    def step(self, env_id: int, completion: str | None = None, action: str | None = None) -> dict[str, Any]:
        text = completion if completion is not None else action
        if text is None or (completion is not None and action is not None):
            raise Refusal(400, "invalid_step", 'give {"completion": TEXT} (the model\'s whole completion) or '
                          '{"action": TEXT}')
        if len(text) > MAX_TEXT:
            raise Refusal(413, "too_long", f"a completion or action is at most {MAX_TEXT:,} characters")
        s = self.session(env_id)
        with s.lock:
            if s.pending is None:
                raise Refusal(409, "no_episode", "the episode is over (or never began): reset the environment to a "
                              "train game first" if s.over else "reset the environment to a train game first")
            if completion is not None:
                again = self.fmt.follow_up(s.pending, completion)
                if again is not None:  # the same step, asked again (the reference's forced answer)
                    s.pending = again
                    return self._follow_up_answer(env_id, s, again)
                text = completion = s.pending.said + completion
            chosen = self.fmt.action_from(text) if completion is not None else text.strip()
            searched, judged = self._check_costs(s, chosen)  # refused here, the episode has not moved
            try:
                outcome = act(s.env, s.pending, chosen, self.fmt)
            except EnvError as exc:
                raise Refusal(502, "env_error", f"the environment failed on this action: {exc}") from exc
            judge_calls = 0
            if self.spec.kind == "search-qa" and outcome.done:
                outcome, judge_calls = self._reward(s, chosen, outcome, judged)
            pending = s.pending
            following = advance(pending, completion if completion is not None else f" {chosen}", chosen, outcome,
                                self.fmt, self.spec.max_steps)
            episode = pending.episode
            s.pending = following
            s.over = following is None
            turn = episode.turns[-1]
            return {"env_id": env_id, "game": s.game, "action": chosen, "observation": turn.observation,
                    "reward": outcome.reward, "done": following is None, "won": episode.won, "score": episode.score,
                    "step": episode.steps, "end": episode.end or None,
                    "prompt": following.prompt if following is not None else episode.prompt,
                    "admissible": following.admissible if following is not None else None,
                    "searched": searched, "judge_calls": judge_calls}

    def _follow_up_answer(self, env_id: int, s: Session, again: Pending) -> dict[str, Any]:
        """A completion that is not yet a turn: the same step's next prompt and how to decode it."""
        episode = again.episode
        decoding = dict(again.decoding)
        if "stop" in decoding:
            decoding["stop"] = list(decoding["stop"])
        return {"env_id": env_id, "game": s.game, "action": None, "observation": "", "reward": 0.0, "done": False,
                "won": episode.won, "score": episode.score, "step": episode.steps, "end": None,
                "prompt": again.prompt, "admissible": again.admissible, "searched": False, "judge_calls": 0,
                "follow_up": decoding}

    def close(self, env_id: int) -> None:
        s = self.session(env_id)
        with self.lock:
            self.sessions.pop(env_id, None)
        with s.lock:
            s.env.close()

    def close_all(self) -> None:
        for env_id in list(self.sessions):
            try:
                self.close(env_id)
            except Refusal:
                pass

    # -- searching tasks --------------------------------------------------------------------
    def _check_costs(self, s: Session, action: str) -> tuple[bool, bool]:
        """(a search, a judged answer): each costs the run's budget for it, taken before the
        action is played; past a budget the step is refused and the episode does not move."""
        if self.spec.kind != "search-qa":
            return False, False
        parsed = parse_action(action)
        if parsed is None:
            return False, False
        if parsed[0] == "search":
            self.searches.take()
            return True, False
        if s.reward_mode != rewards.JUDGE or self.judge is None:
            return False, False
        with self.lock:
            if self.judge_calls >= self.limits.judge_calls:
                raise Refusal(429, "judge_calls_spent", f"this run's {self.limits.judge_calls} judge calls for "
                              "rewards are spent; reset with reward 'exact' or 'f1'")
            self.judge_calls += 1
        return False, True

    def _reward(self, s: Session, action: str, outcome: Outcome, judged: bool) -> tuple[Outcome, int]:
        """The answer's reward by the mode chosen at reset, against the train question's gold."""
        parsed = parse_action(action)
        answer = parsed[1] if parsed and parsed[0] == "answer" else ""
        gold = str((s.gold or {}).get("answer", ""))
        calls = 0
        if judged and self.judge is not None:
            value, calls = self.judge(answer, s.gold or {})
        elif s.reward_mode == rewards.F1:
            value = rewards.token_f1(answer, gold)
        else:
            value = rewards.exact_match(answer, gold)
        return Outcome(observation=outcome.observation, reward=value, done=True, won=value >= 1.0, score=value,
                       admissible=outcome.admissible), calls


def load_train(task: Task) -> dict[str, dict[str, Any]]:
    """The train split by game id (a searching task's rows carry their gold answers)."""
    return {str(row["game"]): row for row in task.load_split("train")}


def build(run_dir: Path, recorder: Recorder, limits: dict[str, int] | None = None) -> TrainEnvs:
    """The service of the run in ``run_dir``: its task, prompt profile, search backend, store and
    judge; ``limits`` over the defaults (``Limits``; environments at once by the task's pool)."""
    with RunStore.of_run(run_dir) as store:
        run = store.run()
    cfg = run.config
    task = load_task(cfg.task_folder)
    settings = task.settings_for(cfg.prompt_profile)
    spec = EnvSpec.from_table(task.env_table, data_dir=task_cache(task), search=cfg.search,
                              store=cfg.webshop)
    train = load_train(task)
    engine = None
    if spec.kind == "webshop":  # a chat prompt, rendered with the base model's template as the grader does
        engine = TemplateRenderer(run_dir / "workspace" / "models" / run.base_model)
    fmt = episode_format(spec, settings, engine)
    make_env: Callable[[], Environment]
    if isinstance(spec, SearchQASpec):  # the train questions only: an eval question is not even loaded
        make_env = partial(SearchQA, train, backend_from(spec.search or {}), spec.top_k)
    else:
        make_env = spec.factory()
    judge = judge_reward(task, cfg.judge) if cfg.judge and spec.kind == "search-qa" else None
    chosen = Limits(**{"max_envs": default_max_envs(spec.pool_size), **(limits or {})})
    return TrainEnvs(task, spec, fmt, header_maker(task, spec, settings.prompt_template), make_env, train, recorder,
                     limits=chosen, judge=judge, max_new_tokens=settings.max_new_tokens)


class TemplateRenderer:
    """The base model's chat template, as the grader's engine renders it (``render_chat``)."""

    def __init__(self, model_dir: Path) -> None:
        from agent2rl_tui.tasks.modelfiles import load_tokenizer

        self.tokenizer = load_tokenizer(model_dir)

    def render(self, messages: list[dict[str, str]], *, require_template: bool = False) -> str:
        from agent2rl_tui.grader.engines.base import render_chat

        return render_chat(self.tokenizer, messages, require_template)


def judge_reward(task: Task, judge: dict[str, Any]) -> Callable[[str, dict[str, Any]], tuple[float, int]]:
    """A ``judge`` reward: the run's judge on one train answer (cached as the grader caches its verdicts)."""
    from agent2rl_tui.judge import JudgeSettings
    from agent2rl_tui.judge.verdict import judge_answers

    settings = JudgeSettings.for_task(task.judge, judge, modes=False)
    cache = task_cache(task) / "judge-cache.sqlite"

    def reward(answer: str, row: dict[str, Any]) -> tuple[float, int]:
        (verdict,), calls = judge_answers([(answer or None, str(row.get("answer", "")),
                                            str(row.get("answer_type") or "Single Answer"))], settings, cache)
        return (1.0 if verdict.correct else 0.0), calls

    return reward
