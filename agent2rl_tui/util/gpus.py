"""The machine's GPUs through NVML (nvidia-ml-py), read without touching CUDA.

The eval worker must not initialise CUDA before vLLM starts, and the vitals sampler runs on
machines with no GPU at all: NVML answers both, and a machine without it reads "no GPU".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent2rl_tui.util.numbers import is_digits


@dataclass
class GpuSample:
    index: int
    name: str
    util_pct: float
    mem_used: int
    mem_total: int


class Gpus:
    """NVML when it is there; otherwise an empty list and a note saying why."""

    def __init__(self) -> None:
        self.nvml: Any = None
        self.note = ""
        self.reason = ""
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
        except Exception as exc:  # noqa: BLE001 - ImportError, NVMLError_LibraryNotFound, ...
            self.note = "no GPU"
            self.reason = f"{type(exc).__name__}: {exc}"

    def count(self) -> int:
        return self.nvml.nvmlDeviceGetCount() if self.nvml else 0

    def sample(self) -> list[GpuSample]:
        if not self.nvml:
            return []
        out = []
        for i in range(self.nvml.nvmlDeviceGetCount()):
            h = self.nvml.nvmlDeviceGetHandleByIndex(i)
            name = self.nvml.nvmlDeviceGetName(h)
            util = self.nvml.nvmlDeviceGetUtilizationRates(h)
            mem = self.nvml.nvmlDeviceGetMemoryInfo(h)
            out.append(GpuSample(i, name.decode() if isinstance(name, bytes) else name, float(util.gpu),
                                 int(mem.used), int(mem.total)))
        return out


def visible_gpu_count() -> int:
    """GPUs NVML sees on this machine (0 without NVML), before CUDA_VISIBLE_DEVICES."""
    return Gpus().count()


def used_memory() -> int | None:
    """Bytes in use on the GPUs this process may use (CUDA_VISIBLE_DEVICES by index, else all),
    read through NVML; None without NVML or GPUs."""
    import os

    samples = Gpus().sample()
    if not samples:
        return None
    wanted = os.environ.get("CUDA_VISIBLE_DEVICES")
    if wanted and all(is_digits(d.strip()) for d in wanted.split(",")):
        indices = {int(d) for d in wanted.split(",")}
        samples = [s for s in samples if s.index in indices]
    return sum(s.mem_used for s in samples)
