"""What a submitted model folder must hold, and a content hash of its weights.

Used by the grader to turn a bad submission into an error that tells the agent what to
do (merge a LoRA adapter, save the config, ...), and by reports to spot copies of the
base model by their weights rather than their path.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

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


SAFETENSORS_HEADER_LIMIT = 100 << 20  # the format's own limit
DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
               "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "U32": 4, "U64": 8}


def safetensors_header(fh: BinaryIO, size: int) -> dict[str, dict[str, Any]]:
    """The tensors a safetensors file declares (name -> dtype, shape, data_offsets), checked
    against the file's ``size``: a header within the format's limit, every tensor's bytes inside
    the file and as many as its dtype and shape say. ValueError for anything else (a submitted
    file is hostile: a header length of 2**62 must not become a read of that size)."""
    try:
        fh.seek(0)
        head = fh.read(8)
        (header_len,) = struct.unpack("<Q", head)
        if header_len > min(SAFETENSORS_HEADER_LIMIT, size - 8):
            raise ValueError("header length")
        header = json.loads(fh.read(header_len))
        if not isinstance(header, dict):
            raise ValueError("header")
        data_len = size - 8 - header_len
        tensors: dict[str, dict[str, Any]] = {}
        for key, info in header.items():
            if key == "__metadata__":
                continue
            start, end = info["data_offsets"]
            shape = info["shape"]
            if not (type(start) is int and type(end) is int and 0 <= start <= end <= data_len
                    and isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)):
                raise ValueError(key)
            width = DTYPE_BYTES.get(info["dtype"])
            numel = 1
            for d in shape:
                numel *= d
            if width is not None and numel * width != end - start:
                raise ValueError(key)
            tensors[key] = {"dtype": info["dtype"], "shape": shape, "data_offsets": [start, end],
                            "data_start": 8 + header_len}
        return tensors
    except (struct.error, KeyError, TypeError, RecursionError, UnicodeDecodeError) as exc:
        raise ValueError(f"not a valid safetensors file: {type(exc).__name__}") from None


def tensor_names(folder: Path, names: list[str]) -> frozenset[str]:
    """The tensors of a folder's safetensors files ``names`` (empty if one cannot be read)."""
    out: set[str] = set()
    for name in names:
        path = folder / name
        try:
            with path.open("rb") as fh:
                out |= set(safetensors_header(fh, os.fstat(fh.fileno()).st_size))
        except (OSError, ValueError):
            return frozenset()
    return frozenset(out)


def _hash_safetensors(path: Path, names: dict[str, bytes]) -> None:
    """Hash each tensor's name, dtype, shape and bytes; file layout and metadata do not count."""
    with path.open("rb") as fh:
        header = safetensors_header(fh, os.fstat(fh.fileno()).st_size)
        for name in sorted(header):
            info = header[name]
            start, end = info["data_offsets"]
            fh.seek(info["data_start"] + start)
            digest = hashlib.blake2b(digest_size=16)
            remaining = end - start
            while remaining > 0:
                chunk = fh.read(min(remaining, 1 << 24))
                if not chunk:
                    break
                digest.update(chunk)
                remaining -= len(chunk)
            names[name] = f"{info['dtype']}{info['shape']}".encode() + digest.digest()


def weights_hash(folder: Path, names: list[str] | None = None) -> str:
    """A hash of the model's tensors: equal for two saves of the same weights.

    For safetensors the hash covers tensor names, dtypes, shapes and data, independent of
    sharding, tensor order in the file and metadata. Other formats hash the file bytes.
    ``names``: exactly these files of the folder (the ones the engine loads); else every
    weights-like file in it.
    """
    per_tensor: dict[str, bytes] = {}
    h = hashlib.blake2b(digest_size=16)
    files = [folder / n for n in names] if names is not None else weight_files(folder)
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

    A real load without the weights: catches a broken config or tokenizer before a run is made.
    Loading a config costs transformers about 6 s of CPU (its model modules import torch), paid
    by every ``run start``; so a folder seen to load before, with the same config and tokenizer
    files and the same transformers, is not loaded again (``remembered``).
    """
    entry = check_entry(folder, "config and tokenizer load")
    if remembered(entry) == "ok":
        return None
    try:
        from transformers import AutoConfig

        AutoConfig.from_pretrained(str(folder))
        load_tokenizer(folder)
    except Exception as exc:  # noqa: BLE001 - any failure is the answer
        return f"{folder} does not load with transformers: {type(exc).__name__}: {exc}"
    remember(entry, "ok")
    return None


LOAD_CHECK_MAX_BYTES = 64 << 20
"""Config and tokenizer files this large (summed) are not hashed: checks of the folder run each time."""


def load_check_key(folder: Path) -> str | None:
    """What loading a folder's config and tokenizer reads, hashed: the bytes of config.json and the
    tokenizer files, and the transformers and tokenizers versions (None: too big, or unreadable)."""
    from importlib.metadata import PackageNotFoundError, version

    h = hashlib.blake2b(digest_size=16)
    try:
        h.update(f"transformers {version('transformers')} tokenizers {version('tokenizers')}".encode())
        total = 0
        for name in ("config.json", *TOKENIZER_FILES):
            path = folder / name
            if not path.is_file():
                continue
            total += path.stat().st_size
            if total > LOAD_CHECK_MAX_BYTES:
                return None
            data = path.read_bytes()
            h.update(name.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    except (OSError, PackageNotFoundError):
        return None
    return h.hexdigest()


def check_entry(folder: Path, question: str) -> Path | None:
    """Where the answer to ``question`` about a model folder is kept between runs (None: the
    folder cannot be keyed, so the question is answered each time). The key is the folder's
    ``load_check_key`` and the question: a changed tokenizer, config or transformers is a new key."""
    key = load_check_key(folder)
    if key is None:
        return None
    name = hashlib.blake2b(f"{key}\0{question}".encode(), digest_size=16).hexdigest()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agent2rl-tui" / "model-checks" / name


def remembered(entry: Path | None) -> str | None:
    """The answer kept at ``entry`` (None: none kept)."""
    if entry is None:
        return None
    try:
        return entry.read_text(encoding="utf-8")
    except OSError:
        return None


def remember(entry: Path | None, answer: str) -> None:
    """Keep an answer; a cache that cannot be written only costs the next check its time."""
    if entry is None:
        return
    with contextlib.suppress(OSError):
        entry.parent.mkdir(parents=True, exist_ok=True)
        partial = entry.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(answer, encoding="utf-8")
        partial.replace(entry)


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


def count_parameters(folder: Path) -> int | None:
    """Parameters stored in the folder's safetensors files, read from their headers (no tensor
    is loaded); None for other formats. Tied weights are stored, and counted, once."""
    files = weight_files(folder)
    if not files or any(p.suffix != ".safetensors" for p in files):
        return None
    total = 0
    for path in files:
        try:
            with path.open("rb") as fh:
                header = safetensors_header(fh, os.fstat(fh.fileno()).st_size)
        except (OSError, ValueError):
            return None
        for info in header.values():
            n = 1
            for dim in info["shape"]:
                n *= dim
            total += n
    return total


# Keys of config.json that a save changes without changing what the model computes.
VOLATILE_CONFIG_KEYS = ("transformers_version", "_name_or_path", "torch_dtype", "dtype", "use_cache")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                   "vocab.json", "merges.txt", "chat_template.jinja", "added_tokens.json")


def architecture_key(folder: Path) -> str:
    """A hash of everything but the weights that a loaded engine depends on: the config (less
    the keys a save touches), the generation config and the tokenizer as loaded (vocabulary,
    merges, pre-tokenizer, decoder, special tokens, chat template), not its files' bytes: TRL
    re-saves an unchanged tokenizer in another layout. Two checkpoints with equal keys can
    share an engine whose weights are swapped in place."""
    h = hashlib.blake2b(digest_size=16)
    h.update(_json_key(folder / "config.json", VOLATILE_CONFIG_KEYS))
    h.update(_json_key(folder / "generation_config.json", ("transformers_version", "_from_model_config")))
    try:
        tok = load_tokenizer(folder)
    except Exception as exc:  # noqa: BLE001 - unreadable: never equal to a readable one
        h.update(f"tokenizer unreadable: {type(exc).__name__}".encode())
        return h.hexdigest()
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is not None:
        model = json.loads(backend.to_str())
        model.pop("truncation", None)
        model.pop("padding", None)
        h.update(json.dumps(model, sort_keys=True).encode())
    else:  # a slow tokenizer: its vocabulary is what we can see
        h.update(json.dumps(sorted(tok.get_vocab().items())).encode())
    special = {name: getattr(tok, name, None) for name in ("bos_token", "eos_token", "pad_token", "unk_token")}
    h.update(json.dumps([special, sorted(map(str, tok.all_special_tokens)), tok.chat_template],
                        sort_keys=True, default=str).encode())
    return h.hexdigest()


def _json_key(path: Path, volatile: tuple[str, ...]) -> bytes:
    """A JSON file's content without ``volatile`` keys, canonically; a marker when absent or broken."""
    if not path.is_file():
        return f"{path.name}: absent".encode()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"{path.name}: unreadable {path}".encode()
    if isinstance(data, dict):
        for key in volatile:
            data.pop(key, None)
    return json.dumps(data, sort_keys=True).encode()
