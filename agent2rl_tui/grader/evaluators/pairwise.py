"""The judge-graded (Level-2) evaluator: each model output against the reference output, by a judge.

AlpacaEval 2.0 as AutoRL-Bench grades it: the model answers each instruction (its chat
template, greedy, 512 new tokens); a judge compares its output with the reference output
(gpt-4-1106-preview's) and the win rate over the items, length-controlled where the GLM's data
are prepared, is the score. Which output the judge sees first is drawn as alpaca_eval 0.6.6
draws it (``model_shown_first``: its seeded choice on the instruction), so every pair is shown
in the leaderboard's order; an output identical to the reference gets preference 1.5 without
asking the judge, as alpaca_eval sets it. Judgements come from the cache when the same pair
was judged before; a judge that errs is retried with backoff, and an item it never answers
counts as failed (the score says how many; every item failing fails the submission).

Unlike the other evaluators this one does I/O (HTTP to the judge, a SQLite cache): it is
tested against a real judge server on 127.0.0.1.
"""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent2rl_tui.grader.evaluators.base import BaseEvaluator, ItemResult
from agent2rl_tui.judge import JudgeError, JudgeSettings, pairwise, winrate
from agent2rl_tui.judge.cache import JudgementCache, cache_key
from agent2rl_tui.judge.client import JudgeClient


@dataclass
class Verdict:
    raw: str | None = None
    shown_preference: float | None = None
    """In the order shown: 1 = the first output (``m``) is better."""
    attempts: int = 0
    cached: bool = False
    error: str | None = None
    answered: bool = False
    """The judge replied (a judge call was spent), parseable or not."""


ALPACA_EVAL_SEED = 0
"""alpaca_eval's annotator seed (``PairwiseAnnotator(seed=0)``), which its order draw is salted with."""
SAME_OUTPUT = 1.5
"""alpaca_eval's preference for an output identical to the reference: a tie, the judge not asked."""


def model_shown_first(instruction: str, seed: int = ALPACA_EVAL_SEED) -> bool:
    """Whether the model's output is shown first (``m``, alpaca_eval's ``output_1``) for this
    instruction: alpaca_eval's ``RandomSwitchTwoColumnsProcessor`` draw, ``random.Random(
    "is_switched_outputs" + instruction + str(seed)).choices([False, True])``, the reference being
    ``output_1`` unless switched. The same instruction always meets the same order (and the cache)."""
    return random.Random("is_switched_outputs" + instruction + str(seed)).choices([False, True], k=1)[0]


class PairwiseJudgeEvaluator(BaseEvaluator):
    name = "pairwise_judge"

    def __init__(self, spec: dict[str, Any] | None, *, judge: JudgeSettings, templates: dict[str, str],
                 cache_path: Path | None = None, hub_cache: Path | None = None) -> None:
        super().__init__(spec)
        self.judge_settings = judge  # not self.judge: BaseEvaluator.judge is the per-item method
        self.template = templates[judge.mode]
        self.version = pairwise.prompt_version(self.template, judge.mode)
        self.cache_path = cache_path
        self.hub_cache = hub_cache
        self.metrics: dict[str, Any] = {}
        self.calls = 0

    def _ask(self, client: JudgeClient, cache: JudgementCache | None, instruction: str, first: str,
             second: str) -> Verdict:
        key = cache_key(instruction, first, second, self.judge_settings.model, self.version)
        hit = cache.get(key) if cache is not None else None
        if hit:
            return Verdict(raw=hit[0], shown_preference=hit[1], cached=True)
        body = pairwise.request(self.judge_settings.mode, self.template, instruction, first, second)
        try:
            reply = client.chat(body)
        except JudgeError as exc:
            return Verdict(error=str(exc), attempts=self.judge_settings.retries + 1)
        raw = None
        try:
            raw = pairwise.raw_answer(self.judge_settings.mode, reply.body)
            shown = pairwise.preference(self.judge_settings.mode, raw)
        except JudgeError as exc:
            return Verdict(raw=raw, error=str(exc), attempts=reply.attempts, answered=True)
        if cache is not None:
            cache.put(key, raw, shown, self.judge_settings.model, self.version)
        return Verdict(raw=raw, shown_preference=shown, attempts=reply.attempts, answered=True)

    def judge_all(self, items: list[dict[str, Any]], prompts: list[str], outputs: list[str]) -> list[ItemResult]:
        client = JudgeClient(self.judge_settings)
        cache = JudgementCache(self.cache_path) if self.cache_path else None
        outputs = [o.strip() for o in outputs]  # as AutoRL-Bench keeps them
        firsts = [model_shown_first(item["instruction"]) for item in items]
        pairs = [(item["instruction"], out, item["output"]) if first else (item["instruction"], item["output"], out)
                 for item, out, first in zip(items, outputs, firsts)]

        def ask(pair: tuple[str, str, str]) -> Verdict:
            if pair[1] == pair[2]:  # identical outputs: a tie, as alpaca_eval sets it
                return Verdict(raw=None, shown_preference=SAME_OUTPUT)
            return self._ask(client, cache, *pair)

        try:
            with ThreadPoolExecutor(max_workers=self.judge_settings.concurrency) as pool:
                verdicts = list(pool.map(ask, pairs))
        finally:
            if cache is not None:
                cache.close()
        self.calls = sum(v.answered for v in verdicts)  # counted here: the threads share no counter
        results = [self._result(i, item, prompt, out, first, v)
                   for i, (item, prompt, out, first, v) in enumerate(zip(items, prompts, outputs, firsts, verdicts))]
        judged = [r for r in results if r.extra["preference"] is not None]
        called_off = [v for v in verdicts if v.error and not v.answered]
        if self.spec.get("judge_failure") == "fail" and called_off:  # alpaca_eval: a failed call ends it all
            raise JudgeError(f"the judge failed on {len(called_off)} of {len(items)} items, and this prompt profile "
                             f"ends the evaluation on a failed judge call as alpaca_eval does; the first error: "
                             f"{called_off[0].error}")
        if items and not judged:
            raise JudgeError(f"the judge failed on all {len(items)} items; the first error: {verdicts[0].error}")
        rows = winrate.annotation_rows([r.extra["preference"] for r in judged], [r.output for r in judged],
                                       [r.gold for r in judged], [r.index for r in judged], "model",
                                       self.judge_settings.model)
        self.metrics = winrate.win_rates(rows, self.hub_cache)
        failed = [r for r in results if r.extra["preference"] is None]
        self.metrics.update(
            metric="length_controlled_winrate" if self.metrics.get("length_controlled_winrate") is not None
            else "win_rate",
            n_failed=len(failed), failed=[{"index": r.index, "error": r.extra["error"]} for r in failed[:50]],
            n_cached=sum(v.cached for v in verdicts), judge_calls=self.calls,
            avg_output_chars=sum(map(len, outputs)) / len(outputs) if outputs else 0.0)
        return results

    def _result(self, index: int, item: dict[str, Any], prompt: str, output: str, model_first: bool,
                verdict: Verdict) -> ItemResult:
        pref = None
        if verdict.shown_preference is not None:  # to alpaca_eval's orientation: output_1 = the reference
            pref = 3.0 - verdict.shown_preference if model_first else verdict.shown_preference
        return ItemResult(
            index=index, prompt=prompt, output=output,
            extracted=None if pref is None else f"{pref - 1:.2f}", gold=str(item["output"]),
            correct=pref is not None and pref > 1.5,
            extra={"instruction": item["instruction"], "reference_generator": item.get("generator"),
                   "model_shown_as": "m" if model_first else "M", "judge_raw": verdict.raw,
                   "preference": pref, "cached": verdict.cached, "judge_attempts": verdict.attempts,
                   "error": verdict.error})

    def score(self, results: list[ItemResult]) -> float:
        """The length-controlled win rate where it could be computed, else the win rate (percent)."""
        metric = self.metrics.get("metric", "win_rate")
        return float(self.metrics.get(metric) or 0.0)

    def details(self, results: list[ItemResult]) -> dict[str, Any]:
        return {"judge": {**self.judge_settings.to_dict(), "prompt_version": self.version,
                          "order": f"alpaca_eval's draw, seed {ALPACA_EVAL_SEED}"},
                "winrate": self.metrics}
