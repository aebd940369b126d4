"""The transformers engine: batched, left-padded generation on CPU or GPU, greedy at
temperature 0, else sampled with top_p/top_k and seeded by the engine's seed.

It is the engine of the demo, the tests and any machine without vLLM. Prompts are sorted
by length before batching so a batch pads little, and results are put back in order.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent2rl_tui.grader.engines.base import EngineError, Messages, PrefillCount, check_fit, cut_at_stop, render_chat
from agent2rl_tui.grader.engines.turn_cache import TurnCache
from agent2rl_tui.tasks.modelfiles import load_tokenizer
from agent2rl_tui.tasks.registry import InferenceSettings


class TransformersEngine:
    name = "transformers"

    def __init__(self, seed: int = 0) -> None:
        self.model: Any = None
        self.tokenizer: Any = None
        self.device = "cpu"
        self.prefill = PrefillCount()
        self.turns = TurnCache()
        self.seed = seed
        """Seeds sampling (``EngineSettings.seed``): each sampled call of a loaded model draws from
        its own seed (the engine's and the call's number), so a rerun draws the same samples."""
        self.sampled_calls = 0

    def load(self, model_path: Path) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.turns.clear()  # another model's keys and values are not this one's
        self.sampled_calls = 0
        dtype = torch.bfloat16 if self.device == "cuda" else torch.float32
        try:
            self.tokenizer = load_tokenizer(model_path)
            # (model, info) with output_loading_info: transformers' types give the model alone.
            loaded: Any = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=dtype, output_loading_info=True)
            self.model, info = loaded
        except Exception as exc:  # noqa: BLE001 - a submitted folder can make the loader raise anything
            raise EngineError(f"could not load the model from {model_path}: {type(exc).__name__}: {exc}") from exc
        missing = sorted(info.get("missing_keys") or ())
        if missing:  # transformers would initialise them at random and generate all the same
            self.close()
            raise EngineError(f"the checkpoint lacks {len(missing)} weight(s) its config declares: "
                              f"{', '.join(missing[:5])}", "missing_weights")
        self.model.to(self.device).eval()

    def render(self, messages: Messages, *, require_template: bool = False,
               enable_thinking: bool | None = None) -> str:
        return render_chat(self.tokenizer, messages, require_template, enable_thinking=enable_thinking)

    def _gen_kwargs(self, settings: InferenceSettings) -> dict[str, Any]:
        greedy = settings.temperature <= 1e-5
        gen_kwargs: dict[str, Any] = {
            "max_new_tokens": settings.max_new_tokens,
            "do_sample": not greedy,
            "pad_token_id": self.tokenizer.pad_token_id,
        }
        if not greedy:  # every sampling knob given, so none comes from the model's generation_config
            gen_kwargs.update(temperature=settings.temperature, top_p=settings.top_p,
                              top_k=max(0, settings.top_k))  # top_k 0: no cut
            self._seed_sampling()
        else:  # silence "generation flags are not valid" for models with sampling defaults
            gen_kwargs.update(temperature=None, top_p=None, top_k=None)
        if settings.stop:  # a row stops at its first stop string; the batch when every row has
            gen_kwargs.update(stop_strings=list(settings.stop), tokenizer=self.tokenizer)
        return gen_kwargs

    def _seed_sampling(self) -> None:
        """Seed torch (every device) for the sampled call about to run: the engine's seed and the
        call's number, so a rerun of the same calls samples the same text."""
        import torch

        torch.manual_seed(self.seed * 1_000_003 + self.sampled_calls)
        self.sampled_calls += 1

    def generate(self, prompts: list[str], settings: InferenceSettings,
                 progress: Callable[[int], None] | None = None) -> list[str]:
        import torch

        tok = self.tokenizer
        with_template = settings.chat and bool(getattr(tok, "chat_template", None))
        special = not with_template or settings.bos_after_template  # a template has its own, unless asked again
        lengths = [len(ids) for ids in tok(prompts, add_special_tokens=special)["input_ids"]]
        self.prefill.calls += 1
        self.prefill.prompt_tokens += sum(lengths)  # every prompt computed whole, every call
        limit = self.context_limit()
        check_fit(lengths, limit, settings)
        order = sorted(range(len(prompts)), key=lambda i: lengths[i])
        outputs: list[str] = [""] * len(prompts)
        gen_kwargs = self._gen_kwargs(settings)
        batch = max(1, settings.batch_size)
        for start in range(0, len(order), batch):
            idx = order[start : start + batch]
            enc = tok(
                [prompts[i] for i in idx],
                return_tensors="pt",
                padding=True,
                add_special_tokens=not with_template or settings.bos_after_template,
            ).to(self.device)
            room = limit - enc["input_ids"].shape[1] if limit else settings.max_new_tokens
            with torch.inference_mode():  # a completion ends at the context, as in vLLM
                out = self.model.generate(**enc, **{**gen_kwargs, "max_new_tokens": min(settings.max_new_tokens, room)})
            texts = tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
            for i, text in zip(idx, texts):
                outputs[i] = completion_text(text, settings)
            if progress is not None:
                progress(len(idx))
        return outputs

    def generate_turns(self, keys: list[Any], prompts: list[str], settings: InferenceSettings) -> list[str]:
        """``generate`` for the next turn of episodes (``keys`` name them): each episode's prompt is
        its last one and a turn, so its last turn's keys and values are reused (``TurnCache``) and
        only the new tokens are computed; the text is ``generate``'s."""
        import torch

        tok = self.tokenizer
        with_template = settings.chat and bool(getattr(tok, "chat_template", None))
        ids = tok(prompts, add_special_tokens=not with_template or settings.bos_after_template)["input_ids"]
        lengths = [len(row) for row in ids]
        limit = self.context_limit()
        check_fit(lengths, limit, settings)
        self.turns.forget_others(keys)
        gen_kwargs = self._gen_kwargs(settings)
        order = sorted(range(len(prompts)), key=lambda i: lengths[i])
        outputs: list[str] = [""] * len(prompts)
        pad = tok.pad_token_id
        self.prefill.calls += 1
        self.prefill.prompt_tokens += sum(lengths)
        for start in range(0, len(order), max(1, settings.batch_size)):
            idx = order[start:start + max(1, settings.batch_size)]
            batch_keys = [keys[i] for i in idx]
            input_ids, mask, cache, cached = self.turns.inputs(batch_keys, [ids[i] for i in idx], pad)
            self.prefill.cached_tokens += sum(cached)
            room = limit - max(lengths[i] for i in idx) if limit else settings.max_new_tokens
            with torch.inference_mode():
                out = self.model.generate(input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device),
                                          past_key_values=cache, return_dict_in_generate=True,
                                          **{**gen_kwargs, "max_new_tokens": min(settings.max_new_tokens, room)})
            self.turns.keep(batch_keys, out.sequences, mask.to(self.device), out.past_key_values, pad)
            texts = tok.batch_decode(out.sequences[:, input_ids.shape[1]:], skip_special_tokens=True)
            for i, text in zip(idx, texts):
                outputs[i] = completion_text(text, settings)
        return outputs

    def context_limit(self) -> int | None:
        return getattr(getattr(self.model, "config", None), "max_position_embeddings", None)

    def close(self) -> None:
        self.model = None
        self.tokenizer = None
        self.turns.clear()


def completion_text(text: str, settings: InferenceSettings) -> str:
    """A decoded completion as both engines give it: cut at its first stop string, without a
    trailing U+FFFD. A character cut in half by the token limit decodes as U+FFFD here; vLLM
    holds its bytes back. Dropping it gives both engines the same text (a game's transcript
    carries each action on, and one stray character changes every later turn)."""
    return cut_at_stop(text, settings.stop).rstrip("\ufffd")
