"""Interactive tasks served by the run (WebShop, DeepSearchQA), stage two: GRPO with online rollouts.

Usage: ``python code/service_grpo.py --model output/v1 --data data --out output/v2``.
Each step draws ``--games-per-step`` train games and plays each ``--generations`` times through
``$TRAIN_ENV_URL`` (``data/play.py``), sampling every completion from the model being trained.
The prompt of each turn is the service's (the grader's, so WebShop's rebuilt chat prompt too),
which is why a turn, not a whole episode, is the unit here: every turn of an episode shares the
episode's advantage, its reward minus the mean of its game's group over their spread (GRPO's
group baseline; a group whose episodes all scored the same teaches nothing and is skipped). One
update per batch of fresh rollouts keeps it on-policy, so the clipped ratio is 1 and the loss is
the advantage-weighted log-likelihood of the sampled completions (no KL term: beta 0).
A searching task's reward is the service's (``--reward``: exact, f1, or the run's judge).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path
from typing import Any

import lean_imports  # noqa: F401  (before anything imports TRL or transformers)
from timebox import add_until, limit, time_up


def load_play_kit(data_dir: Path) -> Any:
    sys.path.insert(0, str(data_dir.resolve()))
    import play  # data/play.py, written by the benchmark

    return play


class Sampler:
    """Completions from the model, cut where the grader cuts them (its stop strings)."""

    def __init__(self, model: Any, tok: Any, max_new_tokens: int, stops: list[str], temperature: float) -> None:
        self.model, self.tok = model, tok
        self.max_new_tokens, self.stops, self.temperature = max_new_tokens, stops, temperature

    def __call__(self, prompts: list[str]) -> list[str]:
        import torch

        tok = self.tok
        enc = [tok(p, add_special_tokens=False)["input_ids"][-(tok.model_max_length - self.max_new_tokens):]
               for p in prompts]
        width = max(len(e) for e in enc)
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        ids = torch.tensor([[pad] * (width - len(e)) + e for e in enc])
        mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in enc])
        with torch.no_grad():
            out = self.model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=self.temperature,
                                      top_k=0, top_p=1.0, max_new_tokens=self.max_new_tokens, pad_token_id=pad,
                                      stop_strings=self.stops or None, tokenizer=tok)
        texts = tok.batch_decode(out[:, width:], skip_special_tokens=True)
        return [self.cut(t) for t in texts]

    def cut(self, text: str) -> str:
        for stop in self.stops:
            if stop in text:
                text = text[:text.index(stop)]
        return text


def rollouts(play: Any, sample: Sampler, games: list[str], generations: int, reward: str | None) -> list[dict[str, Any]]:
    """``generations`` episodes of each game, played together (one sampling call per turn)."""
    batch = [g for g in games for _ in range(generations)]
    return play.play(sample, batch, pool=len(batch), reward=reward)


def advantages(episodes: list[dict[str, Any]]) -> list[float]:
    """Each episode's reward against its game's group: (r - mean) / sd; 0 where the group agrees."""
    groups: dict[str, list[float]] = {}
    for ep in episodes:
        groups.setdefault(ep["game"], []).append(float(ep["reward"]))
    out = []
    for ep in episodes:
        scores = groups[ep["game"]]
        sd = statistics.pstdev(scores)
        out.append(0.0 if sd == 0 else (float(ep["reward"]) - statistics.fmean(scores)) / sd)
    return out


def update(model: Any, tok: Any, optimizer: Any, episodes: list[dict[str, Any]], adv: list[float]) -> float | None:
    """One gradient step on -A * log p(completion | prompt), averaged over the turns trained."""
    import torch

    turns = [(t["prompt"], t["completion"], a) for ep, a in zip(episodes, adv) if a != 0 for t in ep["turns"]]
    if not turns:
        return None
    model.train()
    optimizer.zero_grad()
    total = 0.0
    for prompt, completion, a in turns:
        p = tok(prompt, add_special_tokens=False)["input_ids"]
        c = tok(completion, add_special_tokens=False)["input_ids"] or [tok.eos_token_id]
        keep = tok.model_max_length - len(c)
        p = p[-keep:] if keep > 0 else []
        ids = torch.tensor([p + c])
        logits = model(input_ids=ids).logits[0, len(p) - 1:-1] if p else model(input_ids=ids).logits[0, :-1]
        targets = ids[0, len(p):] if p else ids[0, 1:]
        logp = torch.log_softmax(logits.float(), -1).gather(1, targets[:, None]).squeeze(1).mean()
        loss = -a * logp / len(turns)
        loss.backward()
        total += float(loss)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    model.eval()
    return total


def train(model_path: Path, data_dir: Path, out: Path, steps: int, games_per_step: int, generations: int,
          lr: float, seed: int, reward: str | None, max_games: int) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    random.seed(seed)
    torch.manual_seed(seed)
    play = load_play_kit(data_dir)
    tok = AutoTokenizer.from_pretrained(str(model_path))
    model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=torch.float32)
    model.eval()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    sample = Sampler(model, tok, int(play.SPEC.get("max_new_tokens", 64)), list(play.SPEC.get("stop") or []), 1.0)
    rows = [json.loads(line) for line in (data_dir / "train.jsonl").read_text(encoding="utf-8").splitlines() if line]
    games = [r["game"] for r in rows][: max_games or None]
    for step in range(steps):
        if time_up():
            print(f"time is up: stopping after step {step} of {steps} and saving", flush=True)
            break
        chosen = random.sample(games, min(games_per_step, len(games)))
        episodes = rollouts(play, sample, chosen, generations, reward)
        adv = advantages(episodes)
        loss = update(model, tok, optimizer, episodes, adv)
        mean = statistics.fmean(float(e["reward"]) for e in episodes)
        print(f"GRPO step {step + 1}/{steps}: {len(episodes)} episodes, mean reward {mean:.3f}, "
              f"{sum(e['won'] for e in episodes)} won, "
              + (f"loss {loss:.4f}" if loss is not None else "every group agreed: no update"), flush=True)
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="the model to start from (the SFT one)")
    parser.add_argument("--data", type=Path, required=True, help="the workspace's data folder (play.py, train.jsonl)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--games-per-step", type=int, default=2)
    parser.add_argument("--generations", type=int, default=4, help="episodes per game per step (the GRPO group)")
    parser.add_argument("--games", type=int, default=0, help="train games to draw from (0: all)")
    parser.add_argument("--reward", default=None, help="a searching task's reward: exact (default), f1 or judge")
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--seed", type=int, default=0)
    add_until(parser)
    args = parser.parse_args(argv)
    limit(args.until)
    print(f"GRPO: {args.steps} steps x {args.games_per_step} games x {args.generations} episodes, online through "
          f"$TRAIN_ENV_URL, from {args.model} -> {args.out}", flush=True)
    train(args.model, args.data, args.out, args.steps, args.games_per_step, args.generations, args.lr, args.seed,
          args.reward, args.games)


if __name__ == "__main__":
    main()
