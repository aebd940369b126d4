"""HumanEval: pass@1 with greedy decoding, every completion run in the sandbox.

The model completes the function whose signature and docstring are the prompt (or, with a
chat template, writes it in a fenced block); the program is the prompt, the completion,
the problem's tests and ``check(entry_point)``. It passes only if ``check`` returns inside
the sandbox (grader/sandbox/: the verdict comes from a key the program never sees, see
its docstring), several problems at once across cores. What the sandbox in use does not
stop (MODE_NOTES, by variant) is printed with the results.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from agent2rl_tui.grader.evaluators.base import BaseEvaluator, ItemResult
from agent2rl_tui.grader.sandbox import MODE_NOTES, Sandbox

__all__ = ["MODE_NOTES", "HumanEvalEvaluator", "build_program", "completion_code"]
_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)(?:```|$)", re.DOTALL)


def completion_code(prompt: str, output: str, entry_point: str) -> str:
    """The program's body: a plain continuation, or the code of a fenced reply."""
    m = _FENCE.search(output)
    if m is None:
        return prompt + output
    code = m.group(1)
    if re.search(rf"^\s*def\s+{re.escape(entry_point)}\s*\(", code, re.MULTILINE):
        # A whole function: keep the prompt's imports and helpers, then the model's version.
        return prompt + "\n    pass\n\n" + code
    return prompt + code


def build_program(item: dict[str, Any], prompt: str, output: str) -> str:
    body = completion_code(item["prompt"], output, item["entry_point"])
    return f"{body}\n\n{item['test']}\n\ncheck({item['entry_point']})\n"


class HumanEvalEvaluator(BaseEvaluator):
    name = "humaneval"

    def __init__(self, timeout_s: float = 5.0, memory_mb: int = 1024, mode: str | None = None) -> None:
        self.timeout_s, self.memory_mb, self.mode = timeout_s, memory_mb, mode

    def judge_all(self, items: list[dict[str, Any]], prompts: list[str], outputs: list[str]) -> list[ItemResult]:
        programs = [build_program(item, p, o) for item, p, o in zip(items, prompts, outputs)]
        sandbox = Sandbox(timeout_s=self.timeout_s, memory_bytes=self.memory_mb << 20, mode=self.mode)
        print(f"sandbox: mode {sandbox.mode} ({sandbox.notes}), {sandbox.workers} workers",
              file=sys.stderr, flush=True)
        try:
            verdicts = sandbox.run_many(programs)
        finally:
            sandbox.close()
        return [
            ItemResult(index=i, prompt=p, output=o, extracted=v.status, gold=item.get("task_id", ""),
                       correct=v.passed, extra={"detail": v.detail[:300], "seconds": round(v.seconds, 3),
                                                "sandbox": sandbox.mode})
            for i, (item, p, o, v) in enumerate(zip(items, prompts, outputs, verdicts))
        ]
