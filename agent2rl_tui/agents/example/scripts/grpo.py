"""Stage two: GRPO from the SFT checkpoint, rewarded by exact match of the final answer.

Usage: ``python code/grpo.py --model output/v1 --data data/train.jsonl --out output/v2``.
Eight completions per prompt, scored by ``reward.exact_match_reward`` (beside this file in
code/); no KL term (beta 0), since the SFT model is the only reference worth keeping and
the reward cannot be gamed. The full model and tokenizer are saved to ``--out``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import lean_imports  # noqa: F401  (before anything imports TRL or transformers)
from prompts import grader_messages
from reward import exact_match_reward
from timebox import StopAt, add_until, limit


def load_rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def train(model_path: Path, rows: list[dict[str, str]], out: Path, steps: int, seed: int,
          data_file: Path, max_completion: int = 8) -> None:
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    tok = AutoTokenizer.from_pretrained(str(model_path))
    ask = grader_messages(data_file)  # the grader's prompts (prompts.py, written with sft.py)
    data = Dataset.from_list([{"prompt": ask(r), "answer": r["answer"]} for r in rows])
    # A tiny model on a CPU: recomputing costs more than it saves (transformers 5.20 renamed the flag).
    flag = ("activation_checkpointing" if "activation_checkpointing" in GRPOConfig.__dataclass_fields__
            else "gradient_checkpointing")
    no_recompute: dict[str, Any] = {flag: False}
    args = GRPOConfig(
        output_dir=str(out.parent / f".{out.name}-trainer"),
        max_steps=steps,
        learning_rate=5e-4,
        per_device_train_batch_size=16,
        num_generations=8,
        max_completion_length=max_completion,
        temperature=1.0,
        beta=0.0,
        bf16=False,
        **no_recompute,
        logging_steps=max(1, steps // 5),
        save_strategy="no",
        report_to=[],
        seed=seed,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        callbacks=[StopAt()],
        model=str(model_path), reward_funcs=exact_match_reward, args=args, train_dataset=data,
        processing_class=tok,
    )
    trainer.train()
    trainer.save_model(str(out))
    tok.save_pretrained(str(out))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="the model to start from (the SFT one)")
    parser.add_argument("--data", type=Path, required=True, help="train.jsonl: question, answer")
    parser.add_argument("--out", type=Path, required=True, help="where to save the trained model")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-completion", type=int, default=8,
                        help="completion length in tokens (8 for arith; GSM8K needs hundreds)")
    add_until(parser)
    args = parser.parse_args(argv)
    limit(args.until)
    rows = load_rows(args.data)
    print(f"GRPO: {args.steps} steps on {len(rows)} rows from {args.model} -> {args.out}", flush=True)
    train(args.model, rows, args.out, args.steps, args.seed, args.data, args.max_completion)


if __name__ == "__main__":
    main()
