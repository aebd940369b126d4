"""Generation engines behind one interface: vLLM on a GPU box, transformers anywhere.

``choose_engine`` decides which one a submission gets (and says why); it is a pure function
so the selection logic is tested on every machine, GPU or not.
"""

from __future__ import annotations

import importlib.util
import os

from agent2rl_tui.grader.engines.base import Engine, EngineError
from agent2rl_tui.tasks.registry import EngineSettings

__all__ = ["Engine", "EngineError", "choose_engine", "make_engine", "visible_gpus", "vllm_installed"]


def vllm_installed() -> bool:
    return importlib.util.find_spec("vllm") is not None


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


def choose_engine(requested: str, *, vllm_available: bool, gpus: int) -> tuple[str, str]:
    """(engine, reason). ``auto`` takes vLLM when it is installed and a GPU is visible."""
    if requested == "transformers":
        return "transformers", "asked for"
    if requested == "vllm":
        if not vllm_available:
            raise EngineError("the task asks for vLLM, which is not installed: pip install 'agent2rl-tui[vllm]'")
        if gpus == 0:
            raise EngineError("the task asks for vLLM, which needs a CUDA GPU, and none is visible")
        return "vllm", "asked for"
    if requested != "auto":
        raise EngineError(f"unknown engine {requested!r}: use auto, vllm or transformers")
    if vllm_available and gpus > 0:
        return "vllm", f"auto: vLLM installed, {gpus} GPU(s) visible"
    why = "vLLM not installed" if not vllm_available else "no GPU visible"
    return "transformers", f"auto: {why}"


def make_engine(settings: EngineSettings | None = None) -> tuple[Engine, str]:
    settings = settings or EngineSettings()
    gpus = visible_gpus() if settings.engine != "transformers" else 0
    name, why = choose_engine(settings.engine, vllm_available=vllm_installed(), gpus=gpus)
    if name == "vllm":
        from agent2rl_tui.grader.engines.vllm_engine import VLLMEngine

        return VLLMEngine(settings, gpus), why
    from agent2rl_tui.grader.engines.hf import TransformersEngine

    return TransformersEngine(), why
