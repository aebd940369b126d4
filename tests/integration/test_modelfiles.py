"""Model-folder checks and the weights hash that spots copies of the base model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from agent2rl_tui.tasks.modelfiles import check_model_folder, weights_hash


def test_the_tiny_model_is_a_valid_model(tiny_model: Path) -> None:
    assert check_model_folder(tiny_model) is None


def test_problems_are_named(tmp_path: Path, tiny_model: Path) -> None:
    assert check_model_folder(tmp_path / "missing").code == "not_found"
    (tmp_path / "file").write_text("x")
    assert check_model_folder(tmp_path / "file").code == "not_a_folder"
    lora = tmp_path / "lora"
    lora.mkdir()
    (lora / "adapter_config.json").write_text("{}")
    (lora / "adapter_model.safetensors").write_bytes(b"x")
    problem = check_model_folder(lora)
    assert problem.code == "lora_adapter" and "merge_and_unload" in problem.detail
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text("{}")
    assert check_model_folder(tmp_path / "cfg").code == "no_weights"
    (tmp_path / "w").mkdir()
    shutil.copy(tiny_model / "model.safetensors", tmp_path / "w")
    assert check_model_folder(tmp_path / "w").code == "no_config"


def test_a_resave_has_the_same_hash_and_a_trained_model_does_not(tmp_path: Path, tiny_model: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    model.save_pretrained(tmp_path / "resaved", max_shard_size="100KB")  # sharded, new metadata
    assert len(list((tmp_path / "resaved").glob("*.safetensors"))) > 1
    assert weights_hash(tmp_path / "resaved") == weights_hash(tiny_model)
    with torch.no_grad():
        next(model.parameters()).add_(1e-3)
    model.save_pretrained(tmp_path / "changed")
    assert weights_hash(tmp_path / "changed") != weights_hash(tiny_model)
    index = json.loads((tmp_path / "resaved" / "model.safetensors.index.json").read_text())
    assert index["weight_map"]


def test_a_load_check_is_kept_for_the_same_files_and_redone_when_they_change(tmp_path: Path, tiny_model: Path,
                                                                             monkeypatch) -> None:
    """`run start` checks that the base model's config and tokenizer load (seconds of CPU in
    transformers); the answer is kept per content, so a folder changed in place is checked again."""
    from agent2rl_tui.tasks.modelfiles import check_entry, check_model_loads, remembered

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    model = tmp_path / "model"
    shutil.copytree(tiny_model, model)
    entry = check_entry(model, "config and tokenizer load")
    assert entry is not None and remembered(entry) is None
    assert check_model_loads(model) is None
    assert remembered(entry) == "ok" and entry.is_relative_to(tmp_path / "cache")
    original = (model / "config.json").read_bytes()
    (model / "config.json").write_text(json.dumps({**json.loads(original), "model_type": "no-such-architecture"}))
    assert check_entry(model, "config and tokenizer load") != entry  # another key: checked again
    problem = check_model_loads(model)
    assert problem is not None and "does not load with transformers" in problem and "no-such-architecture" in problem
    (model / "config.json").write_bytes(original)  # back as it was: the kept answer holds
    assert check_entry(model, "config and tokenizer load") == entry and check_model_loads(model) is None
