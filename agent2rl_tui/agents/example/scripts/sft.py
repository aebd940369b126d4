"""Stage one: supervised fine-tuning of the base model on the train split's worked answers.

Usage: ``python code/sft.py --model MODEL_PATH --data data/train.jsonl --out output/v1``.
Each row's question is asked as the grader asks it (``prompts.grader_messages``: the run's
prompt profile, worked examples included) and its answer (ending ``#### N``) is the
assistant's reply; TRL's SFTTrainer trains on the completion only. The full model and tokenizer are saved to
``--out``, ready to submit.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lean_imports  # noqa: F401  (before anything imports TRL or transformers)
from prompts import grader_messages
from timebox import StopAt, add_until, limit, time_left


def load_rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


BATCH_SIZE = 8
PREPARE_SHARE = 0.3
"""The most of a time-boxed stage (``--until``) spent preparing its rows before the first step."""
PREPARE_COST = 4.0
"""What TRL's preparation of a row costs, in tokenizations of it (measured: about 3)."""


def steps_in_time(rows: list[dict[str, str]], steps: int, tokenize: Callable[[dict[str, str]], object]) -> int:
    """``steps``, or fewer when their rows could not be prepared in ``PREPARE_SHARE`` of the time
    left (a 4-shot GSM8K prompt is thousands of tokens: 1,000 steps' rows take minutes on a slow CPU)."""
    left = time_left()
    if left is None or not rows:
        return steps
    sample = rows[:16]
    started = time.perf_counter()
    for row in sample:
        tokenize(row)
    per_row = (time.perf_counter() - started) / len(sample) * PREPARE_COST
    fit = max(1, int(left * PREPARE_SHARE / per_row) // BATCH_SIZE) if per_row > 0 else steps
    if fit < steps:
        print(f"time allows {fit} of the {steps} steps' rows to be prepared ({per_row * 1000:.0f} ms a row, "
              f"{left:.0f} s left): training {fit} steps", flush=True)
    return min(steps, fit)


def rows_for(rows: list[dict[str, str]], steps: int, seed: int) -> list[dict[str, str]]:
    """The rows ``steps`` batches will see, drawn with the seed: a short run does not tokenize
    the whole train split first (GSM8K's 7,473 rows take 18 s here; 20 steps need 160)."""
    need = steps * BATCH_SIZE
    if need >= len(rows):
        return rows
    import random

    return random.Random(seed).sample(rows, need)


def train(model_path: Path, rows: list[dict[str, str]], out: Path, steps: int, seed: int,
          data_file: Path) -> None:
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    tok = AutoTokenizer.from_pretrained(str(model_path))
    ask = grader_messages(data_file)
    steps = steps_in_time(rows, steps, lambda r: tok.apply_chat_template(
        [*ask(r), {"role": "assistant", "content": r["answer"]}], tokenize=True))
    data = Dataset.from_list(
        [
            {
                "prompt": ask(r),
                "completion": [{"role": "assistant", "content": r["answer"]}],
            }
            for r in rows_for(rows, steps, seed)
        ]
    )
    # A tiny model on a CPU: recomputing costs more than it saves (transformers 5.20 renamed the flag).
    flag = ("activation_checkpointing" if "activation_checkpointing" in SFTConfig.__dataclass_fields__
            else "gradient_checkpointing")
    no_recompute: dict[str, Any] = {flag: False}
    args = SFTConfig(
        output_dir=str(out.parent / f".{out.name}-trainer"),
        max_steps=steps,
        learning_rate=2e-3,
        per_device_train_batch_size=BATCH_SIZE,
        lr_scheduler_type="constant",
        max_length=None,  # never cut: a 4-shot prompt is thousands of tokens, and the answer comes last
        bf16=False,
        **no_recompute,
        logging_steps=max(1, steps // 5),
        save_strategy="no",
        report_to=[],
        seed=seed,
        disable_tqdm=True,
    )
    trainer = SFTTrainer(model=str(model_path), args=args, train_dataset=data, processing_class=tok,
                         callbacks=[StopAt()])
    trainer.train()
    trainer.save_model(str(out))
    tok.save_pretrained(str(out))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="the model to start from")
    parser.add_argument("--data", type=Path, required=True, help="train.jsonl: question, answer")
    parser.add_argument("--out", type=Path, required=True, help="where to save the trained model")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    add_until(parser)
    args = parser.parse_args(argv)
    limit(args.until)
    rows = load_rows(args.data)
    print(f"SFT: {args.steps} steps on {len(rows)} rows from {args.model} -> {args.out}", flush=True)
    train(args.model, rows, args.out, args.steps, args.seed, args.data)


if __name__ == "__main__":
    main()
