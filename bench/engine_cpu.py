"""Benchmark (CPU): which engine generates faster for a model of a given size, vLLM or transformers?

``auto`` takes vLLM on a GPU; on a CPU it takes whichever this bench shows faster for the
model at hand, by parameter count (``CPU_VLLM_MIN_PARAMS`` in grader/engines). For each size a
randomly initialised Llama (the tiny model's tokenizer, so only the body grows) generates the
same 64 chat prompts, 128 new tokens each (end-of-sequence ignored so both engines do the
same work): transformers batched as the tasks batch (32), vLLM from a fresh engine (its
start-up is printed apart: a warm engine pays it once per run).

Run: ``python bench/engine_cpu.py [--sizes tiny,s,m,l] [--quick]`` (minutes; ``--quick``: the tiny
size, 8 prompts x 16 new tokens, the same steps, its time mostly vLLM's start). Prints figures;
asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIZES = {  # name: (hidden, intermediate, layers, heads, kv heads)
    "tiny": (64, 128, 2, 2, 1),
    "s": (256, 768, 4, 8, 2),
    "m": (512, 1536, 8, 16, 4),
    "l": (1024, 2816, 12, 32, 8),
    "xl": (896, 4864, 24, 14, 2),  # Qwen2.5-0.5B's body
}
N_PROMPTS, NEW_TOKENS = 64, 128
QUICK_PROMPTS, QUICK_NEW_TOKENS = 8, 16
VLLM_ENV = {"VLLM_CPU_OMP_THREADS_BIND": "nobind"}  # as the grader runs it (grader/server/workers.py)

VLLM_RUN = r"""
import json, sys, time
if __name__ == "__main__":
    from pathlib import Path
    from agent2rl_tui.grader.engines.vllm_engine import VLLMEngine
    from agent2rl_tui.tasks.registry import EngineSettings, InferenceSettings
    path, n, new = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    t0 = time.perf_counter()
    engine = VLLMEngine(EngineSettings(engine="vllm"), 0)  # as the grader starts it on a CPU
    engine.load(path)
    t1 = time.perf_counter()
    engine.llm.llm_engine  # noqa: B018 - the engine is up
    prompts = [engine.render([{"role": "user", "content": f"what is {a} plus {a}?"}]) for a in range(n)]
    from vllm import SamplingParams
    ids = [{"prompt_token_ids": engine.tokenizer(p, add_special_tokens=False)["input_ids"]} for p in prompts]
    engine.llm.generate(ids, SamplingParams(temperature=0, max_tokens=new, ignore_eos=True), use_tqdm=False)
    t2 = time.perf_counter()
    print("RESULT " + json.dumps({"start": t1 - t0, "generate": t2 - t1}), flush=True)
"""


def build(path: Path, shape: tuple[int, int, int, int, int]) -> int:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from agent2rl_tui.tasks.tinymodel import build_tiny_model

    build_tiny_model(path)  # the tokenizer and config to start from
    cfg = json.loads((path / "config.json").read_text())
    hidden, inter, layers, heads, kv = shape
    cfg.update(hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers, num_attention_heads=heads,
               num_key_value_heads=kv, head_dim=hidden // heads)
    config = LlamaConfig(**{k: v for k, v in cfg.items() if k not in ("architectures", "transformers_version")})
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.save_pretrained(path, safe_serialization=True)
    return sum(p.numel() for p in model.parameters())


def transformers_rate(path: Path, n_prompts: int, new_tokens: int) -> float:
    from agent2rl_tui.grader.engines.hf import TransformersEngine
    from agent2rl_tui.tasks.registry import InferenceSettings

    engine = TransformersEngine()
    engine.load(path)
    prompts = [engine.render([{"role": "user", "content": f"what is {a} plus {a}?"}]) for a in range(n_prompts)]
    engine.model.generation_config.min_new_tokens = new_tokens  # no early end: the same work as vLLM's
    t = time.perf_counter()
    engine.generate(prompts, InferenceSettings(max_new_tokens=new_tokens, batch_size=32))
    return time.perf_counter() - t


def vllm_rate(path: Path, n_prompts: int, new_tokens: int) -> dict[str, float]:
    """vLLM in a fresh process (its engine's start timed apart): seconds to start and to generate."""
    proc = subprocess.run([sys.executable, "-c", VLLM_RUN, str(path), str(n_prompts), str(new_tokens)],
                          capture_output=True, text=True, env={**os.environ, "VLLM_CONFIGURE_LOGGING": "0", **VLLM_ENV})
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(proc.stderr[-2000:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", help="comma-separated, of " + ",".join(SIZES) + " (default tiny,s,m,l; --quick tiny)")
    parser.add_argument("--quick", action="store_true",
                        help=f"tiny, {QUICK_PROMPTS} prompts x {QUICK_NEW_TOKENS} tokens: the same steps, quickly")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout's TERM still ends the vLLM process
    sizes = args.sizes or ("tiny" if args.quick else "tiny,s,m,l")
    n_prompts, new_tokens = (QUICK_PROMPTS, QUICK_NEW_TOKENS) if args.quick else (N_PROMPTS, NEW_TOKENS)
    with tempfile.TemporaryDirectory(prefix="bench-engine-cpu-") as tmp:
        compare(Path(tmp), sizes.split(","), n_prompts, new_tokens)


def compare(tmp: Path, sizes: list[str], n_prompts: int, new_tokens: int) -> None:
    """Each size on both engines: tokens per second, and vLLM's start apart."""
    print(f"{n_prompts} prompts x {new_tokens} new tokens, greedy, {os.cpu_count()} CPUs")
    for name in sizes:
        path = tmp / name
        params = build(path, SIZES[name])
        hf = transformers_rate(path, n_prompts, new_tokens)
        vl = vllm_rate(path, n_prompts, new_tokens)
        tokens = n_prompts * new_tokens
        print(f"{name:5} {params / 1e6:8.2f}M params  transformers {tokens / hf:8.0f} tok/s ({hf:6.1f} s)   "
              f"vLLM {tokens / vl['generate']:8.0f} tok/s ({vl['generate']:6.1f} s; engine start {vl['start']:.0f} s)",
              flush=True)


if __name__ == "__main__":
    main()
