"""Playing interactive games in batches: the Level-3 episode runner.

Every live episode's next action comes from one policy call (for a model: one ``generate``
over all their prompts), so a submission costs about as many generate calls as its longest
episode has steps, not the sum over games. Episodes run in a pool of environment instances
(environments are not thread-safe and some cost a JVM each); when an episode ends its
instance starts the next waiting game at once, so the batch stays full.

The prompt is a growing transcript in the task's ``EpisodeFormat``: a header, the first
observation, then one ``" {action}\\n{observation}\\n>"`` per turn (the ReAct layout that
ALFWorld's reference evaluation uses; ``ReActFormat`` is its exact form, docs/grading.md
section C). The model's completion is cut to its first line to give the action. Everything
an episode saw and did is kept, for evals/<n>/ and the TUI.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from typing import Any

from agent2rl_tui.envs.base import Environment, Outcome, Start
from agent2rl_tui.envs.search import ACTION, parse_action
from agent2rl_tui.envs.webshop import clean_action


@dataclass(frozen=True)
class EpisodeFormat:
    """How an episode is shown to the model, turn by turn."""

    header: str = "Your task: {goal}\n"
    think_prefix: str | None = None  # actions starting so are thoughts: not sent to the game, answered think_reply
    think_reply: str = "OK."

    def goal_shown(self, start: Start) -> str:
        """The goal as the prompt states it, kept as the episode's goal."""
        return start.goal

    def first_prompt(self, start: Start, header: str | None = None) -> str:
        """The header (``header`` as given, else ``self.header`` filled with the goal), then
        the first observation."""
        text = header if header is not None else self.header.format(goal=start.goal)
        return f"{text}{start.observation.strip()}\n>"

    def next_turn(self, action: str, observation: str, completion: str = "") -> str:
        return f" {action}\n{observation.strip()}\n>"

    def action_from(self, completion: str) -> str:
        """The first line of the completion, trimmed (what a ReAct agent sends to the game)."""
        return completion.strip().split("\n", 1)[0].strip()

    def is_thought(self, action: str) -> bool:
        return self.think_prefix is not None and action.startswith(self.think_prefix)

    def shown_observation(self, action: str, observation: str) -> str:
        return self.think_reply if self.is_thought(action) else observation

    def after_turn(self, previous: str, episode: Episode, admissible: list[str] | None) -> str:
        """The prompt after the episode's latest turn: the transcript grows by that turn."""
        last = episode.turns[-1]
        return previous + self.next_turn(last.action, last.observation, last.completion)

    def follow_up(self, pending: Pending, completion: str) -> Pending | None:
        """Where a completion is not yet a turn, the same step's next request (its prompt, its
        decoding, what was said so far); else None: the completion is the turn's."""
        return None

    def local_outcome(self, action: str, pending: Pending) -> Outcome | None:
        """An action the format answers itself, never sent to the game (a thought); else None."""
        if self.is_thought(action):
            ep = pending.episode
            return Outcome(observation=self.think_reply, reward=0.0, done=False, won=ep.won, score=ep.score,
                           admissible=pending.admissible)
        return None

    def answer_of(self, episode: Episode) -> str | None:
        """The answer a searching episode ended with (``answer[...]``), if it gave one."""
        parsed = parse_action(episode.turns[-1].action) if episode.turns else None
        return parsed[1] if parsed and parsed[0] == "answer" else None


@dataclass(frozen=True)
class ReActFormat(EpisodeFormat):
    """ReAct's ALFWorld transcript, as ReAct's notebook and AutoRL-Bench's evaluation write it.

    The first observation loses its first paragraph (TextWorld's welcome banner) and its
    other paragraphs are joined by single newlines; observations are shown as the game gave
    them, untrimmed, less a leading ``"You arrive at loc N. "`` (ReAct's ``process_ob``; the
    games of alfworld 0.4 no longer say it); the header comes whole from ``header_for``.
    """

    def first_prompt(self, start: Start, header: str | None = None) -> str:
        text = header if header is not None else self.header.format(goal=start.goal)
        return text + "\n".join(start.observation.split("\n\n")[1:]) + "\n>"

    def next_turn(self, action: str, observation: str, completion: str = "") -> str:
        return f" {action}\n{observation}\n>"

    def shown_observation(self, action: str, observation: str) -> str:
        if observation.startswith("You arrive at loc "):
            observation = observation[observation.find(". ") + 2:]
        return super().shown_observation(action, observation)


@dataclass(frozen=True)
class SearchReActFormat(EpisodeFormat):
    """DeepSearchQA's ReAct transcript as AutoRL-Bench writes it: the header (its system text),
    ``Question: …\nAnswer type: …\n\nThought:``, then per turn `` {completion}\nObservation:
    {observation}\nThought:``. The model writes its thought and an ``Action: search[…]`` or
    ``Action: answer[…]`` line; the action is read from anywhere in the completion, and the
    completion is kept up to that action. The stop string is ``\nObservation:`` (a model that
    starts inventing results is cut there), never ``\nAction:``, which would cut off the very
    line that holds the action (the reference's stop list does, so its searches never run).
    """

    def first_prompt(self, start: Start, header: str | None = None) -> str:
        text = header if header is not None else self.header.format(goal=start.goal)
        return f"{text}{start.observation}\n\nThought:"

    def action_from(self, completion: str) -> str:
        parsed = parse_action(completion)
        return f"{parsed[0]}[{parsed[1]}]" if parsed else completion.strip()

    def next_turn(self, action: str, observation: str, completion: str = "") -> str:
        found = ACTION.search(completion)
        said = (completion[:found.end()] if found else completion).strip()
        return f" {said}\nObservation: {observation}\nThought:"


FORCED_ANSWER = "\nAction: answer["
"""What the reference appends when a step's completion holds no action, to make the model answer."""
FORCED_DECODING: tuple[tuple[str, Any], ...] = (("temperature", 0.0), ("max_new_tokens", 128), ("stop", ("]",)))
"""The reference's decoding of that forced answer: greedy, 128 tokens, stop at ``]``."""
PLACEHOLDER = "your final answer"
REJECTED = "That is not a valid answer. Please think again."
NO_ANSWER = "I don't know"


@dataclass(frozen=True)
class ReferenceSearchReActFormat(SearchReActFormat):
    """AutoRL-Bench's DeepSearchQA loop as it is (``benchmarks/deepsearchqa/eval.py``,
    ``_react_loop``), its quirks kept: the ``reference`` prompt profile.

    Each step's completion (stripped) is appended whole after a space. Its action is read with
    ``Action:\\s*(search|answer)\\[(.+?)\\]`` from that completion only. Under the reference's
    stop strings (``\\nAction:`` among them) a completion rarely holds an action, so most steps
    end in the *forced answer*: ``\\nAction: answer[`` is appended and a second completion
    (greedy, 128 tokens, stop ``]``) is the answer, whatever it is, the empty string included.
    The placeholder "your final answer" is refused: said as an action, the transcript gets
    "That is not a valid answer. Please think again.\\nThought:"; as a forced answer, the step
    just ends with the transcript left at ``answer[``. A search is answered ``\\nObservation:
    <snippets>\\nThought:``. When the steps run out, the answer is the last ``Action:
    answer[…]`` (not the placeholder) in the model's own text, else "I don't know".
    """

    def action_from(self, completion: str) -> str:
        if FORCED_ANSWER in completion:
            return f"answer[{completion.split(FORCED_ANSWER, 1)[1].strip()}]"
        found = ACTION.search(completion.strip())
        return f"{found.group(1)}[{found.group(2).strip()}]" if found else completion.strip()

    def follow_up(self, pending: Pending, completion: str) -> Pending | None:
        if pending.said or ACTION.search(completion.strip()):
            return None
        said = completion.strip()
        return Pending(pending.episode, f"{pending.prompt} {said}{FORCED_ANSWER}", pending.admissible,
                       decoding=FORCED_DECODING, said=said + FORCED_ANSWER)

    def local_outcome(self, action: str, pending: Pending) -> Outcome | None:
        if not (action.startswith("answer[") and action.endswith("]")):
            return None  # a search: the game's
        answer, ep = action[len("answer["):-1], pending.episode
        if answer.strip().lower() == PLACEHOLDER:
            return Outcome(observation=REJECTED, reward=0.0, done=False, won=False, score=0.0)
        return Outcome(observation=f"Your answer: {answer}", reward=0.0, done=True, won=ep.won, score=ep.score)

    def after_turn(self, previous: str, episode: Episode, admissible: list[str] | None) -> str:
        last = episode.turns[-1]
        if FORCED_ANSWER in last.completion:  # ``previous`` already ends with the forced "answer[", and stays
            return previous
        said = last.completion.strip()
        if last.observation == REJECTED:
            return f"{previous} {said}\n{REJECTED}\nThought:"
        if last.action.startswith("answer["):
            return f"{previous} {said}"
        return f"{previous} {said}\nObservation: {last.observation}\nThought:"

    def answer_of(self, episode: Episode) -> str | None:
        if episode.end == "done" and episode.turns and episode.turns[-1].action.startswith("answer["):
            return episode.turns[-1].action[len("answer["):-1]
        trace = ""
        for turn in episode.turns:
            said, forced, rest = turn.completion.partition(FORCED_ANSWER)
            said = said.strip()
            trace += ("\n" + said) if trace else said
            if forced and rest.strip():
                trace += "\n" + rest.strip()
        answers = [a.strip() for a in re.findall(r"Action:\s*answer\[(.+?)\]", trace, re.S)]
        real = [a for a in answers if a.lower() != PLACEHOLDER]
        return real[-1] if real else NO_ANSWER


WEBSHOP_SYSTEM = ("You are a helpful shopping assistant browsing an e-commerce website. Given a user instruction, "
                  "current observation, and available actions, pick the best action to find and purchase a matching "
                  "product. Output ONLY one action (e.g., 'search[red shoes]', 'click[buy now]') with NO extra text, "
                  "NO explanation.")
WEBSHOP_HEAD = """You are shopping on an e-commerce website. Find and purchase a product matching the user's instruction.

Instruction: {instruction}

Available actions:
{available_actions}

Rules:
- Output ONLY one action from the available actions list above.
- For search, use: search[your query]
- For clicking, use: click[exact text from the list]
- Do NOT output anything other than the action.

Now it's your turn:
"""


@dataclass(frozen=True)
class WebShopFormat(EpisodeFormat):
    """WebShop's prompt as AutoRL-Bench builds it, rebuilt every turn: a system message and one
    user message with the instruction, the page's available actions, the last ``window``
    turns and the current observation, through the model's chat template (``render``).

    The reference pairs each action with the observation that *followed* it, written first:
    ``Observation k: <after action k>`` then ``Action k: <action k>``, so the latest observation
    appears twice and the first one not at all once a turn is made; kept as it is, since the
    score must be the reference's measurement (docs/grading.md, G).

    ``given_instruction``: the instruction as WebShop gives it, its own ``Instruction:`` prefix
    kept, so the prompt reads ``Instruction: Instruction: …`` as the reference's does (the
    ``reference`` prompt profile); else without it (ours).
    """

    window: int = 5
    render: Callable[[list[dict[str, str]]], str] | None = None
    given_instruction: bool = False

    def goal_shown(self, start: Start) -> str:
        return str(start.info.get("instruction_text", start.goal)) if self.given_instruction else start.goal

    def user_text(self, goal: str, history: list[Turn], observation: str, admissible: list[str] | None) -> str:
        text = WEBSHOP_HEAD.format(instruction=goal, available_actions="\n".join(f"  {a}" for a in admissible or []))
        recent = history[-self.window:]
        offset = len(history) - len(recent)
        for i, turn in enumerate(recent):
            text += f"\nObservation {offset + i + 1}: {turn.observation}\n"
            text += f"Action {offset + i + 1}: {turn.action}\n"
        return text + f"\nObservation {len(history) + 1}: {observation}\nAction {len(history) + 1}:"

    def _chat(self, user: str) -> str:
        messages = [{"role": "system", "content": WEBSHOP_SYSTEM}, {"role": "user", "content": user}]
        return self.render(messages) if self.render else f"{WEBSHOP_SYSTEM}\n\n{user}"

    def first_prompt(self, start: Start, header: str | None = None) -> str:
        return self._chat(self.user_text(self.goal_shown(start), [], start.observation, start.admissible))

    def action_from(self, completion: str) -> str:
        """The completion's first line, cleaned as the reference cleans it (``Action:`` dropped,
        ``choose[`` read as ``click[``): the action played and the one the history shows."""
        return clean_action(completion.strip().split("\n", 1)[0])

    def after_turn(self, previous: str, episode: Episode, admissible: list[str] | None) -> str:
        last = episode.turns[-1]
        return self._chat(self.user_text(episode.goal, episode.turns, last.observation, admissible))


@dataclass
class Turn:
    action: str
    observation: str  # as shown to the model
    reward: float
    completion: str  # the model's raw text, before the action was cut from it


@dataclass
class Episode:
    """One game played to its end."""

    index: int
    game: str
    goal: str
    first_observation: str
    kind: str | None = None
    turns: list[Turn] = field(default_factory=list)
    won: bool = False
    score: float = 0.0
    end: str = ""  # "won", "done" (the game ended without a win), "step limit", "context full"
    prompt: str = ""  # the full transcript as the model last saw it

    @property
    def steps(self) -> int:
        return len(self.turns)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"steps": self.steps}


@dataclass(frozen=True)
class Pending:
    """A live episode waiting for its next action: what a policy is asked about."""

    episode: Episode
    prompt: str
    admissible: list[str] | None
    decoding: tuple[tuple[str, Any], ...] = ()
    """Decoding settings over the profile's for this completion (a format's follow-up request)."""
    said: str = ""
    """The step's text so far, when the format asked again before the step became a turn."""


def opening(start: Start, index: int, game: str, fmt: EpisodeFormat,
            header_for: Callable[[Start], str] | None = None) -> Pending:
    """A game just reset: its episode and the first prompt. The grader's runner and the agent's
    train-environment service (``trainenv``) both open every episode here."""
    ep = Episode(index=index, game=game, goal=fmt.goal_shown(start), first_observation=start.observation,
                 kind=start.info.get("kind"))
    return Pending(ep, fmt.first_prompt(start, header_for(start) if header_for else None), start.admissible)


def act(env: Environment, pending: Pending, action: str, fmt: EpisodeFormat) -> Outcome:
    """The game's answer to ``action``; one the format answers itself (a thought) is not sent to the game."""
    local = fmt.local_outcome(action, pending)
    return local if local is not None else env.step(action)


def advance(pending: Pending, completion: str, action: str, outcome: Outcome, fmt: EpisodeFormat,
            max_steps: int) -> Pending | None:
    """The turn played: recorded in the episode, the next prompt made; None when the episode is
    over (won, the game done, or the step limit), its ``end`` and last ``prompt`` then set."""
    ep = pending.episode
    shown = fmt.shown_observation(action, outcome.observation)
    ep.turns.append(Turn(action, shown, outcome.reward, completion))
    ep.score, ep.won = outcome.score, outcome.won
    prompt = fmt.after_turn(pending.prompt, ep, outcome.admissible)
    if outcome.won or outcome.done or ep.steps >= max_steps:
        ep.end = "won" if outcome.won else "done" if outcome.done else "step limit"
        ep.prompt = prompt
        return None
    return Pending(ep, prompt, outcome.admissible)


Policy = Callable[[list[Pending]], list[str]]
"""Completions for a batch of live episodes, in order (a model: one generate call)."""


@dataclass
class PlayStats:
    policy_calls: int = 0
    largest_batch: int = 0


def play(games: Iterable[str], make_env: Callable[[], Environment], policy: Policy, *,
         fmt: EpisodeFormat | None = None, max_steps: int = 50, pool_size: int = 16,
         header_for: Callable[[Start], str] | None = None, fits: Callable[[str], bool] | None = None,
         stats: PlayStats | None = None, workers: int = 1,
         ended: Callable[[int], None] | None = None) -> list[Episode]:
    """Play every game once; the episodes come back in the order of ``games``; ``ended(n)`` is told
    as n more episodes end (the eval worker's progress).

    ``header_for`` gives a game's whole header (used as it is, never ``format``-ed), for
    tasks whose header depends on the game (ALFWorld's few-shot examples of its kind).

    ``fits`` says whether a prompt still fits the model's context: an episode whose
    transcript outgrew it ends there as lost ("context full"), never silently truncated.

    ``workers`` > 1 makes, resets and steps up to that many environments at once (threads):
    for environments whose calls wait on their own process (``envs.subproc``). The
    episodes are the same as with one.
    """
    fmt = fmt or EpisodeFormat()
    queue = list(enumerate(games))
    queue.reverse()  # pop() takes the next game in order
    episodes: dict[int, Episode] = {}
    envs: list[Environment] = []
    live: list[tuple[Environment, Pending]] = []
    stats = stats if stats is not None else PlayStats()
    threads = ThreadPoolExecutor(workers) if workers > 1 else None

    def each(fn: Callable[[Any], Any], args: Iterable[Any]) -> list[Any]:
        """``fn`` over ``args``, in order; at once with threads (every call ends before an error is raised)."""
        if threads is None:
            return [fn(a) for a in args]
        futures = [threads.submit(fn, a) for a in args]
        wait(futures)
        return [f.result() for f in futures]

    def start_next(free: list[Environment]) -> None:
        """Each freed environment starts the next waiting game, in order, while games wait."""
        jobs = [(env, *queue.pop()) for env in free[:len(queue)]]
        starts = each(lambda job: job[0].reset(job[2]), jobs)
        for (env, index, game), start in zip(jobs, starts, strict=True):
            pending = opening(start, index, game, fmt, header_for)
            episodes[index] = pending.episode
            live.append((env, pending))

    def make(_: int) -> Environment | BaseException:
        try:
            return make_env()
        except BaseException as exc:  # noqa: BLE001 - raised below, once every maker has ended
            return exc

    try:
        made = each(make, range(min(pool_size, len(queue))))
        envs.extend(e for e in made if not isinstance(e, BaseException))
        failed = [e for e in made if isinstance(e, BaseException)]
        if failed:
            raise failed[0]
        start_next(envs)
        while live:
            if fits is not None:
                verdicts = [fits(p.prompt) for _, p in live]
                full = [slot for slot, ok in zip(live, verdicts, strict=True) if not ok]
                live = [slot for slot, ok in zip(live, verdicts, strict=True) if ok]
                for _, p in full:
                    p.episode.end, p.episode.prompt = "context full", p.prompt
                if full and ended is not None:
                    ended(len(full))
                start_next([env for env, _ in full])
                if not live:
                    continue
            completions = policy([pending for _, pending in live])
            stats.policy_calls += 1
            stats.largest_batch = max(stats.largest_batch, len(live))
            if len(completions) != len(live):
                raise ValueError(f"the policy gave {len(completions)} completions for {len(live)} episodes")
            still: list[tuple[Environment, Pending]] = []
            turning: list[tuple[tuple[Environment, Pending], str]] = []
            for (env, pending), completion in zip(live, completions, strict=True):
                again = fmt.follow_up(pending, completion)
                if again is not None:
                    still.append((env, again))  # the same step, asked again before it is a turn
                else:
                    turning.append(((env, pending), pending.said + completion))
            live = [slot for slot, _ in turning]
            completions = [completion for _, completion in turning]
            actions = [fmt.action_from(c) for c in completions]
            outcomes = each(lambda slot_action: act(slot_action[0][0], slot_action[0][1], slot_action[1], fmt),
                            zip(live, actions, strict=True))
            freed: list[Environment] = []
            for (env, pending), completion, action, outcome in zip(live, completions, actions, outcomes, strict=True):
                following = advance(pending, completion, action, outcome, fmt, max_steps)
                if following is None:
                    freed.append(env)
                else:
                    still.append((env, following))
            live = still
            if freed and ended is not None:
                ended(len(freed))
            start_next(freed)
    finally:
        each(lambda env: env.close(), envs)
        if threads is not None:
            threads.shutdown()
    return [episodes[i] for i in sorted(episodes)]


def summarize(episodes: list[Episode]) -> dict[str, Any]:
    """Score = 100 × games won / games, with the same by kind of game where games have one."""
    def pct(eps: list[Episode]) -> float:
        return 100.0 * sum(e.won for e in eps) / len(eps) if eps else 0.0

    kinds = sorted({e.kind for e in episodes if e.kind})
    return {
        "score": pct(episodes),
        "games": len(episodes),
        "won": sum(e.won for e in episodes),
        "mean_steps": sum(e.steps for e in episodes) / len(episodes) if episodes else 0.0,
        "by_kind": {k: {"games": len(g), "won": sum(e.won for e in g), "score": pct(g)}
                    for k in kinds for g in [[e for e in episodes if e.kind == k]]},
    }
