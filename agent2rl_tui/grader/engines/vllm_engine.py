"""The vLLM engine: offline ``LLM`` generation in the eval worker, on the visible GPUs.

Written against vLLM's documented offline API, stable across 0.22-0.31 (the range TRL 1.16
accepts; see docs/grading.md, part B): prompts are rendered with the model's chat
template by us (the same code as the transformers engine, so both engines see the same
text) and passed as token ids, so no second BOS is added; greedy is temperature 0;
``gpu_memory_utilization`` and ``max_model_len`` come from the task so the agent's own
training keeps room on a shared GPU. The worker is a fresh process per submission; vLLM's
GPU memory goes back when it exits (an in-process ``del llm`` does not free it).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from agent2rl_tui.grader.engines.base import EngineError, Messages, cut_at_stop
from agent2rl_tui.tasks.modelfiles import load_tokenizer
from agent2rl_tui.tasks.registry import EngineSettings, InferenceSettings

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                   "vocab.json", "merges.txt", "chat_template.jinja", "added_tokens.json")


def portable_tokenizer_dir(model_path: Path) -> Path:
    """The model folder, or a copy of its tokenizer files whose config older loaders accept.

    TRL with transformers 5 writes ``extra_special_tokens`` as a list; transformers 4.x (what
    vLLM before 0.32 runs on) expects a dict and fails to load such a tokenizer.
    """
    cfg_path = model_path / "tokenizer_config.json"
    if not cfg_path.exists():
        return model_path
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    if not isinstance(cfg.get("extra_special_tokens"), list):
        return model_path
    out = Path(tempfile.mkdtemp(prefix="agent2rl-tokenizer-"))
    for name in TOKENIZER_FILES:
        if (model_path / name).exists():
            shutil.copy(model_path / name, out / name)
    cfg["additional_special_tokens"] = cfg.pop("extra_special_tokens")
    if cfg.get("tokenizer_class") == "TokenizersBackend":
        cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2), encoding="utf-8")
    return out


def tensor_parallel_size(model_path: Path, wanted: int, visible: int) -> int:
    """``wanted``, checked against the visible GPUs and the model's attention heads.

    vLLM needs the number of attention heads to divide by the tensor-parallel size; it says
    so only after minutes of start-up, so the grader says it first and what to change.
    """
    if wanted > max(1, visible):
        raise EngineError(f"tensor_parallel_size {wanted} needs {wanted} GPUs; {visible} visible. "
                          "Lower [engine] tensor_parallel_size in the task's task.toml.")
    try:
        heads = int(json.loads((model_path / "config.json").read_text())["num_attention_heads"])
    except (OSError, ValueError, KeyError, TypeError):
        return wanted  # not a config we can read: vLLM will judge
    if heads % wanted:
        raise EngineError(f"the model has {heads} attention heads, which {wanted} GPUs cannot split "
                          "evenly; set [engine] tensor_parallel_size in task.toml to a divisor of "
                          f"{heads}, e.g. 1.")
    return wanted


class VLLMEngine:
    name = "vllm"

    def __init__(self, settings: EngineSettings, gpus: int) -> None:
        self.settings = settings
        self.gpus = gpus
        self.llm: Any = None
        self.tokenizer: Any = None

    def load(self, model_path: Path) -> None:
        from vllm import LLM

        tok_dir = portable_tokenizer_dir(model_path)
        s = self.settings
        kwargs: dict[str, Any] = {
            "model": str(model_path), "tokenizer": str(tok_dir), "dtype": s.dtype,
            "tensor_parallel_size": tensor_parallel_size(model_path, s.tensor_parallel_size or 1, self.gpus),
            "gpu_memory_utilization": s.gpu_memory_utilization, "enforce_eager": s.enforce_eager, "seed": s.seed,
        }
        if s.max_model_len:
            kwargs["max_model_len"] = s.max_model_len
        try:
            self.llm = LLM(**kwargs)
        except Exception as exc:  # noqa: BLE001 - surface vLLM's reason to the agent
            raise EngineError(f"vLLM could not load {model_path}: {type(exc).__name__}: {exc}") from exc
        self.tokenizer = load_tokenizer(tok_dir)

    def render(self, messages: Messages) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return "\n".join(m["content"] for m in messages) + "\n"

    def generate(self, prompts: list[str], settings: InferenceSettings) -> list[str]:
        from vllm import SamplingParams

        with_template = settings.chat and bool(getattr(self.tokenizer, "chat_template", None))
        params = SamplingParams(temperature=max(0.0, settings.temperature), max_tokens=settings.max_new_tokens,
                                stop=list(settings.stop) or None, seed=self.settings.seed)
        inputs = [{"prompt_token_ids": self.tokenizer(p, add_special_tokens=not with_template)["input_ids"]}
                  for p in prompts]
        outputs = self.llm.generate(inputs, params, use_tqdm=False)
        return [cut_at_stop(o.outputs[0].text, settings.stop) for o in outputs]

    def close(self) -> None:
        engine = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        if engine is not None and hasattr(engine, "shutdown"):
            try:
                engine.shutdown()
            except Exception:  # noqa: BLE001 - the process exits next anyway
                pass
        self.llm = None
