"""AlpacaEval's data for the tests of every tier: the real reference outputs (the shared data), Alpaca-format
rows made from real GSM8K problems, the eval split's first items. (The task prepared offline is the
root conftest's ``alpaca_data`` fixture.)
"""

from __future__ import annotations

import json

from agent2rl_tui.tasks.registry import load_task
from support.paths import SHARED_DATA

REFERENCE_FILE = SHARED_DATA / "alpaca_eval" / "gpt4_1106_preview_outputs.json"


def alpaca_rows(n: int) -> list[dict[str, str]]:
    """Alpaca-format rows (instruction, input, output) from real GSM8K problems: half with the
    problem as the instruction, half with it as the input of a fixed instruction."""
    with (SHARED_DATA / "gsm8k" / "train.jsonl").open(encoding="utf-8") as fh:
        problems = [json.loads(next(fh)) for _ in range(n)]
    return [{"instruction": p["question"], "input": "", "output": p["answer"]} if i % 2 == 0 else
            {"instruction": "Solve this math word problem.", "input": p["question"], "output": p["answer"]}
            for i, p in enumerate(problems)]


def reference_items(n: int) -> list[dict[str, object]]:
    return load_task("alpacaeval").load_split("eval")[:n]
