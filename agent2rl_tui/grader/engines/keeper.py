"""The eval worker's engine, kept warm from one submission to the next.

Starting a vLLM engine costs tens of seconds on a CPU and a minute or more on a GPU; swapping
the weights of a checkpoint of the same architecture into a running one costs a fraction of
a second. So the keeper keeps one vLLM engine and reloads weights in place when the next
checkpoint's architecture key (config, generation config, tokenizer files) and the engine
settings are those it was started with; anything else gets a fresh engine. A reload scores
exactly what a fresh engine scores (tests/system/test_vllm.py checks it item by item).

Between evaluations a vLLM engine on a GPU sleeps (its weights and KV cache are freed) so
the agent's own training has the GPU; a transformers model is dropped, as it reloads in
well under a second.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent2rl_tui.grader.engines import Engine, EngineError, engine_for, visible_gpus
from agent2rl_tui.grader.engines.vllm_engine import VLLMEngine
from agent2rl_tui.tasks.modelfiles import architecture_key, tensor_names, weight_files
from agent2rl_tui.tasks.registry import EngineSettings


@dataclass
class Loaded:
    """How a submission's model came to be in the engine, for its record."""

    how: str
    """``fresh`` (a new engine), ``reload`` (weights swapped into the warm engine)."""
    why: str
    """Why this engine (``choose_engine``'s reason), and for a fresh vLLM engine why not a reload."""
    seconds: float
    timings: dict[str, float] = field(default_factory=dict)
    effective: dict[str, Any] = field(default_factory=dict)
    """Settings as the engine applied them (device, dtype), beside the requested ones."""


class EngineKeeper:
    """One engine at a time, warm across the jobs of one eval worker."""

    def __init__(self) -> None:
        self.engine: Engine | None = None
        self.key: str | None = None
        self.tensors: frozenset[str] = frozenset()
        """The tensors of the checkpoint the warm engine was started with (its load was strict)."""

    def load(self, settings: EngineSettings, model_path: Path) -> tuple[Engine, Loaded]:
        """The engine for this checkpoint: the warm one with new weights where it can be."""
        name, why = engine_for(settings.engine, model_path)
        gpus = visible_gpus() if name == "vllm" else 0
        t0 = time.perf_counter()
        if name == "vllm":
            return self._vllm(settings, gpus, model_path, why, t0)
        from agent2rl_tui.grader.engines.hf import TransformersEngine

        self.close()
        engine = TransformersEngine(seed=settings.seed)
        engine.load(model_path)
        self.engine, self.key = engine, None
        return engine, Loaded("fresh", why, time.perf_counter() - t0, effective={"device": engine.device})

    def _vllm(self, settings: EngineSettings, gpus: int, model_path: Path, why: str,
              t0: float) -> tuple[Engine, Loaded]:
        key = json.dumps([architecture_key(model_path), settings.to_dict(), os.environ.get("CUDA_VISIBLE_DEVICES")])
        tensors = tensor_names(model_path, [p.name for p in weight_files(model_path) if p.suffix == ".safetensors"])
        engine = self.engine
        # An in-place reload loads what the checkpoint holds and leaves the rest as it was: only a
        # checkpoint holding every tensor of the strictly loaded one may be swapped in.
        same = isinstance(engine, VLLMEngine) and self.key == key
        if same and self.tensors and tensors >= self.tensors:
            assert isinstance(engine, VLLMEngine)
            try:
                timings = engine.reload(model_path)
                return engine, Loaded("reload", why, time.perf_counter() - t0, timings, engine.effective())
            except EngineError as exc:  # a reload that fails leaves the engine in doubt: start afresh
                print(f"reloading weights in place failed ({exc}); starting a fresh engine", file=sys.stderr,
                      flush=True)
                why += "; fresh engine: the in-place reload failed"
        elif same:
            why += ("; fresh engine: the checkpoint lacks tensors the warm engine's has" if self.tensors and tensors
                    else "; fresh engine: the checkpoint's tensors cannot be checked (not safetensors)")
        elif isinstance(engine, VLLMEngine):
            why += "; fresh engine: the architecture, tokenizer or engine settings differ from the warm one's"
        self.close()
        fresh = VLLMEngine(settings, gpus)
        fresh.load(model_path)
        self.engine, self.key, self.tensors = fresh, key, tensors
        seconds = time.perf_counter() - t0
        return fresh, Loaded("fresh", why, seconds, {"engine_start": seconds}, fresh.effective())

    def idle(self) -> None:
        """Between jobs: a vLLM engine on a GPU sleeps; a transformers model is let go."""
        if isinstance(self.engine, VLLMEngine):
            note = self.engine.sleep()
            if note:
                print(note, file=sys.stderr, flush=True)
        elif self.engine is not None:
            self.close()

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
        self.engine, self.key, self.tensors = None, None, frozenset()
