"""Benchmark: what the GSM8K reference prompt profile costs against the zero-shot one, on CPU.

For the first 32 GSM8K test problems and the tiny model (transformers engine, greedy, the
profile's own batch size and 512 new tokens): mean prompt length in tokens, generation time
per item, and judging time; for the reference profile also how often the reference's
reading of the answer and our stricter one disagree. GSM8K comes from the data cache, else
from ../shared/data/gsm8k (prepared into a temporary cache).

Run: ``python bench/prompt_profiles.py [--quick]`` (about a minute; ``--quick``: the first 2
problems and 8 new tokens, the same steps in seconds). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from agent2rl_tui.grader.engines.hf import TransformersEngine  # noqa: E402
from agent2rl_tui.grader.evaluators import evaluator_for  # noqa: E402
from agent2rl_tui.tasks.data import prepare  # noqa: E402
from agent2rl_tui.tasks.registry import load_task, prepared  # noqa: E402
from agent2rl_tui.tasks.tinymodel import build_tiny_model  # noqa: E402

N_ITEMS = 32
QUICK_ITEMS, QUICK_NEW_TOKENS = 2, 8


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_ITEMS} problems, {QUICK_NEW_TOKENS} new tokens: the same steps in seconds")
    return parser.parse_args()


def main() -> None:
    quick = parse_args().quick
    n_items = QUICK_ITEMS if quick else N_ITEMS
    task = load_task("gsm8k")
    with tempfile.TemporaryDirectory() as tmp:
        if not prepared(task):
            os.environ["AGENT2RL_DATA"] = str(Path(tmp) / "data")
            prepare(task, Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k")
        items = task.load_split("eval")[:n_items]
        model = build_tiny_model(Path(tmp) / "tiny")
        engine = TransformersEngine()
        engine.load(model)
        print(f"GSM8K, first {n_items} test problems, tiny model on the transformers engine (CPU)")
        for name in ("reference", "zero-shot"):
            settings = task.settings_for(name)
            if quick:
                settings = dataclasses.replace(settings, max_new_tokens=QUICK_NEW_TOKENS)
            evaluator = evaluator_for(task, settings)
            prompts = [engine.render(evaluator.prompt(item), require_template=settings.require_chat_template)
                       for item in items]
            lengths = [len(engine.tokenizer(p, add_special_tokens=False)["input_ids"]) for p in prompts]
            t0 = time.perf_counter()
            outputs = engine.generate(prompts, settings)
            t1 = time.perf_counter()
            results = evaluator.judge_all(items, prompts, outputs)
            t2 = time.perf_counter()
            details = evaluator.details(results)
            line = (f"  {name:10} prompt {statistics.mean(lengths):6.0f} tokens (max {max(lengths)}), "
                    f"generation {1000 * (t1 - t0) / n_items:6.0f} ms/item (batch {settings.batch_size}), "
                    f"judging {1000 * (t2 - t1) / n_items:5.2f} ms/item")
            if "strict" in details:
                line += f", readings differ on {details['strict']['n_differ']} of {n_items}"
            print(line)


if __name__ == "__main__":
    main()
