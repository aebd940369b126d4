"""Interactive tasks, stage two: GRPO with online rollouts through the game.

Usage: ``python code/episodes_grpo.py --model output/v1 --data data --out output/v2``.
TRL's GRPOTrainer with a ``rollout_func``: for each train game in a batch the policy plays
``--generations`` whole episodes (sampled) through the workspace's ``data/play.py``, in
the grader's transcript format, every live episode's next action from one ``generate``.
An episode is one completion: the model's action tokens are trained, the game's
observations between them are masked out (``env_mask`` 0). The reward is the game's own
score (1 when won, partial credit for progress), so within a group the episodes that got
further are pushed up. A small KL term (beta 0.04) keeps the policy near the SFT model it
starts from, and each episode's tokens are averaged before the batch (loss ``grpo``), so a
long lost episode weighs no more than a short won one: the settings under which
bench/rl_vs_sft.py measured GRPO improving on SFT. Games that open with the same prompt are
told apart (``Rollouts.games_for``): each group plays one of them.

TRL's contract (1.16): ``rollout_func(prompts, trainer)`` gets the batch's prompts (each
game's first prompt, once per generation) and returns ``prompt_ids``, ``completion_ids``,
``logprobs`` (None: the trainer recomputes them) and any extra fields, which reach the
reward function as keyword arguments.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
from pathlib import Path
from typing import Any

import lean_imports  # noqa: F401  (before anything imports TRL or transformers)
from episodes_sft import load_play_kit  # beside this file in code/, written by stage one
from timebox import StopAt, add_until, limit


class Rollouts:
    """Plays batches of episodes with the model being trained; environments are kept between calls."""

    def __init__(self, play: Any, tok: Any, games_of: dict[str, list[str]], *, generations: int,
                 max_new_tokens: int, temperature: float, seed: int) -> None:
        self.play, self.tok, self.generations = play, tok, generations
        # Games often open with the same prompt (the same first room; where the coin lies is not
        # shown yet), and the trainer hands over prompts only: each group draws its own game among
        # those its prompt opens, so the games the prompt stands for are all trained on.
        rng = random.Random(seed)
        self.games_of = {p: itertools.cycle(rng.sample(gs, len(gs))) for p, gs in games_of.items()}
        self.max_new_tokens, self.temperature = max_new_tokens, temperature
        self.max_steps = int(play.SPEC["max_steps"])
        self.envs: list[Any] = []
        self.newline_ids = {i for i in range(len(tok)) if "\n" in tok.decode([i])}

    def __call__(self, prompts: list[str], trainer: Any) -> dict[str, Any]:
        from trl.models.utils import unwrap_model_for_generation

        while len(self.envs) < len(prompts):
            self.envs.append(self.play.make_env())
        episodes = []
        for env, game in zip(self.envs, self.games_for(prompts)):
            text, _goal = self.play.reset(env, game)
            episodes.append({"env": env, "prompt_ids": self.tok(text, add_special_tokens=False)["input_ids"],
                             "completion_ids": [], "env_mask": [], "steps": 0, "won": False, "score": 0.0})
        live = list(episodes)
        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator) as model:
            while live:
                actions = self.sample(model, [e["prompt_ids"] + e["completion_ids"] for e in live])
                still = []
                for e, ids in zip(live, actions):
                    if self.turn(e, ids):
                        still.append(e)
                live = still
        won = sum(e["won"] for e in episodes)
        print(f"rollouts: {len(episodes)} episodes, {won} won, "
              f"{sum(e['steps'] for e in episodes) / len(episodes):.1f} steps each", flush=True)
        return {"prompt_ids": [e["prompt_ids"] for e in episodes],
                "completion_ids": [e["completion_ids"] for e in episodes],
                "env_mask": [e["env_mask"] for e in episodes],
                "logprobs": None,
                "game_score": [e["score"] for e in episodes]}

    def games_for(self, prompts: list[str]) -> list[str]:
        """The game each prompt's episode plays: a group (one prompt, its episodes in a row) plays
        one game, the next of those its prompt opens."""
        games: list[str] = []
        for i, prompt in enumerate(prompts):
            new_group = i % self.generations == 0 or prompt != prompts[i - 1]
            games.append(next(self.games_of[prompt]) if new_group else games[-1])
        return games

    def turn(self, e: dict[str, Any], ids: list[int]) -> bool:
        """Play the sampled action of episode ``e``; True while the episode goes on."""
        e["completion_ids"] += ids
        e["env_mask"] += [1] * len(ids)
        if ids == [self.tok.eos_token_id]:  # the model ended its text instead of acting: the episode ends,
            e["steps"] += 1                 # and that end is what it is trained on (never a token it did not say)
            return False
        said = self.tok.decode(ids)
        action = self.play.action_from(said)
        obs, _reward, won, over, score = self.play.step(e["env"], action)
        e["steps"] += 1
        e["won"], e["score"] = won, 1.0 if won else score
        limit = self.tok.model_max_length - self.max_new_tokens
        if over or e["steps"] >= self.max_steps:
            return self.end(e)
        # The game's answer, as the grader writes it after the action line; masked from the loss.
        env_text = ("" if said.endswith("\n") else "\n") + self.play.next_turn(action, obs)[len(action) + 2:]
        env_ids = self.tok(env_text, add_special_tokens=False)["input_ids"]
        e["completion_ids"] += env_ids
        e["env_mask"] += [0] * len(env_ids)
        if len(e["prompt_ids"]) + len(e["completion_ids"]) > limit:  # the grader would end it: context full
            return self.end(e)
        return True

    def end(self, e: dict[str, Any]) -> bool:
        e["completion_ids"].append(self.tok.eos_token_id)  # an episode is a finished completion
        e["env_mask"].append(0)
        return False

    def sample(self, model: Any, sequences: list[list[int]]) -> list[list[int]]:
        """One sampled action line per sequence: its tokens up to and with the first newline."""
        import torch

        tok = self.tok
        width = max(len(s) for s in sequences)
        pad = tok.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(s)) + s for s in sequences], device=model.device)
        attention = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in sequences], device=model.device)
        with torch.no_grad():
            out = model.generate(input_ids=input_ids, attention_mask=attention, do_sample=True,
                                 temperature=self.temperature, top_k=0, top_p=1.0,
                                 max_new_tokens=self.max_new_tokens, pad_token_id=pad,
                                 stop_strings=["\n"], tokenizer=tok)
        lines = []
        for row in out[:, width:].tolist():
            ids = []
            for token in row:
                if token in (tok.eos_token_id, pad):
                    break
                ids.append(token)
                if token in self.newline_ids:
                    break
            lines.append(ids or [tok.eos_token_id])  # nothing before the end of its text: that end
        return lines

    def close(self) -> None:
        for env in self.envs:
            env.close()


def game_reward(completions: list[Any], game_score: list[float], **_: Any) -> list[float | None]:
    """The game's own score of each episode: 1.0 when won."""
    return [float(s) for s in game_score]


def train(model_path: Path, data_dir: Path, out: Path, steps: int, seed: int, generations: int,
          games_per_step: int, lr: float, max_games: int, beta: float = 0.0, loss_type: str | None = None) -> None:
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    play = load_play_kit(data_dir)
    tok = AutoTokenizer.from_pretrained(str(model_path))
    rows = [json.loads(line) for line in (data_dir / "train.jsonl").read_text(encoding="utf-8").splitlines() if line]
    games = [row["game"] for row in rows][: max_games or None]
    env = play.make_env()
    games_of: dict[str, list[str]] = {}
    try:
        for game in games:  # the trainer hands over prompts only
            games_of.setdefault(play.reset(env, game)[0], []).append(game)
    finally:
        env.close()
    print(f"{len(games)} train games open with {len(games_of)} different prompts", flush=True)
    rollouts = Rollouts(play, tok, games_of, generations=generations,
                        max_new_tokens=int(play.SPEC.get("max_new_tokens", 24)), temperature=1.0, seed=seed)
    # A tiny model on a CPU: recomputing costs more than it saves (transformers 5.20 renamed the flag).
    flag = ("activation_checkpointing" if "activation_checkpointing" in GRPOConfig.__dataclass_fields__
            else "gradient_checkpointing")
    no_recompute: dict[str, Any] = {flag: False}
    loss: dict[str, Any] = {"loss_type": loss_type} if loss_type else {}
    args = GRPOConfig(
        output_dir=str(out.parent / f".{out.name}-trainer"),
        max_steps=steps,
        learning_rate=lr,
        per_device_train_batch_size=games_per_step * generations,
        num_generations=generations,
        max_completion_length=tok.model_max_length,
        temperature=1.0,
        beta=beta,
        **loss,
        bf16=False,
        **no_recompute,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=seed,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(model=str(model_path), reward_funcs=game_reward, args=args, callbacks=[StopAt()],
                          # a row per game: a prompt is drawn as often as the games it opens
                          train_dataset=Dataset.from_list([{"prompt": p} for p, gs in games_of.items() for _ in gs]),
                          processing_class=tok, rollout_func=rollouts)
    try:
        trainer.train()
    finally:
        rollouts.close()
    trainer.save_model(str(out))
    tok.save_pretrained(str(out))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="the model to start from (the SFT one)")
    parser.add_argument("--data", type=Path, required=True, help="the workspace's data folder (play.py, train.jsonl)")
    parser.add_argument("--out", type=Path, required=True, help="where to save the trained model")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--generations", type=int, default=4, help="episodes per game per step (the GRPO group)")
    parser.add_argument("--games-per-step", type=int, default=4)
    parser.add_argument("--games", type=int, default=0, help="train games to draw from (0: all)")
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--beta", type=float, default=0.04, help="KL weight against the start (SFT) model")
    parser.add_argument("--loss-type", default="grpo",
                        help="TRL's loss_type: grpo averages each episode's tokens first, so a long lost episode "
                             "weighs as much as a short won one, not more")
    add_until(parser)
    args = parser.parse_args(argv)
    limit(args.until)
    print(f"GRPO: {args.steps} steps x {args.games_per_step} games x {args.generations} episodes, "
          f"online through data/play.py, from {args.model} -> {args.out}", flush=True)
    train(args.model, args.data, args.out, args.steps, args.seed, args.generations, args.games_per_step,
          args.lr, args.games, args.beta, args.loss_type)


if __name__ == "__main__":
    main()
