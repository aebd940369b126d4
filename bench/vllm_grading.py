"""Benchmark: GSM8K submissions graded through the grader on vLLM vs plain vLLM generation.

A run on the ``gsm8k`` task (a fixed slice of its eval split, ``--limit``) with the tiny model,
graded by the real grader subprocess with ``engine = vllm`` (the CPU build here, the CUDA
build on a GPU machine). The baseline starts the engine; then ``--submissions`` checkpoints of
the same architecture are submitted, each loaded into the warm engine in place. For each:
total submit-to-scored time and its parts (worker start, engine start or reload, generation,
scoring, the rest = grader overhead). Then plain ``LLM.generate`` of the same prompts in one
process with the same settings. Goal: a warm submission <= 1.1x plain generation.

Needs vLLM and GSM8K (``../shared/data/gsm8k`` or ``--gsm8k DIR``; without it the offline
``arith`` task is used). Run: ``python bench/vllm_grading.py [--limit 200] [--quick]`` (``--quick``:
8 items and one submission, the same steps, its time mostly vLLM's two starts). Prints figures;
asserts nothing. On a GPU machine with a real model see bench/gsm8k_gpu.py.
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

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

PLAIN = r"""
import json, sys, time
if __name__ == "__main__":
    from pathlib import Path
    from agent2rl_tui.grader.engines.vllm_engine import VLLMEngine
    from agent2rl_tui.grader.engines import visible_gpus
    from agent2rl_tui.grader.evaluators import evaluator_for
    from agent2rl_tui.tasks.registry import engine_settings, load_task
    model, task_name, limit, overrides = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
    task = load_task(task_name)
    engine = VLLMEngine(engine_settings(task.engine, overrides), visible_gpus())
    t0 = time.perf_counter()
    engine.load(model)
    t1 = time.perf_counter()
    ev = evaluator_for(task)
    prompts = [engine.render(ev.prompt(i)) for i in task.load_split("eval")[:limit]]
    engine.generate(prompts, task.inference)
    t2 = time.perf_counter()
    engine.generate(prompts, task.inference)
    t3 = time.perf_counter()
    print("RESULT " + json.dumps({"engine_start": t1 - t0, "generate_first": t2 - t1, "generate": t3 - t2}), flush=True)
    engine.close()
"""
ENGINE = {"engine": "vllm", "cpu_kv_cache_gib": "0.5", "dtype": "float32"}
FULL = {"limit": 200, "submissions": 3}
QUICK = {"limit": 8, "submissions": 1}


def parse_args() -> argparse.Namespace:
    """The options; sizes left unset take the full run's defaults, or --quick's."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, help=f"eval items per submission (default {FULL['limit']})")
    parser.add_argument("--submissions", type=int, help=f"default {FULL['submissions']}")
    parser.add_argument("--gsm8k", type=Path, default=REPO.parent / "shared" / "data" / "gsm8k")
    parser.add_argument("--quick", action="store_true", help="8 items, one submission: the same steps")
    args = parser.parse_args()
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def main() -> None:
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout's TERM still stops the grader and vLLM
    tmp = Path(tempfile.mkdtemp(prefix="bench-vllm-"))
    try:
        measure(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def measure(args: argparse.Namespace, tmp: Path) -> None:
    """The grader's submissions on vLLM, then plain generation of the same prompts."""
    from support.runs import LiveGrader, make_prepared_run

    from agent2rl_tui.tasks.data import prepare
    from agent2rl_tui.tasks.registry import load_task
    from agent2rl_tui.tasks.tinymodel import build_tiny_model

    os.environ["AGENT2RL_DATA"] = str(tmp / "data")
    task = "arith"
    if args.gsm8k.is_dir():
        prepare(load_task("gsm8k"), args.gsm8k)
        task = "gsm8k"
    models = [build_tiny_model(tmp / f"m{i}", weights_seed=i) for i in range(args.submissions + 1)]
    run_dir = make_prepared_run(tmp / "runs", models[0], task=task, eval_limit=args.limit, engine=ENGINE)
    print(f"task {task}, {args.limit} items per submission, tiny model, vLLM {ENGINE}")
    t = time.perf_counter()
    grader = LiveGrader(run_dir)  # the baseline starts the engine
    grader.client.submission(0)
    rows = []
    try:
        for i, model in enumerate(models[1:], 1):
            shutil.copytree(model, run_dir / "workspace" / "output" / f"m{i}")
            time.sleep(2)  # let the worker finish its idle step, as between an agent's submissions
            t0 = time.perf_counter()
            body = grader.client.submit(f"output/m{i}").json()
            wall = time.perf_counter() - t0
            s = json.loads((run_dir / "evals" / str(body["submission_id"]) / "summary.json").read_text())
            rows.append((wall, s))
    finally:
        grader.close()
    base = json.loads((run_dir / "evals" / "0" / "summary.json").read_text())
    if not base.get("ok"):
        log = (run_dir / "evals" / "0" / "worker.log").read_text(errors="replace")
        raise SystemExit(f"the baseline failed: {base.get('error')}\n{log[-3000:]}")
    bt = base["timings"]
    print(f"baseline (cold): worker start {bt['worker_start']:.1f} s, engine start {bt.get('engine_start', 0):.1f} s, "
          f"generate {bt['generate']:.2f} s, score {bt['score']:.3f} s  (grader up and scored in "
          f"{time.perf_counter() - t:.0f} s incl. the later submissions)")
    for wall, s in rows:
        tm = s["timings"]
        rest = wall - tm["load"] - tm["generate"] - tm["score"]
        print(f"submission {s['submission_id']} ({s['settings']['engine_load']}): submit->scored {wall:.2f} s = "
              f"load {tm['load']:.2f} + generate {tm['generate']:.2f} + score {tm['score']:.3f} + rest {rest:.2f}")
    proc = subprocess.run([sys.executable, "-c", PLAIN, str(models[1]), task, str(args.limit), json.dumps(ENGINE)],
                          capture_output=True, text=True, env={**os.environ, "VLLM_CPU_OMP_THREADS_BIND": "nobind"})
    plain = next((json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")), None)
    if plain is None:
        raise SystemExit(f"plain vLLM failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    warm = sorted(wall for wall, s in rows if s["settings"]["engine_load"] == "reload")
    median = warm[len(warm) // 2] if warm else float("nan")
    print(f"plain vLLM, same prompts, one process: engine start {plain['engine_start']:.1f} s, generate "
          f"{plain['generate']:.2f} s (first call {plain['generate_first']:.2f} s)")
    print(f"warm submission / plain generation = {median / plain['generate']:.2f}x (goal <= 1.1x)")


if __name__ == "__main__":
    main()
