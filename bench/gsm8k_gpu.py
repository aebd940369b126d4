"""Benchmark (GPU): one full GSM8K submission through the grader vs plain vLLM generation.

Prints the submission's total time and its parts (worker start, model load, generation,
scoring, the rest = grader overhead), then times plain ``LLM.generate`` on the same 1,319
prompts in a fresh process. Goal: grader overhead under 10% of plain generation.

Needs vLLM, a CUDA GPU, GSM8K prepared (``agent2rl-tui data prepare gsm8k --from DIR``) and a
local model folder (no network): ``python bench/gsm8k_gpu.py /models/Qwen2.5-0.5B-Instruct``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

PLAIN = r"""
import json, sys, time
from vllm import LLM, SamplingParams
from agent2rl_tui.tasks.registry import load_task
from agent2rl_tui.tasks.modelfiles import load_tokenizer
from agent2rl_tui.grader.evaluators import evaluator_for
from pathlib import Path
model = Path(sys.argv[1]); task = load_task("gsm8k"); s = task.inference
tok = load_tokenizer(model); ev = evaluator_for(task)
prompts = [tok.apply_chat_template(ev.prompt(i), tokenize=False, add_generation_prompt=True)
           for i in task.load_split("eval")]
t0 = time.perf_counter()
llm = LLM(model=str(model), gpu_memory_utilization=task.engine.gpu_memory_utilization,
          max_model_len=task.engine.max_model_len)
t1 = time.perf_counter()
ids = [{"prompt_token_ids": tok(p, add_special_tokens=False)["input_ids"]} for p in prompts]
llm.generate(ids, SamplingParams(temperature=0, max_tokens=s.max_new_tokens), use_tqdm=False)
t2 = time.perf_counter()
print(json.dumps({"engine_start": t1 - t0, "generate": t2 - t1}))
"""


def main() -> None:
    from conftest import LiveGrader, make_prepared_run

    model = Path(sys.argv[1]).resolve()
    tmp = Path(tempfile.mkdtemp(prefix="bench-gsm8k-"))
    run_dir = make_prepared_run(tmp / "runs", model, budget_s=3600)
    # make_prepared_run makes an arith run; point its task at gsm8k.
    from agent2rl_tui.record.store import RunStore
    from agent2rl_tui.tasks.registry import load_task

    with RunStore.of_run(run_dir) as store:
        cfg = json.loads(store.run().config_json)
        cfg["task_folder"] = str(load_task("gsm8k").folder)
        store.update_run(config_json=json.dumps(cfg), task="gsm8k")
    t = time.perf_counter()
    grader = LiveGrader(run_dir)  # scores the baseline: the base model, all 1,319 problems
    total = time.perf_counter() - t
    summary = json.loads((run_dir / "evals" / "0" / "summary.json").read_text())
    parts = summary["timings"]
    grader.close()
    print(f"submission (baseline, {summary['n_items']} items, engine {summary['engine']}): "
          f"{total:.1f} s, score {summary['score']:.2f}")
    for k, v in parts.items():
        print(f"  {k:14} {v:7.2f} s")
    plain = json.loads(subprocess.run([sys.executable, "-c", PLAIN, str(model)], check=True,
                                      capture_output=True, text=True).stdout.strip().splitlines()[-1])
    print(f"plain vLLM: engine start {plain['engine_start']:.1f} s, generate {plain['generate']:.1f} s")
    overhead = total - parts["generate"] - parts["load"]
    print(f"grader overhead beyond engine start + generation: {overhead:.1f} s "
          f"= {100 * overhead / plain['generate']:.0f}% of plain generation")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
