"""Generation engines behind one interface: transformers here, vLLM on a GPU box."""

from __future__ import annotations

from agent2rl_tui.grader.engines.base import Engine, EngineError

__all__ = ["Engine", "EngineError", "make_engine"]


def make_engine(name: str = "transformers") -> Engine:
    if name == "transformers":
        from agent2rl_tui.grader.engines.hf import TransformersEngine

        return TransformersEngine()
    raise EngineError(f"unknown engine {name!r}; available: transformers")
