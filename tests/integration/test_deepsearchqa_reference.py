"""DeepSearchQA under the ``reference`` prompt profile: AutoRL-Bench's loop and judge as they are.

The reference's ``_react_loop`` and ``_string_match`` (RD-Agent,
``rdagent/scenarios/rl/autorl_bench/benchmarks/deepsearchqa/eval.py``) are copied into this test
as the reference writes them, and a scripted model that honours stop strings as vLLM does plays
the same questions through both: the reference's loop one question at a time, our batched
runner with ``ReferenceSearchReActFormat``. Every transcript and every answer must be the same,
the forced answer, the refused placeholder and the steps running out included. The judge is a
real server process; the search is the offline BM25 corpus of test_deepsearchqa.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from support import local_server
from test_deepsearchqa import code_name, write_questions

from agent2rl_tui.envs import EnvSpec
from agent2rl_tui.envs.search import BM25Corpus, SearchQA
from agent2rl_tui.grader.episode_runner import Episode, Pending, ReferenceSearchReActFormat, play
from agent2rl_tui.grader.evaluators.episodes import episode_format, judge_episodes
from agent2rl_tui.judge import JudgeSettings
from agent2rl_tui.judge.verdict import judge_answers
from agent2rl_tui.tasks.registry import load_task

# -- the reference, copied ------------------------------------------------------------------------

REACT_SYSTEM_PROMPT = """You are a research assistant that answers questions by searching the web.

You must follow this format strictly:
Thought: [your reasoning]
Action: search[your search query]   <- to search the web
  OR
Action: answer[Paris]   <- to give final answer

Rules:
- Always start with a Thought
- Use search[] to find information
- Use answer[] ONLY when you have enough information
- For Set Answer questions, list all items separated by commas
- Be concise and factual
"""
STOPS = ["\nAction:", "\nThought:", "\nObservation:"]


def reference_loop(generate: Callable[[str, int, list[str]], str], search_fn: Callable[[str], str],
                   question: str, answer_type: str, max_steps: int = 6) -> tuple[str, str]:
    """The reference's ``_react_loop``, returning (answer, the prompt as it last stood)."""
    conversation = f"Question: {question}\n" f"Answer type: {answer_type}\n\n" "Thought:"
    full_prompt = f"{REACT_SYSTEM_PROMPT}\n\n{conversation}"
    model_trace = ""
    for _step in range(max_steps):
        generated = generate(full_prompt, 256, STOPS).strip()
        model_trace += ("\n" + generated) if model_trace else generated
        full_prompt += f" {generated}"
        action_match = re.search(r"Action:\s*(search|answer)\[(.+?)\]", generated, re.DOTALL)
        if not action_match:
            full_prompt += "\nAction: answer["
            generated2 = generate(full_prompt, 128, ["]"]).strip()
            model_trace += ("\n" + generated2) if generated2 else ""
            if generated2.strip().lower() == "your final answer":
                continue
            return generated2.strip(), full_prompt
        action_type = action_match.group(1)
        action_content = action_match.group(2).strip()
        if action_type == "answer":
            if action_content.lower() == "your final answer":
                full_prompt += "\nThat is not a valid answer. Please think again.\nThought:"
                continue
            return action_content, full_prompt
        observation = search_fn(action_content)
        full_prompt += f"\nObservation: {observation}\n" "Thought:"
    last_answer = re.findall(r"Action:\s*answer\[(.+?)\]", model_trace, re.DOTALL)
    real_answers = [a.strip() for a in last_answer if a.strip().lower() != "your final answer"]
    return (real_answers[-1] if real_answers else "I don't know"), full_prompt


def reference_string_match(predicted: str, gold: str, answer_type: str) -> bool:
    pred = predicted.strip().lower()
    gold = gold.strip().lower()
    if answer_type == "Single Answer":
        return gold in pred or pred in gold
    gold_items = [x.strip() for x in gold.split(",")]
    return all(item in pred for item in gold_items)


# -- a scripted model, the same for both ----------------------------------------------------------

def continuation(prompt: str) -> str:
    """What the model would write next, before any stop string: a behaviour per question (its
    project number mod 7) and per step (the transcript so far)."""
    project = int(re.search(r"project (\d+)", prompt).group(1))  # type: ignore[union-attr]
    step = prompt.count("Thought:") - REACT_SYSTEM_PROMPT.count("Thought:")
    seen = re.findall(r"code-named ([a-z]+-\d+)", prompt.split("Question:", 1)[1])
    forced = prompt.endswith("Action: answer[")
    kind = project % 7
    if forced:
        if kind == 3 and "your final answer" not in prompt.split("Question:", 1)[1]:
            return "your final answer] and more"  # the placeholder, refused
        if kind == 5:
            return "] nothing"  # an empty forced answer
        return f"{seen[0] if seen else 'no-idea'}] because the results say so\nThought: done"
    if kind == 0:  # the action on its own line: the reference's stop cuts it off
        return f" I should search.\nAction: search[project {project}]\nObservation: invented"
    if kind == 1:  # the action on the thought's line: a search, then an answer
        if not seen:
            return f" I will search. Action: search[code name of project {project}]\nThought: more"
        return f" The results say it. Action: answer[{seen[0]}]\nObservation: x"
    if kind == 2:  # the placeholder as an action, then a real answer
        if step == 1:
            return " Let me answer. Action: answer[your final answer]"
        return f" Searching. Action: search[project {project}]" if not seen else f" So. Action: answer[{seen[0]}]"
    if kind == 4:  # searches to the end, an answer only in passing
        return f" Action: search[project {project} step {step}] though Action: answer[guess-{step}] maybe"
    if kind == 6:  # never an action, a placeholder said in passing
        return " Hmm, Action: answer[your final answer"
    return " I know it.\nAction: answer[x]"  # kind 3 and 5: forced answers


def model(prompt: str, max_tokens: int, stop: list[str]) -> str:
    """``continuation`` cut at the first stop string, as vLLM stops (the stop string left out);
    ``max_tokens`` counted in words."""
    text = continuation(prompt)
    ends = [text.find(s) for s in stop if s in text]
    text = text[:min(ends)] if ends else text
    return " ".join(text.split(" ")[:max_tokens]) if len(text.split(" ")) > max_tokens else text


def policy(batch: list[Pending]) -> list[str]:
    """Our side: each live episode's completion, decoded as the profile (or the follow-up) says."""
    settings = load_task("deepsearchqa").settings_for("reference")
    out = []
    for p in batch:
        decoding = dict(p.decoding)
        out.append(model(p.prompt, decoding.get("max_new_tokens", settings.max_new_tokens),
                         list(decoding.get("stop", settings.stop))))
    return out


@pytest.fixture(scope="module")
def questions(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("dsqa-ref")
    _, corpus = write_questions(folder)
    rows = {f"eval:{i}": {"problem": f"What is the code name of project {i}?", "answer": f"x-{i}",
                          "answer_type": "Single Answer"} for i in range(14)}
    return {"corpus": BM25Corpus(corpus), "rows": rows}


def test_the_reference_profile_plays_every_question_as_the_references_loop(questions: dict) -> None:
    task = load_task("deepsearchqa")
    settings = task.settings_for("reference")
    assert settings.prompt_template == REACT_SYSTEM_PROMPT + "\n\n"  # the reference's system text, as it joins it
    assert list(settings.stop) == STOPS and settings.max_new_tokens == 256 and settings.temperature == 0.0
    assert task.raw["env"]["max_steps"] == 6 and task.raw["env"]["top_k"] == 3
    spec = EnvSpec.from_table(task.raw["env"])
    fmt = episode_format(spec, settings)
    assert isinstance(fmt, ReferenceSearchReActFormat)
    corpus: BM25Corpus = questions["corpus"]

    def search_fn(query: str) -> str:  # the reference's search tool: three snippets joined by " | "
        return " | ".join(h.snippet for h in corpus.search(query, 3)) or "No results found."

    games = list(questions["rows"])
    episodes = play(games, lambda: SearchQA(questions["rows"], corpus, 3), policy, fmt=fmt, max_steps=6,
                    pool_size=5)
    for game, ep in zip(games, episodes, strict=True):
        row = questions["rows"][game]
        answer, last_prompt = reference_loop(model, search_fn, row["problem"], row["answer_type"])
        assert ep.prompt == last_prompt, game
        assert fmt.answer_of(ep) == answer, game
    by_kind: dict[int, Episode] = {}
    for game, ep in zip(games, episodes):
        by_kind.setdefault(int(game.split(":")[1]) % 7, ep)  # projects 0-6
    # What each kind of behaviour came to, as the reference has it:
    assert fmt.answer_of(by_kind[0]) == "no-idea" and by_kind[0].steps == 1  # forced: the search was cut off
    assert fmt.answer_of(by_kind[1]) == code_name(1) and by_kind[1].steps == 2  # searched, then answered
    assert by_kind[2].steps == 3 and "That is not a valid answer. Please think again.\nThought:" in by_kind[2].prompt
    assert by_kind[3].turns[0].observation.startswith("That is not a valid answer")  # the forced placeholder:
    assert by_kind[3].steps == 2 and fmt.answer_of(by_kind[3]) == "no-idea"  # the next step goes on from "answer["
    assert (by_kind[4].end, fmt.answer_of(by_kind[4])) == ("step limit", "guess-6")
    assert fmt.answer_of(by_kind[5]) == "" and by_kind[5].end == "done"
    assert (by_kind[6].end, fmt.answer_of(by_kind[6])) == ("done", "no-idea")


def test_the_reference_judge_is_asked_as_the_reference_asks_and_falls_back_to_its_string_match(
        tmp_path: Path) -> None:
    log = tmp_path / "judge-requests.jsonl"
    judge, port = local_server.start("judge_server.py", tmp_path, "--log", str(log))
    triples = [("heron-7", "heron-7", "Single Answer"), ("amber-1", "heron-7", "Single Answer"),
               ("", "heron-7", "Single Answer"), ("I don't know", "a-1, b-2", "Set Answer")]
    try:
        settings = JudgeSettings(base_url=f"http://127.0.0.1:{port}/v1", model="local-judge", retries=0)
        verdicts, calls = judge_answers(triples, settings, style="reference")
    finally:
        judge.kill()
        judge.wait()
    assert [v.correct for v in verdicts] == [True, False, False, False] and calls == 4
    assert not any(v.fallback for v in verdicts)  # the empty answer is asked about too
    sent = [json.loads(line) for line in log.read_text().splitlines()]
    assert all(s["temperature"] == 0.5 and "max_tokens" not in s for s in sent) and len(sent) == 4
    # A judge that fails (here: nothing listens any more; tried 10 times, 1 s apart, as RD-Agent tries)
    # leaves the verdict to the reference's string match, under which an empty answer is correct.
    dead = JudgeSettings(base_url=f"http://127.0.0.1:{port}/v1", model="local-judge", retries=0, timeout_s=5)
    verdicts, calls = judge_answers(triples, dead, style="reference")
    assert [v.correct for v in verdicts] == [reference_string_match(*t) for t in triples] == [True, False, True, False]
    assert all(v.fallback and v.error for v in verdicts) and calls == 0
    # Ours: the empty answer is wrong without asking, and a dead judge is a failure, never a match.
    ours, _ = judge_answers(triples, dead)
    assert [v.correct for v in ours] == [False] * 4 and ours[2].error == "no answer"


@pytest.mark.parametrize("reply, correct, fallback", [("Correct.", True, False), ("correct, mostly", False, False),
                                                      ("incorrect", False, False), (" ", True, True)])
def test_the_reference_reads_the_first_line_of_the_verdict_and_an_empty_one_falls_back(
        tmp_path: Path, reply: str, correct: bool, fallback: bool) -> None:
    judge, port = local_server.start("judge_server.py", tmp_path, "--verdict-text", reply)
    try:
        settings = JudgeSettings(base_url=f"http://127.0.0.1:{port}/v1", model="local-judge", retries=0)
        [verdict], _ = judge_answers([("heron-7", "heron-7", "Single Answer")], settings, style="reference")
    finally:
        judge.kill()
        judge.wait()
    assert (verdict.correct, verdict.fallback) == (correct, fallback)


def test_judged_episodes_record_the_style_and_each_fallback(questions: dict, judge_server,
                                                            prepared_data: Path) -> None:
    task = load_task("deepsearchqa")
    fmt = episode_format(EnvSpec.from_table(task.raw["env"]), task.settings_for("reference"))
    games = ["eval:0", "eval:5"]  # a forced answer "no-idea" and an empty one
    episodes = play(games, lambda: SearchQA(questions["rows"], questions["corpus"], 3), policy, fmt=fmt, max_steps=6)
    items = [questions["rows"][g] for g in games]
    refusing = judge_server()  # it serves another model: every call fails at once (HTTP 404)
    extras, summary = judge_episodes(task, episodes, items, {"base_url": refusing.url, "model": "not-served"},
                                     fmt, "reference")
    assert [e["answer"] for e in extras] == ["no-idea", ""] and [ep.won for ep in episodes] == [False, True]
    assert all(e["judge_fallback"] == "string match" for e in extras) and summary["n_string_match"] == 2
    assert summary["judge"]["style"] == "reference" and summary["judge"]["prompt_version"].endswith("-reference")


def test_the_items_screen_says_when_the_string_match_decided(questions: dict, prepared_data: Path,
                                                             judge_server) -> None:
    from agent2rl_tui.grader.evaluators.episodes import episode_result
    from agent2rl_tui.review.episodes_view import episode_rows

    task = load_task("deepsearchqa")
    fmt = episode_format(EnvSpec.from_table(task.raw["env"]), task.settings_for("reference"))
    episodes = play(["eval:5"], lambda: SearchQA(questions["rows"], questions["corpus"], 3), policy, fmt=fmt,
                    max_steps=6)
    extras, _ = judge_episodes(task, episodes, [questions["rows"]["eval:5"]],
                               {"base_url": judge_server().url, "model": "not-served"}, fmt, "reference")
    item = episode_result(episodes[0])
    item.extra.update(extras[0])
    shown = {(r.label, r.text) for r in episode_rows(item)}
    assert ("answer", "(empty)") in shown and ("decided by", "string match (the judge failed)") in shown
