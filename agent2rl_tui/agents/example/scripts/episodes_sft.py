"""Interactive tasks, stage one: SFT warm-up on expert trajectories of the train games.

Usage: ``python code/episodes_sft.py --model MODEL_PATH --data data --out output/v1``.
The workspace's ``data/play.py`` (the grader's own prompt and rules, runnable) plays each
train game along its gold path; every turn becomes a training pair: the transcript so far
(exactly what the grader will show the model) -> ``" {action}\\n"``. A gold path's opening
``look around`` only repeats the first observation and doubles the transcript, so it is
cut out. TRL's SFTTrainer
trains on the completion only; the model and tokenizer are saved to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import lean_imports  # noqa: F401  (before anything imports TRL or transformers)
from timebox import StopAt, add_until, limit

REDUNDANT = {"look around", "look"}


def load_play_kit(data_dir: Path) -> Any:
    sys.path.insert(0, str(data_dir.resolve()))
    import play  # data/play.py, written by the benchmark

    return play


def expert_turns(play: Any, games: list[str]) -> tuple[list[dict[str, str]], int]:
    """Training pairs from the gold paths (an opening look cut out), and how many games they win.

    ``play.expert`` gives each turn with the prompt the grader shows before it. Cutting an
    opening ``look around`` (it changes nothing in the game) removes its turn from every
    later prompt, which is then exactly what the grader shows a model that skips it.
    """
    pairs: list[dict[str, str]] = []
    trajectories = play.expert(games)
    for t in trajectories:
        turns = t["turns"]
        first, skip = turns[0]["prompt"], 0
        if len(turns) > 1 and turns[0]["action"] in REDUNDANT:
            skip = len(turns[1]["prompt"]) - len(first)
            turns = turns[1:]
        for turn in turns:
            prompt = first + turn["prompt"][len(first) + skip:]
            pairs.append({"prompt": prompt, "completion": f" {turn['action']}\n"})
    return pairs, sum(t["won"] for t in trajectories)


def train(model_path: Path, pairs: list[dict[str, str]], out: Path, steps: int, seed: int, lr: float) -> None:
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    tok = AutoTokenizer.from_pretrained(str(model_path))
    # A tiny model on a CPU: recomputing costs more than it saves (transformers 5.20 renamed the flag).
    flag = ("activation_checkpointing" if "activation_checkpointing" in SFTConfig.__dataclass_fields__
            else "gradient_checkpointing")
    no_recompute: dict[str, Any] = {flag: False}
    args = SFTConfig(
        output_dir=str(out.parent / f".{out.name}-trainer"),
        max_steps=steps,
        learning_rate=lr,
        per_device_train_batch_size=8,
        lr_scheduler_type="constant",
        max_length=tok.model_max_length,
        bf16=False,
        **no_recompute,
        logging_steps=max(1, steps // 5),
        save_strategy="no",
        report_to=[],
        seed=seed,
        disable_tqdm=True,
    )
    trainer = SFTTrainer(model=str(model_path), args=args, train_dataset=Dataset.from_list(pairs), processing_class=tok,
                         callbacks=[StopAt()])
    trainer.train()
    trainer.save_model(str(out))
    tok.save_pretrained(str(out))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="the model to start from")
    parser.add_argument("--data", type=Path, required=True, help="the workspace's data folder (play.py, train.jsonl)")
    parser.add_argument("--out", type=Path, required=True, help="where to save the trained model")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--games", type=int, default=0, help="train games to use (0: all)")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    add_until(parser)
    args = parser.parse_args(argv)
    limit(args.until)
    play = load_play_kit(args.data)
    rows = [json.loads(line) for line in (args.data / "train.jsonl").read_text(encoding="utf-8").splitlines() if line]
    games = [row["game"] for row in rows][: args.games or None]
    pairs, won = expert_turns(play, games)
    print(f"expert: {len(games)} games replayed, {won} won, {len(pairs)} training turns", flush=True)
    print(f"SFT: {args.steps} steps from {args.model} -> {args.out}", flush=True)
    train(args.model, pairs, args.out, args.steps, args.seed, args.lr)


if __name__ == "__main__":
    main()
