"""What a submitted model folder must hold, and a content hash of its weights.

Used by the grader to turn a bad submission into an error that tells the agent what to
do (merge a LoRA adapter, save the config, ...), and by reports to spot copies of the
base model by their weights rather than their path.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "model*.bin")
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin")


@dataclass(frozen=True)
class ModelProblem:
    """Why a folder is not a submittable model: a stable code and advice for the agent."""

    code: str
    detail: str


def weight_files(folder: Path) -> list[Path]:
    files: set[Path] = set()
    for pattern in WEIGHT_PATTERNS:
        files.update(p for p in folder.glob(pattern) if not p.name.startswith("adapter_model"))
    return sorted(files)


def check_model_folder(folder: Path) -> ModelProblem | None:
    """None when ``folder`` looks like a full model a transformers loader can read."""
    if not folder.exists():
        return ModelProblem("not_found", f"{folder} does not exist. Save the model there first.")
    if not folder.is_dir():
        return ModelProblem(
            "not_a_folder", f"{folder} is a file. Submit the folder that holds config.json and the weights."
        )
    weights = weight_files(folder)
    has_adapter = (folder / "adapter_config.json").exists()
    if has_adapter and not weights:
        return ModelProblem(
            "lora_adapter",
            f"{folder} holds a LoRA adapter, not a full model. Merge it into the base model "
            "(peft: model = model.merge_and_unload(); model.save_pretrained(DIR); "
            "tokenizer.save_pretrained(DIR)) and submit DIR.",
        )
    if not (folder / "config.json").exists():
        return ModelProblem(
            "no_config",
            f"{folder} has no config.json. Save the model with save_pretrained(DIR) so the "
            "config, the weights and the tokenizer are all in DIR.",
        )
    if not weights:
        return ModelProblem(
            "no_weights",
            f"{folder} has config.json but no weights (*.safetensors or pytorch_model*.bin). "
            "Save the full model with save_pretrained(DIR).",
        )
    return None


def files_leaving(folder: Path, root: Path) -> list[str]:
    """Files under ``folder`` (paths relative to it) whose real location is outside ``root``."""
    out: list[str] = []
    root = Path(os.path.realpath(root))
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, name)
            if not Path(os.path.realpath(full)).is_relative_to(root):
                out.append(os.path.relpath(full, folder))
    return sorted(out)


def _hash_safetensors(path: Path, names: dict[str, bytes]) -> None:
    """Hash each tensor's name, dtype, shape and bytes; file layout and metadata do not count."""
    with path.open("rb") as fh:
        (header_len,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(header_len))
        base = 8 + header_len
        for name in sorted(k for k in header if k != "__metadata__"):
            info = header[name]
            start, end = info["data_offsets"]
            fh.seek(base + start)
            digest = hashlib.blake2b(digest_size=16)
            remaining = end - start
            while remaining > 0:
                chunk = fh.read(min(remaining, 1 << 24))
                if not chunk:
                    break
                digest.update(chunk)
                remaining -= len(chunk)
            names[name] = f"{info['dtype']}{info['shape']}".encode() + digest.digest()


def weights_hash(folder: Path) -> str:
    """A hash of the model's tensors: equal for two saves of the same weights.

    For safetensors the hash covers tensor names, dtypes, shapes and data, independent of
    sharding, tensor order in the file and metadata. Other formats hash the file bytes.
    """
    per_tensor: dict[str, bytes] = {}
    h = hashlib.blake2b(digest_size=16)
    files = weight_files(folder)
    for path in files:
        if path.suffix == ".safetensors":
            _hash_safetensors(path, per_tensor)
        else:
            with path.open("rb") as fh:
                digest = hashlib.blake2b(digest_size=16)
                for chunk in iter(lambda: fh.read(1 << 24), b""):
                    digest.update(chunk)
            per_tensor[f"file:{path.name}"] = digest.digest()
    for name in sorted(per_tensor):
        h.update(name.encode())
        h.update(per_tensor[name])
    return h.hexdigest()


def check_model_loads(folder: Path) -> str | None:
    """None if the config and tokenizer load with transformers, else what went wrong.

    A cheap real load (no weights): catches a broken config or tokenizer before a run is made.
    """
    try:
        from transformers import AutoConfig


        AutoConfig.from_pretrained(str(folder))
        load_tokenizer(folder)
    except Exception as exc:  # noqa: BLE001 - any failure is the answer
        return f"{folder} does not load with transformers: {type(exc).__name__}: {exc}"
    return None


def load_tokenizer(model_path: Path) -> Any:
    """AutoTokenizer, left-padded, tolerating the list-valued ``extra_special_tokens`` TRL writes."""
    from transformers import AutoTokenizer

    kwargs: dict[str, Any] = {}
    cfg_path = model_path / "tokenizer_config.json"
    if cfg_path.exists():
        try:
            cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{cfg_path} is not valid JSON: {exc}") from exc
        extra = cfg.get("extra_special_tokens")
        if isinstance(extra, list):
            kwargs["extra_special_tokens"] = {}
            kwargs["additional_special_tokens"] = extra
    tok = AutoTokenizer.from_pretrained(str(model_path), **kwargs)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok
