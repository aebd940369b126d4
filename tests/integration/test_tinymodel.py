"""The tiny model builds offline, loads with transformers and speaks ChatML."""

from __future__ import annotations

import json
from pathlib import Path


def test_the_tiny_model_is_small_and_complete(tiny_model: Path) -> None:
    names = {p.name for p in tiny_model.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    assert (tiny_model / "model.safetensors").stat().st_size < 1_000_000
    config = json.loads((tiny_model / "config.json").read_text())
    assert config["model_type"] == "llama" and config["tie_word_embeddings"] is True
    tok_cfg = json.loads((tiny_model / "tokenizer_config.json").read_text())
    assert tok_cfg["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert not isinstance(tok_cfg.get("extra_special_tokens"), list)


def test_it_loads_and_generates(tiny_model: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    assert 50_000 < sum(p.numel() for p in model.parameters()) < 200_000
    prompt = tok.apply_chat_template([{"role": "user", "content": "12+34="}], tokenize=False,
                                     add_generation_prompt=True)
    assert prompt == "<|im_start|>user\n12+34=<|im_end|>\n<|im_start|>assistant\n"
    tokens = tok.tokenize("12+34=")
    assert tokens[:2] == ["1", "2"]  # digits one by one
    ids = tok(prompt, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=4, do_sample=False)
    assert out.shape[1] > ids["input_ids"].shape[1]
