"""Answering questions by searching (DeepSearchQA) as an ``Environment``: the search tool of a ReAct loop.

A game is a question's id in the task's data (``eval:17``, ``train:3``); the agent sees the
question and its answer type. An action is ``search[query]``, answered with the top results
of the search backend as one observation, or ``answer[text]``, which ends the episode.
Whether the answer is right is not the environment's business: the grader's judge decides it
after the episode (``grader.evaluators.episodes``), so the environment only searches.

Backends are pluggable: ``HTTPSearch``, a web search API answering SerpAPI-shaped JSON
(``organic_results`` with ``title``, ``snippet``, ``link``; its key from an environment
variable the run names), or ``BM25Corpus``, a local JSONL corpus ranked with BM25, for
offline use.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import re
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Protocol

from agent2rl_tui.envs.base import EnvError, Environment, Outcome, Start
from agent2rl_tui.envs.spec import GIVEN, EnvSpec, register

ACTION = re.compile(r"Action:\s*(search|answer)\[(.+?)\]", re.S)
"""An action as the ReAct prompt asks for it, anywhere in the model's completion (the first one counts)."""
INVALID = ("Invalid action. Write one line 'Action: search[your query]' to search, or "
           "'Action: answer[your answer]' to answer.")
NO_RESULTS = "No results found."


@dataclass(frozen=True, kw_only=True)
class SearchQASpec(EnvSpec):
    """``[env]`` of kind ``search-qa``: how many results a search shows; the backend is the run's."""

    kind: ClassVar[str] = "search-qa"
    top_k: int = 3
    """Search results shown per query."""
    search: dict[str, Any] | None = field(default=None, metadata=GIVEN)
    """The run's search backend (``backend_from``)."""


@dataclass(frozen=True)
class Hit:
    title: str
    snippet: str
    url: str = ""


class SearchBackend(Protocol):
    def search(self, query: str, k: int) -> list[Hit]:
        ...


def parse_action(text: str) -> tuple[str, str] | None:
    """``("search", query)`` or ``("answer", text)`` from a completion or an action, else None."""
    found = ACTION.search(text)
    if found is None:
        bare = re.match(r"\s*(search|answer)\[(.+?)\]\s*$", text, re.S)  # an action given as is
        if bare is None:
            return None
        found = bare
    return found.group(1), found.group(2).strip()


class HTTPSearch:
    """A web search API: ``GET url?q=QUERY&num=K`` with the key as ``api_key`` (SerpAPI's
    convention) and as a Bearer header; SerpAPI-shaped JSON back."""

    def __init__(self, url: str, key_env: str | None = None, timeout_s: float = 15.0,
                 env: Mapping[str, str] | None = None) -> None:
        self.url, self.timeout_s = url, timeout_s
        self.key = None
        if key_env:
            self.key = (os.environ if env is None else env).get(key_env)
            if not self.key:
                raise EnvError(f"the search key variable {key_env} is not set in the grader's environment")

    def search(self, query: str, k: int) -> list[Hit]:
        params = {"q": query, "num": k, **({"api_key": self.key} if self.key else {})}
        request = urllib.request.Request(f"{self.url}?{urllib.parse.urlencode(params)}",
                                         headers={"Authorization": f"Bearer {self.key}"} if self.key else {})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                data = json.loads(response.read().decode("utf-8"))
        except (OSError, http.client.HTTPException, ValueError) as exc:  # URLError, timeouts, resets
            raise EnvError(f"search {self.url}: {exc}") from exc
        return [Hit(str(r.get("title", "")), str(r.get("snippet", "")), str(r.get("link", "")))
                for r in data.get("organic_results", [])[:k]]


TOKEN = re.compile(r"\w+")


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text.lower())


class BM25Corpus:
    """A local corpus (JSONL: ``title``, ``text``, optional ``url``) ranked with Okapi BM25
    (k1 1.5, b 0.75): a search engine that needs no network."""

    def __init__(self, path: Path, k1: float = 1.5, b: float = 0.75) -> None:
        try:
            with path.open(encoding="utf-8") as fh:
                self.docs = [json.loads(line) for line in fh if line.strip()]
        except (OSError, ValueError) as exc:
            raise EnvError(f"search corpus {path}: {exc}; give a JSONL file of title/text/url rows") from exc
        self.k1, self.b = k1, b
        self.terms = [Counter(tokens(f"{d.get('title', '')} {d.get('text', '')}")) for d in self.docs]
        self.lengths = [sum(t.values()) for t in self.terms]
        self.avg = sum(self.lengths) / len(self.lengths) if self.lengths else 0.0
        df: Counter[str] = Counter()
        for t in self.terms:
            df.update(t.keys())
        n = len(self.docs)
        self.idf = {term: math.log(1 + (n - f + 0.5) / (f + 0.5)) for term, f in df.items()}

    def search(self, query: str, k: int) -> list[Hit]:
        q = tokens(query)
        scored = []
        for i, (terms, length) in enumerate(zip(self.terms, self.lengths)):
            s = sum(self.idf.get(w, 0.0) * terms[w] * (self.k1 + 1)
                    / (terms[w] + self.k1 * (1 - self.b + self.b * length / self.avg)) for w in q if w in terms)
            if s > 0:
                scored.append((-s, i))
        return [Hit(str(self.docs[i].get("title", "")), str(self.docs[i].get("text", ""))[:500],
                    str(self.docs[i].get("url", ""))) for _, i in sorted(scored)[:k]]


def backend_from(options: dict[str, Any]) -> SearchBackend:
    """The run's search backend: ``{"url": ..., "key_env": ...}`` or ``{"corpus": PATH}``."""
    if options.get("corpus"):
        return BM25Corpus(Path(options["corpus"]))
    if options.get("url"):
        return HTTPSearch(str(options["url"]), options.get("key_env"))
    raise EnvError("this task searches, and the run names no search backend: start it with --search-url URL "
                   "[--search-key-env VAR] (a web search API) or --search-corpus FILE.jsonl (offline BM25)")


class SearchQA:
    """One question at a time; ``questions`` maps a game id to its row (problem, answer_type)."""

    name = "search-qa"

    def __init__(self, questions: dict[str, dict[str, Any]], backend: SearchBackend, top_k: int = 3) -> None:
        self.questions, self.backend, self.top_k = questions, backend, top_k
        self.searches: list[str] = []

    def reset(self, game: str) -> Start:
        try:
            row = self.questions[game]
        except KeyError:
            raise EnvError(f"no question {game!r} in the task's data") from None
        self.searches = []
        kind = str(row.get("answer_type") or "Single Answer")
        return Start(observation=f"Question: {row['problem']}\nAnswer type: {kind}", goal=str(row["problem"]),
                     info={"kind": kind})

    def step(self, action: str) -> Outcome:
        parsed = parse_action(action)
        if parsed is None:
            return Outcome(observation=INVALID, reward=0.0, done=False, won=False, score=0.0)
        verb, text = parsed
        if verb == "answer":
            return Outcome(observation=f"Your answer: {text}", reward=0.0, done=True, won=False, score=0.0)
        self.searches.append(text)
        try:
            hits = self.backend.search(text, self.top_k)
        except EnvError as exc:
            return Outcome(observation=f"Search error: {exc}", reward=0.0, done=False, won=False, score=0.0)
        return Outcome(observation=" | ".join(h.snippet for h in hits) or NO_RESULTS, reward=0.0, done=False,
                       won=False, score=0.0)

    def gold_actions(self) -> list[str] | None:
        return None

    def close(self) -> None:
        pass


def maker(spec: SearchQASpec) -> Callable[[], Environment]:
    """Question players over the task's prepared questions (both splits), searching the run's backend."""
    if spec.data_dir is None:
        raise EnvError("a searching task plays the questions of its prepared data, and none were given")
    questions: dict[str, dict[str, Any]] = {}
    for split in ("train", "eval"):
        path = spec.data_dir / f"{split}.jsonl"
        if path.is_file():
            with path.open(encoding="utf-8") as fh:
                questions |= {row["game"]: row for row in map(json.loads, filter(str.strip, fh))}
    return partial(SearchQA, questions, backend_from(spec.search or {}), spec.top_k)


KIND = register(SearchQASpec, maker)
