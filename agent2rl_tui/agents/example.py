"""The example agent: a scripted SFT-then-GRPO post-training run with TRL, no LLM.

It does what a competent agent would do on a GSM8K-style task, in the workspace the
supervisor prepared: read the train split, supervised fine-tuning on the ``#### N``
replies (saved as a full model to output/v1, submitted), then GRPO from that checkpoint
with an exact-match reward (output/v2, submitted). It keeps notes in code/NOTES.md, as an
agent would, so its revisions show up in the record. It is the demo's agent and the
test suite's, and a template for scripted baselines.

Environment: the benchmark's (MODEL_PATH, DATA_PATH, OUTPUT_DIR, GRADING_SERVER_URL) plus
optional EXAMPLE_SFT_STEPS, EXAMPLE_GRPO_STEPS, EXAMPLE_MAX_COMPLETION (GRPO's completion
length, 8 for arith; GSM8K needs hundreds), EXAMPLE_SEED.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from agent2rl_tui.grader.client import GraderClient
from agent2rl_tui.grader.evaluators.math_answer import answers_match, extract_answer


def say(msg: str) -> None:
    print(f"[example-agent] {msg}", flush=True)


def note(workspace: Path, text: str) -> None:
    code = workspace / "code"
    code.mkdir(exist_ok=True)
    with (code / "NOTES.md").open("a", encoding="utf-8") as fh:
        fh.write(text.rstrip() + "\n")


def write_config(workspace: Path, config: dict[str, Any]) -> None:
    """The stage's settings as a file in code/, so each stage is a revision of the record."""
    path = workspace / "code" / "train_config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def submit(url: str, model_dir: Path) -> dict[str, Any]:
    """POST /submit and wait for the score (the answer of a refusal is returned as is)."""
    return GraderClient(url, timeout=3600).submit(str(model_dir)).json()


def load_rows(data_path: Path) -> list[dict[str, str]]:
    with (data_path / "train.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def exact_match_reward(completions: list[Any], answer: list[str], **_: Any) -> list[float]:
    """1.0 when the reply's final number equals the gold one, else 0.0 (hard to game)."""
    rewards = []
    for completion, gold in zip(completions, answer):
        text = completion[-1]["content"] if isinstance(completion, list) else str(completion)
        rewards.append(1.0 if answers_match(extract_answer(text), extract_answer(gold)) else 0.0)
    return rewards


def sft(model_path: Path, rows: list[dict[str, str]], out: Path, steps: int, seed: int) -> None:
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    tok = AutoTokenizer.from_pretrained(str(model_path))
    data = Dataset.from_list(
        [
            {
                "prompt": [{"role": "user", "content": r["question"]}],
                "completion": [{"role": "assistant", "content": r["answer"]}],
            }
            for r in rows
        ]
    )
    args = SFTConfig(
        output_dir=str(out.parent / f".{out.name}-trainer"),
        max_steps=steps,
        learning_rate=3e-3,
        per_device_train_batch_size=8,
        lr_scheduler_type="constant",
        bf16=False,
        logging_steps=max(1, steps // 5),
        save_strategy="no",
        report_to=[],
        seed=seed,
        disable_tqdm=True,
    )
    trainer = SFTTrainer(model=str(model_path), args=args, train_dataset=data, processing_class=tok)
    trainer.train()
    trainer.save_model(str(out))
    tok.save_pretrained(str(out))


def grpo(model_path: Path, rows: list[dict[str, str]], out: Path, steps: int, seed: int,
         max_completion: int = 8) -> None:
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    tok = AutoTokenizer.from_pretrained(str(model_path))
    data = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": r["question"]}], "answer": r["answer"]} for r in rows]
    )
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
        logging_steps=max(1, steps // 5),
        save_strategy="no",
        report_to=[],
        seed=seed,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=str(model_path), reward_funcs=exact_match_reward, args=args, train_dataset=data,
        processing_class=tok,
    )
    trainer.train()
    trainer.save_model(str(out))
    tok.save_pretrained(str(out))


def main() -> int:
    try:
        workspace = Path(os.environ.get("WORKSPACE", "."))
        model_path = Path(os.environ["MODEL_PATH"])
        data_path = Path(os.environ["DATA_PATH"])
        output_dir = Path(os.environ["OUTPUT_DIR"])
        url = os.environ["GRADING_SERVER_URL"]
    except KeyError as exc:
        say(f"missing environment variable {exc}; run me through agent2rl-tui")
        return 2
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    sft_steps = int(os.environ.get("EXAMPLE_SFT_STEPS", "1000"))
    grpo_steps = int(os.environ.get("EXAMPLE_GRPO_STEPS", "400"))
    seed = int(os.environ.get("EXAMPLE_SEED", "0"))
    rows = load_rows(data_path)
    say(f"task {os.environ.get('TASK')}: {len(rows)} training rows, base model {model_path.name}")
    note(workspace, f"# Plan\n- SFT {sft_steps} steps on {len(rows)} rows -> output/v1\n"
                    f"- GRPO {grpo_steps} steps, exact-match reward, from v1 -> output/v2\n")

    write_config(workspace, {"stage": "sft", "steps": sft_steps, "learning_rate": 3e-3, "batch_size": 8,
                             "init": str(model_path), "out": "output/v1"})
    t0 = time.time()
    v1 = output_dir / "v1"
    sft(model_path, rows, v1, sft_steps, seed)
    say(f"SFT done in {time.time() - t0:.1f} s; submitting {v1}")
    r1 = submit(url, v1)
    say(f"submission v1: {json.dumps(r1)}")
    note(workspace, f"- v1 (SFT): score {r1.get('score')} (baseline {r1.get('baseline_score')})")

    write_config(workspace, {"stage": "grpo", "steps": grpo_steps, "learning_rate": 5e-4, "batch_size": 16,
                             "num_generations": 8, "reward": "exact_match", "init": "output/v1",
                             "out": "output/v2"})
    t1 = time.time()
    v2 = output_dir / "v2"
    grpo(v1, rows, v2, grpo_steps, seed, int(os.environ.get("EXAMPLE_MAX_COMPLETION", "8")))
    say(f"GRPO done in {time.time() - t1:.1f} s; submitting {v2}")
    r2 = submit(url, v2)
    say(f"submission v2: {json.dumps(r2)}")
    note(workspace, f"- v2 (GRPO): score {r2.get('score')}; best so far {r2.get('best')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
