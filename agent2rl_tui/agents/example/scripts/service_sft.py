"""Interactive tasks served by the run (WebShop, DeepSearchQA), stage one: SFT on good trajectories.

Usage: ``python code/service_sft.py --model MODEL_PATH --data data --out output/v1``.
The games live behind ``$TRAIN_ENV_URL`` (the workspace's ``data/play.py`` talks to it), which
plays the train games exactly as the grader plays its own, so every turn it returns is a
training pair in the grader's format: the prompt the model saw -> the completion that was played.
The trajectories come from a scripted demonstrator:

- a searching task: search for the question, then answer with the train question's gold
  answer (``data/train.jsonl`` has them); kept when the service's reward says it is right;
- a shopping task: search for the instruction, open the first result, buy it; kept when the
  store's reward is above ``--min-reward`` (partial credit: the right kind of product).

TRL's SFTTrainer trains on the completions only; the model and tokenizer go to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import lean_imports  # noqa: F401  (before anything imports TRL or transformers)
from timebox import StopAt, add_until, limit


def load_play_kit(data_dir: Path) -> Any:
    sys.path.insert(0, str(data_dir.resolve()))
    import play  # data/play.py, written by the benchmark

    return play


def searcher(rows: dict[str, dict[str, Any]]) -> Any:
    """Search for the question, then answer with its gold answer (ReAct's format)."""
    def next_completion(game: str, turn: int, last: dict[str, Any]) -> str:
        row = rows[game]
        if turn == 0:
            return f" I should look this up.\nAction: search[{row['problem']}]"
        return f" The results answer it.\nAction: answer[{row['answer']}]"
    return next_completion


def shopper() -> Any:
    """Search for the instruction, open the first product the page offers, buy it."""
    def next_completion(game: str, turn: int, last: dict[str, Any]) -> str:
        if turn == 0:
            return f"search[{last.get('goal', '')[:80]}]"
        offered = [a for a in (last.get("admissible") or []) if a.startswith("click[")]
        buy = next((a for a in offered if a.lower() == "click[buy now]"), None)
        product = next((a for a in offered if re.match(r"click\[[a-z0-9]{4,}\]$", a, re.I)
                        and "search" not in a.lower()), None)
        return buy or product or (offered[0] if offered else "click[buy now]")
    return next_completion


def demonstrate(play: Any, games: list[str], policy: Any, min_reward: float) -> tuple[list[dict[str, str]], list[float]]:
    """Play each game with the demonstrator; the turns of the episodes rewarded above ``min_reward``."""
    pairs: list[dict[str, str]] = []
    rewards = []
    env = play.make_env()
    try:
        for game in games:
            prompt, goal = play.reset(env, game)
            last: dict[str, Any] = {**env.last, "goal": goal}
            turns = []
            for turn in range(int(play.SPEC["max_steps"])):
                completion = policy(game, turn, last)
                turns.append({"prompt": env.prompt, "completion": completion})
                _obs, _r, _won, over, score = play.step(env, completion)
                last = {**env.last, "goal": goal}
                if over:
                    break
            rewards.append(score)
            if score > min_reward:
                pairs += [{"prompt": t["prompt"], "completion": t["completion"] + "\n"} for t in turns]
    finally:
        env.close()
    return pairs, rewards


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
        output_dir=str(out.parent / f".{out.name}-trainer"), max_steps=steps, learning_rate=lr,
        per_device_train_batch_size=4, lr_scheduler_type="constant", max_length=tok.model_max_length, bf16=False,
        **no_recompute,
        logging_steps=max(1, steps // 5), save_strategy="no", report_to=[], seed=seed, disable_tqdm=True)
    trainer = SFTTrainer(model=str(model_path), args=args, train_dataset=Dataset.from_list(pairs), processing_class=tok,
                         callbacks=[StopAt()])
    trainer.train()
    trainer.save_model(str(out))
    tok.save_pretrained(str(out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True, help="the workspace's data folder (play.py, train.jsonl)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--games", type=int, default=0, help="train games to demonstrate (0: all)")
    parser.add_argument("--min-reward", type=float, default=0.0)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    add_until(parser)
    args = parser.parse_args(argv)
    limit(args.until)
    play = load_play_kit(args.data)
    rows = {r["game"]: r for r in map(json.loads, filter(str.strip, (args.data / "train.jsonl").open()))}
    games = list(rows)[: args.games or None]
    policy = searcher(rows) if play.SPEC.get("kind") == "search-qa" else shopper()
    pairs, rewards = demonstrate(play, games, policy, args.min_reward)
    kept = sum(r > args.min_reward for r in rewards)
    print(f"demonstrations: {len(games)} games played through the service, {kept} rewarded above "
          f"{args.min_reward} (mean reward {sum(rewards) / max(1, len(rewards)):.2f}), {len(pairs)} training turns",
          flush=True)
    if not pairs:
        print("no trajectory to learn from: SFT skipped", flush=True)
        return 3
    print(f"SFT: {args.steps} steps from {args.model} -> {args.out}", flush=True)
    train(args.model, pairs, args.out, args.steps, args.seed, args.lr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
