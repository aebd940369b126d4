"""Benchmark (GPU): one full GSM8K submission through the grader vs plain vLLM generation.

Prints the submission's total time and its parts (worker start, model load, generation,
scoring, the rest = grader overhead), then times plain ``LLM.generate`` on the same 1,319
prompts in a fresh process. Goal: grader overhead under 10% of plain generation.

Needs vLLM, a CUDA GPU and a local model folder (no network); GSM8K from the data cache, else
``--gsm8k DIR``, ``.whl/data/gsm8k`` or ``../shared/data/gsm8k`` (prepared into a temporary
cache): ``python bench/gsm8k_gpu.py /models/Qwen2.5-0.5B-Instruct``. Without a model folder, the
tiny model built in code. ``--quick``: the first 32 problems, the same steps in seconds. Where no
CUDA GPU is visible it says so in one line and exits 0 (the CPU twin is bench/vllm_grading.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
QUICK_ITEMS = 32

PLAIN = r"""
import json, sys, time
from vllm import LLM, SamplingParams
from agent2rl_tui.grader.engines.vllm_engine import capped_model_len
from agent2rl_tui.tasks.registry import load_task
from agent2rl_tui.tasks.modelfiles import load_tokenizer
from agent2rl_tui.grader.evaluators import evaluator_for
from pathlib import Path
model, limit = Path(sys.argv[1]), int(sys.argv[2]) or None
task = load_task("gsm8k"); s = task.inference
tok = load_tokenizer(model); ev = evaluator_for(task)
prompts = [tok.apply_chat_template(ev.prompt(i), tokenize=False, add_generation_prompt=True)
           for i in task.load_split("eval")[:limit]]
t0 = time.perf_counter()
llm = LLM(model=str(model), dtype=task.engine.dtype, gpu_memory_utilization=task.engine.gpu_memory_utilization,
          max_model_len=capped_model_len(model, task.engine.max_model_len))
t1 = time.perf_counter()
ids = [{"prompt_token_ids": tok(p, add_special_tokens=False)["input_ids"]} for p in prompts]
llm.generate(ids, SamplingParams(temperature=0, max_tokens=s.max_new_tokens), use_tqdm=False)
t2 = time.perf_counter()
print("RESULT " + json.dumps({"engine_start": t1 - t0, "generate": t2 - t1}), flush=True)
"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", type=Path, help="a local model folder (default: the tiny model, built in code)")
    parser.add_argument("--gsm8k", type=Path, help="a folder with GSM8K's train.jsonl and test.jsonl")
    parser.add_argument("--quick", action="store_true", help=f"the first {QUICK_ITEMS} problems: the same steps in seconds")
    return parser.parse_args()


def cuda_visible() -> bool:
    """A CUDA GPU this process may use (CUDA_VISIBLE_DEVICES honoured), as vLLM would see it."""
    import torch

    return torch.cuda.is_available()


def prepare_gsm8k(tmp: Path, folder: Path | None) -> None:
    """GSM8K's data: the cache's where it is prepared and no folder is named, else prepared from a folder."""
    from agent2rl_tui.tasks.data import prepare
    from agent2rl_tui.tasks.registry import load_task, prepared

    task = load_task("gsm8k")
    if folder is None and prepared(task):
        return
    for candidate in (folder, ROOT / ".whl" / "data" / "gsm8k", ROOT.parent / "shared" / "data" / "gsm8k"):
        if candidate is not None and (candidate / "test.jsonl").is_file():
            os.environ["AGENT2RL_DATA"] = str(tmp / "data")
            prepare(task, candidate)
            return
    raise SystemExit("GSM8K is not prepared and no folder holds it: --gsm8k DIR (train.jsonl, test.jsonl)")


def graded(tmp: Path, model: Path, limit: int | None) -> tuple[float, dict]:
    """The base model's submission (the baseline) through a real grader on vLLM: wall time, summary."""
    from support.runs import LiveGrader, make_prepared_run

    run_dir = make_prepared_run(tmp / "runs", model, task="gsm8k", budget_s=3600, eval_limit=limit,
                                engine={"engine": "vllm"})
    t = time.perf_counter()
    grader = LiveGrader(run_dir)  # scores the baseline: the base model on the eval split
    total = time.perf_counter() - t
    grader.close()
    return total, json.loads((run_dir / "evals" / "0" / "summary.json").read_text())


def plain_generation(model: Path, limit: int | None) -> dict[str, float]:
    """``LLM.generate`` of the same prompts in a fresh process: its engine's start and the generation."""
    proc = subprocess.run([sys.executable, "-c", PLAIN, str(model), str(limit or 0)], capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line.removeprefix("RESULT "))
    raise SystemExit(f"plain vLLM failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")


def main() -> None:
    args = parse_args()
    if not cuda_visible():
        print("bench/gsm8k_gpu.py needs a CUDA GPU and none is visible: nothing measured "
              "(bench/vllm_grading.py is its CPU twin)")
        return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout's TERM still stops the grader
    limit = QUICK_ITEMS if args.quick else None
    tmp = Path(tempfile.mkdtemp(prefix="bench-gsm8k-"))
    try:
        prepare_gsm8k(tmp, args.gsm8k)
        if args.model is None:
            from agent2rl_tui.tasks.tinymodel import build_tiny_model

            model = build_tiny_model(tmp / "tiny-llama")
        else:
            model = args.model.resolve()
        total, summary = graded(tmp, model, limit)
        parts = summary["timings"]
        print(f"submission (baseline, {summary['n_items']} items, engine {summary['engine']}, model {model.name}): "
              f"{total:.1f} s, score {summary['score']:.2f}")
        for k, v in parts.items():
            print(f"  {k:14} {v:7.2f} s")
        plain = plain_generation(model, limit)
        print(f"plain vLLM: engine start {plain['engine_start']:.1f} s, generate {plain['generate']:.1f} s")
        overhead = total - parts["generate"] - parts["load"]
        print(f"grader overhead beyond engine start + generation: {overhead:.1f} s "
              f"= {100 * overhead / plain['generate']:.0f}% of plain generation")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
