"""Does the example agent's GRPO stage beat its own SFT stage? Held-out greedy success, per seed.

The paper's story on ALFWorld is "SFT warm-up, then GRPO with online rollouts". This bench plays
the example agent's two Level-3 stages as its route runs them (its own ``episodes_sft.py`` and
``episodes_grpo.py``, copied into a code folder beside a workspace's ``data/``, run as
subprocesses with its defaults unless told otherwise) and grades the base model, the SFT model
and the GRPO model on the same held-out test-fold games with the grader's own episode runner
(greedy, the task's prompt and step limit). Per seed: the three success rates and the time of
each stage; then the mean gain of GRPO over SFT with a 95% bootstrap interval (games resampled
within each seed, seeds resampled), so "GRPO beats SFT" is claimed only when the interval
excludes 0.

Measured (docs/train-envs.md): coin, 3 seeds, SFT 52.3% -> GRPO 63.0%, +10.7 points [+3.7, +19.7].

Run: ``python bench/rl_vs_sft.py [--task coin] [--seeds 0,1,2] [--sft-steps N] [--grpo-steps N]
[--eval-games N] [--size tiny|small] [--quick]``. ``small`` is a larger model built in code (hidden 128,
4 layers) for when the tiny one cannot learn the task. ``--quick``: one seed, 4 train games, 2 SFT
steps, 1 GRPO step of 1 game x 2 episodes, 1 held-out game (what an option sets still wins): the
same stages and grading in seconds, nothing learned. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

from agent2rl_tui.grader.engines.hf import TransformersEngine
from agent2rl_tui.grader.evaluators.episodes import play_task
from agent2rl_tui.run.workspace import write_play_kit
from agent2rl_tui.tasks.registry import Task, load_task, write_jsonl
from agent2rl_tui.tasks.tinymodel import build_tiny_model

SCRIPTS = "agent2rl_tui.agents.example.scripts"
EVAL_SEED = 20261126  # every model of every seed is graded on the same draw of test-fold games
FULL = {"seeds": "0,1,2", "sft_steps": 300, "grpo_steps": 200, "generations": 8, "games_per_step": 4, "games": 0,
        "eval_games": 100}
QUICK = {"seeds": "0", "sft_steps": 2, "grpo_steps": 1, "generations": 2, "games_per_step": 1, "games": 4,
         "eval_games": 1}


def workspace(root: Path, task: Task) -> Path:
    """A workspace's data/ (train games, play kit) and code/ (the example agent's two scripts)."""
    data, code = root / "data", root / "code"
    data.mkdir(parents=True)
    code.mkdir()
    write_jsonl(data / "train.jsonl", task.load_split("train"))
    write_play_kit(data, task, task.settings_for(None))
    for name in ("episodes_sft.py", "episodes_grpo.py", "lean_imports.py", "timebox.py"):
        (code / name).write_text(resources.files(SCRIPTS).joinpath(name).read_text(encoding="utf-8"), encoding="utf-8")
    return root


def stage(root: Path, script: str, *args: str) -> float:
    """Run one of the agent's scripts in the workspace; its wall time in seconds."""
    t = time.perf_counter()
    env = os.environ | {"HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}
    proc = subprocess.run([sys.executable, "-u", f"code/{script}", *args], cwd=root, env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{script} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    summary = [line for line in proc.stdout.splitlines() if line.startswith(("expert:", "rollouts:"))]
    if summary:
        print(f"    {script}: {summary[0]}" + (f" ... {summary[-1]}" if len(summary) > 1 else ""), flush=True)
    return time.perf_counter() - t


def greedy_wins(task: Task, model: Path, games: list[dict[str, Any]]) -> list[int]:
    """1 per held-out game the model wins, played by the grader's own runner."""
    engine = TransformersEngine()
    engine.load(model)
    try:
        results, _summary = play_task(task, engine, games, task.settings_for(None))
    finally:
        engine.close()
    return [int(bool(r.correct)) for r in results]


def bootstrap_gain(per_seed: list[tuple[list[int], list[int]]], draws: int = 10_000,
                   seed: int = 0) -> tuple[float, float, float]:
    """Mean (after - before) success in points, and its 95% interval: seeds resampled, then
    games within each seed (paired: a game keeps both its results)."""
    rng = random.Random(seed)

    def gain(pairs: list[tuple[int, int]]) -> float:
        return 100.0 * sum(a - b for b, a in pairs) / len(pairs)

    seeds = [list(zip(before, after, strict=True)) for before, after in per_seed]
    point = statistics.mean(gain(p) for p in seeds)
    stats = sorted(statistics.mean(gain(rng.choices(p, k=len(p))) for p in rng.choices(seeds, k=len(seeds)))
                   for _ in range(draws))
    return point, stats[int(0.025 * draws)], stats[int(0.975 * draws) - 1]


def build_model(path: Path, size: str) -> Path:
    if size == "tiny":
        return build_tiny_model(path, max_positions=2048)
    build_tiny_model(path, max_positions=2048)  # the tokenizer, then a wider, deeper model over it
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(**{**json.loads((path / "config.json").read_text()), "hidden_size": 128,
                         "intermediate_size": 384, "num_hidden_layers": 4, "num_attention_heads": 4,
                         "num_key_value_heads": 4, "head_dim": 32})
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(path)
    AutoTokenizer.from_pretrained(path).save_pretrained(path)
    return path


def parse_args() -> argparse.Namespace:
    """The options; those left unset take the full run's defaults, or --quick's."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="coin")
    parser.add_argument("--seeds", help=f"default {FULL['seeds']} (--quick {QUICK['seeds']})")
    parser.add_argument("--sft-steps", type=int, help=f"default {FULL['sft_steps']}")
    parser.add_argument("--grpo-steps", type=int, help=f"default {FULL['grpo_steps']}")
    parser.add_argument("--generations", type=int, help=f"default {FULL['generations']}")
    parser.add_argument("--games-per-step", type=int, help=f"default {FULL['games_per_step']}")
    parser.add_argument("--grpo-lr", type=float, default=3e-4)
    parser.add_argument("--beta", type=float, default=0.04)
    parser.add_argument("--loss-type", default="grpo")
    parser.add_argument("--games", type=int, help="train games the stages draw from (default 0: all)")
    parser.add_argument("--eval-games", type=int, help=f"default {FULL['eval_games']}")
    parser.add_argument("--size", choices=("tiny", "small"), default="tiny")
    parser.add_argument("--keep", type=Path, help="keep the workspaces here")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: the same stages and grading in seconds")
    args = parser.parse_args()
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def main() -> None:
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a TERM still ends the training process and the temp folder
    task = load_task(args.task)
    games = task.eval_items(EVAL_SEED)[: args.eval_games]
    print(f"task {task.name}: {len(task.load_split('train'))} train games; {len(games)} held-out test-fold games; "
          f"SFT {args.sft_steps} steps, GRPO {args.grpo_steps} steps x {args.games_per_step} games x "
          f"{args.generations} episodes (lr {args.grpo_lr}, beta {args.beta}, loss {args.loss_type}); "
          f"model {args.size}; {os.cpu_count()} CPUs", flush=True)
    per_seed: list[tuple[list[int], list[int]]] = []
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = build_model(Path(tmp) / "base", args.size)
        base_wins = greedy_wins(task, base, games)
        print(f"base model: {100 * sum(base_wins) / len(games):.0f}% of {len(games)} held-out games", flush=True)
        for seed in (int(s) for s in args.seeds.split(",")):
            root = workspace(Path(tmp) / f"seed{seed}", task)
            v1, v2 = root / "output" / "v1", root / "output" / "v2"
            sft_s = stage(root, "episodes_sft.py", "--model", str(base), "--data", "data", "--out", str(v1),
                          "--steps", str(args.sft_steps), "--games", str(args.games), "--seed", str(seed))
            sft = greedy_wins(task, v1, games)
            grpo_s = stage(root, "episodes_grpo.py", "--model", str(v1), "--data", "data", "--out", str(v2),
                           "--steps", str(args.grpo_steps), "--games", str(args.games), "--seed", str(seed),
                           "--generations", str(args.generations), "--games-per-step", str(args.games_per_step),
                           "--lr", str(args.grpo_lr), "--beta", str(args.beta), "--loss-type", args.loss_type)
            grpo = greedy_wins(task, v2, games)
            per_seed.append((sft, grpo))
            row = {"seed": seed, "sft": 100 * sum(sft) / len(games), "grpo": 100 * sum(grpo) / len(games),
                   "sft_s": round(sft_s, 1), "grpo_s": round(grpo_s, 1)}
            rows.append(row)
            print(f"  seed {seed}: SFT {row['sft']:.0f}% ({sft_s:.0f} s), then GRPO {row['grpo']:.0f}% "
                  f"({grpo_s:.0f} s); {sft_s + grpo_s:.0f} s of training", flush=True)
            if args.keep:
                shutil.copytree(root, args.keep / f"seed{seed}", dirs_exist_ok=True)
    point, low, high = bootstrap_gain(per_seed)
    print(f"SFT mean {statistics.mean(r['sft'] for r in rows):.1f}%, GRPO mean {statistics.mean(r['grpo'] for r in rows):.1f}%; "
          f"GRPO - SFT = {point:+.1f} points, 95% bootstrap interval [{low:+.1f}, {high:+.1f}] "
          f"({'beats SFT' if low > 0 else 'worse than SFT' if high < 0 else 'within noise'})")
    print(json.dumps({"task": task.name, "args": {k: str(v) for k, v in vars(args).items()}, "seeds": rows,
                      "base": 100 * sum(base_wins) / len(games), "gain": point, "ci95": [low, high]}))


if __name__ == "__main__":
    main()
