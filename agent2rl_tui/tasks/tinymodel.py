"""Build a tiny Llama-architecture causal LM and its tokenizer entirely in code.

The demo and the test suite need a real model that loads through the same
transformers/TRL/vLLM code paths as a real checkpoint, trains in seconds on a CPU
and is never downloaded. This module makes one: a byte-level BPE tokenizer (digits
split one by one, ChatML special tokens, a chat template) trained on a few KB of
generated text, and a ~100k-parameter Llama with tied embeddings, saved as
config.json + model.safetensors + tokenizer files.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

_WORDS = (
    "what is the answer question solve compute add subtract plus minus equals sum total "
    "number result give final write after four marks system user assistant you are a "
    "helpful model math problem please think step by step then reply with only"
).split()


def _corpus(rng: random.Random, lines: int = 600) -> list[str]:
    """A few KB of text shaped like what the tiny model will see: arithmetic, chat turns."""
    out: list[str] = []
    for _ in range(lines):
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        op = rng.choice("+-*")
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 8)))
        out.append(f"{words} {a}{op}{b}= {a} {op} {b} = #### {a + b}")
        out.append(f"<|im_start|>user\n{words}?<|im_end|>\n<|im_start|>assistant\n#### {a}<|im_end|>")
    return out


def build_tokenizer(seed: int = 0, vocab_size: int = 384):  # -> PreTrainedTokenizerFast
    """Train the byte-level BPE tokenizer and wrap it as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    raw.train_from_iterator(_corpus(random.Random(seed)), trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tok.chat_template = CHAT_TEMPLATE
    tok.padding_side = "left"
    return tok


def build_tiny_model(path: str | Path, seed: int = 0, *, max_positions: int = 512) -> Path:
    """Write a tiny, randomly initialised Llama model and its tokenizer to ``path``.

    ``max_positions`` is its context: 512 holds the arithmetic tasks; a text game's
    transcript needs a few thousand (the tokenizer knows little English).
    """
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(seed)
    eos_id = tok.convert_tokens_to_ids("<|im_end|>")
    pad_id = tok.convert_tokens_to_ids("<|endoftext|>")
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        bos_token_id=pad_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=eos_id, pad_token_id=pad_id, do_sample=False
    )
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    _portable_tokenizer_config(out / "tokenizer_config.json", max_positions)
    return out


def _portable_tokenizer_config(path: Path, max_positions: int) -> None:
    """Write the tokenizer config in the form transformers 4.x and 5.x (and vLLM) all read.

    transformers 5 saves ``tokenizer_class: TokenizersBackend`` and a list-valued
    ``extra_special_tokens``, which older releases reject.
    """
    cfg = json.loads(path.read_text(encoding="utf-8"))
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    extra = cfg.pop("extra_special_tokens", None)
    if isinstance(extra, list):
        cfg["additional_special_tokens"] = extra
    cfg["model_max_length"] = max_positions
    cfg["chat_template"] = CHAT_TEMPLATE
    path.write_text(json.dumps(cfg, indent=2), encoding="utf-8")
