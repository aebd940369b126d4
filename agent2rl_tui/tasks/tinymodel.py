"""Build a tiny Llama-architecture causal LM and its tokenizer entirely in code.

The demo and the test suite need a real model that loads through the same
transformers/TRL/vLLM code paths as a real checkpoint, trains in seconds on a CPU
and is never downloaded. This module makes one: a byte-level BPE tokenizer (digits
split one by one, ChatML special tokens, a chat template) trained on a few KB of
generated text (arithmetic, chat turns, text-game sentences of household words), and
a ~125k-parameter Llama with tied embeddings, saved as config.json + model.safetensors +
tokenizer files.
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


# Household words for text-game observations ("You are in the kitchen. In one part of the room
# you see a fridge that is closed."): with them in the corpus a game transcript takes about a
# token per word instead of one per letter or two, so it fits the tiny model's context.
_ROOMS = "kitchen bedroom bathroom living room laundry pantry corridor garden hall office garage".split()
_FURNITURE = (
    "fridge counter cupboard cabinet drawer shelf table desk chair sofa bed wardrobe dresser chest of drawers "
    "night stand dressing book case coffee end side TV stand arm bench stove oven toaster dishwasher sink "
    "washing machine clothes drier basket trash can wastepaper toilet bath tub shower rack hook holder mat "
    "towel wall work kitchen dining folding shoe coat hat key umbrella spice cutlery"
).split()
_THINGS = (
    "apple banana tomato potato onion pepper lettuce carrot egg bread milk cheese knife fork spoon plate "
    "bowl cup mug glass pan pot kettle teapot ladle peeler board shirt T-shirt sweater jacket coat dress "
    "skirt socks shoes boots sneakers slippers hat cap scarf tie belt glove blanket pillow sheet towel "
    "duvet cushion lamp book notebook copybook paper pen pencil soap handsoap brush comb toothbrush "
    "toothpaste shampoo tissue candle vase picture remote control phone laptop clock watch bag box"
).split()
_ADJECTIVES = "clean dirty used wet dry black white brown gray red green blue yellow striped plaid wooden old new".split()
_GAME_LINES = (
    "You are in the {room}. In one part of the room you see a {f1}, that has nothing on it.",
    "There is also a {f2} that is closed. You also see a {f1}. In another part of the room you see a {a} {t}.",
    "You take the {a} {t}. You put the {t} in the {f2}. You open the {f2}. It's empty inside.",
    "take {a} {t}\nopen {f2}\nput {a} {t} in {f2}\nput {t} on {f1}\nlook around\ninventory\ngo to {f1}",
    "Your task is to pick up objects, then place them in their usual locations in the environment.",
)


def _corpus(rng: random.Random, lines: int = 600) -> list[str]:
    """A few KB of text shaped like what the tiny model will see: arithmetic, chat turns, games."""
    out: list[str] = []
    for _ in range(lines):
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        op = rng.choice("+-*")
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 8)))
        out.append(f"{words} {a}{op}{b}= {a} {op} {b} = #### {a + b}")
        out.append(f"<|im_start|>user\n{words}?<|im_end|>\n<|im_start|>assistant\n#### {a}<|im_end|>")
        out.append(rng.choice(_GAME_LINES).format(room=rng.choice(_ROOMS), f1=rng.choice(_FURNITURE),
                                                  f2=rng.choice(_FURNITURE), t=rng.choice(_THINGS),
                                                  a=rng.choice(_ADJECTIVES)) + "\n>")
    return out


def build_tokenizer(seed: int = 0, vocab_size: int = 768):  # -> PreTrainedTokenizerFast
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


def build_tiny_model(path: str | Path, seed: int = 0, *, max_positions: int = 4096,
                     weights_seed: int | None = None) -> Path:
    """Write a tiny, randomly initialised Llama model and its tokenizer to ``path``.

    ``max_positions`` is its context (rotary positions: the size costs no parameters): 4096
    holds GSM8K's reference 4-shot prompt (about 2,900 of this tokenizer's tokens) and its 512
    new tokens, and a text game's transcript (twc: ~300 tokens to start, a few dozen a turn). ``seed`` makes the
    tokenizer and the weights; ``weights_seed`` other weights with the same tokenizer (another
    checkpoint of the same architecture).
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
        num_attention_heads=2,  # head_dim 32: vLLM's CPU attention refuses 16
        num_key_value_heads=1,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        bos_token_id=pad_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )
    torch.manual_seed(seed if weights_seed is None else weights_seed)
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
