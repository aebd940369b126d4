"""HumanEval: pass@1 with greedy decoding, every program run in the sandbox.

The profile's rule (``tasks.grading_rules``) turns a reply into a program: the function, the
problem's tests and ``check(entry_point)``. It passes only if ``check`` returns inside the
sandbox (grader/sandbox/: the verdict comes from a key the program never sees, see its
docstring), several problems at once across cores. Under the reference rule
(``opencompass-humaneval-v2``) each item also gets our reading (``continuation``: a fenced
whole function after the prompt, a bare body kept indented) where it makes another program,
run as well and recorded beside the score. What the sandbox in use does not stop
(MODE_NOTES, by variant) is printed with the results. The run folder (``run_dir``, set by the
eval worker) and its parent are hidden from the programs, with the eval data and the home folder.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agent2rl_tui.grader.evaluators.base import BaseEvaluator, ItemResult
from agent2rl_tui.grader.evaluators.math_answer import strict_details
from agent2rl_tui.grader.sandbox import MODE_NOTES, Sandbox
from agent2rl_tui.tasks import grading_rules as rules

__all__ = ["MODE_NOTES", "HumanEvalEvaluator", "build_program"]
REFERENCE = "opencompass-humaneval-v2"


def build_program(item: dict[str, Any], prompt: str, output: str, spec: dict[str, Any] | None = None) -> str:
    """The program for ``output`` under ``spec``'s rule (``continuation`` without one)."""
    return rules.program(item, output, spec or {})


class HumanEvalEvaluator(BaseEvaluator):
    name = "humaneval"
    run_dir: Path | None = None
    """The run being graded (evals/<n>/ is in it): the sandbox hides it and its parent (the runs root)."""

    def __init__(self, spec: dict[str, Any] | None = None, timeout_s: float = 5.0, memory_mb: int = 1024,
                 mode: str | None = None) -> None:
        super().__init__(spec)
        self.timeout_s, self.memory_mb, self.mode = timeout_s, memory_mb, mode

    def judge_all(self, items: list[dict[str, Any]], prompts: list[str], outputs: list[str]) -> list[ItemResult]:
        programs = [rules.program(item, o, self.spec) for item, o in zip(items, outputs)]
        reference = self.spec.get("extraction") == REFERENCE
        ours = [rules.program(item, o, self.spec, extraction="continuation") for item, o in zip(items, outputs)]
        extra_runs = [i for i in range(len(items)) if reference and ours[i] != programs[i]]
        hidden = [self.run_dir, self.run_dir.parent] if self.run_dir is not None else []
        sandbox = Sandbox(timeout_s=self.timeout_s, memory_bytes=self.memory_mb << 20, mode=self.mode, hidden=hidden)
        print(f"sandbox: mode {sandbox.mode} ({sandbox.notes}), {sandbox.workers} workers",
              file=sys.stderr, flush=True)
        try:
            verdicts = sandbox.run_many(programs + [ours[i] for i in extra_runs])
        finally:
            sandbox.close()
        strict = dict(zip(extra_runs, verdicts[len(items):]))
        results = []
        for i, (item, p, o, v) in enumerate(zip(items, prompts, outputs, verdicts)):
            extra: dict[str, Any] = {"detail": v.detail[:300], "seconds": round(v.seconds, 3), "sandbox": sandbox.mode}
            if reference:
                ours_v = strict.get(i, v)
                extra |= {"strict": ours_v.status, "strict_correct": ours_v.passed}
            results.append(ItemResult(index=i, prompt=p, output=o, extracted=v.status, gold=item.get("task_id", ""),
                                      correct=v.passed, extra=extra))
        return results

    def details(self, results: list[ItemResult]) -> dict[str, Any]:
        return strict_details(results, "our reading of the same reply: a fenced whole function after the "
                                       "prompt, a plain reply as a continuation (indentation kept)")
