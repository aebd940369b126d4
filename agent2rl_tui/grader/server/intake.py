"""Submission intake: at acceptance, the grader's own copy of exactly the files the engine will load.

A submitted folder stays in the agent's hands after ``/submit`` answers: it can swap a file
for a symlink to something outside the workspace, keep writing weights after the deadline
while the submission waits in the queue, hide the base model's weights behind a decoy file
that only the hash reads, or make a weights file a FIFO that blocks whoever opens it. So
before answering, the grader takes what it will evaluate into a folder of its own
(``<run>/intake/<n>/``, outside the workspace and out of the sandbox's sight):

- only the files an engine loads: ``config.json``, a sanitised ``generation_config.json`` and
  the weights one rule picks (``weights_to_load``); nothing else of the folder is copied, so no
  engine can read a file that was not hashed;
- the tokenizer is the base model's (``BaseModel``), never the submission's: a chat template is
  code that sees each eval prompt (it can compute an arithmetic answer, carry a lookup table of
  a public test set, or raise with the prompt), and a tokenizer's normalizer can rewrite the
  prompt; the grader asks as the task asks. A submission whose tokenizer differs is told so;
- each opened without following a symlink and without blocking, taken only if it is a
  regular file, copied up to the size it had when opened and refused if it changed while it
  was copied, under a size limit for the whole submission;
- safetensors headers checked (structure, offsets inside the file) and, for a checkpoint of
  the base model's architecture, every tensor of the base model present: a checkpoint that
  lacks weights its config declares would otherwise be scored with random ones;
- decoding is the task's, never the folder's: ``generation_config.json`` keeps only its token
  ids (bos/eos/pad), and decoding keys in ``config.json`` (beams, sampling, penalties, forced
  or suppressed tokens, minimum lengths) are dropped, so both engines generate as the task
  says; what was dropped is recorded and told to the agent.

The copy is evaluated and removed after scoring (``keep_submissions`` keeps it); its
``Manifest`` (files, roles, sizes, hashes of the small files, what was left out or ignored)
stays in the record with the submission.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agent2rl_tui.grader.server.validation import MAX_ENTRIES, Rejection
from agent2rl_tui.record.capture import NotRegular, open_regular
from agent2rl_tui.tasks.modelfiles import TOKENIZER_FILES, safetensors_header, tensor_names

CONFIG = "config.json"
GENERATION_CONFIG = "generation_config.json"
TOKENIZER_NAMES = (*TOKENIZER_FILES, "chat_template.json")
SAFE, SAFE_INDEX = "model.safetensors", "model.safetensors.index.json"
BIN, BIN_INDEX = "pytorch_model.bin", "pytorch_model.bin.index.json"
SMALL_FILE_LIMIT = 64 << 20
"""A config, tokenizer or index file larger than this is refused (real tokenizers are ~10-30 MB)."""
TOKEN_ID_KEYS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")
DECODING_KEYS = frozenset((
    "num_beams", "num_beam_groups", "num_return_sequences", "do_sample", "temperature", "top_k", "top_p", "min_p",
    "typical_p", "epsilon_cutoff", "eta_cutoff", "top_h", "repetition_penalty", "encoder_repetition_penalty",
    "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids", "force_words_ids",
    "renormalize_logits", "constraints", "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values",
    "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens", "forced_decoder_ids",
    "sequence_bias", "guidance_scale", "max_length", "max_new_tokens", "min_length", "min_new_tokens",
    "early_stopping", "max_time", "stop_strings", "penalty_alpha", "diversity_penalty", "dola_layers",
    "watermarking_config", "prompt_lookup_num_tokens", "assistant_early_exit", "num_assistant_tokens",
    "output_scores", "output_logits", "return_dict_in_generate",
))
"""Generation settings that change what is generated; a model folder's are never applied."""
DECODING_DEFAULTS = {"do_sample": False, "num_beams": 1, "num_beam_groups": 1, "num_return_sequences": 1,
                     "temperature": 1.0, "top_k": 50, "top_p": 1.0, "typical_p": 1.0, "repetition_penalty": 1.0,
                     "length_penalty": 1.0, "no_repeat_ngram_size": 0, "min_length": 0, "max_length": 20,
                     "early_stopping": False, "diversity_penalty": 0.0, "encoder_repetition_penalty": 1.0}
"""transformers' own defaults: a folder that states one of these changes nothing, and is not told it was ignored."""
LEFT_OUT_SHOWN = 50
COPY_CHUNK = 1 << 30


@dataclass(frozen=True)
class IntakeFile:
    """One file of the grader's copy."""

    name: str
    role: str
    """``config``, ``generation_config``, ``tokenizer``, ``index`` or ``weights``."""
    size: int
    blake2b: str | None = None
    """Of the bytes the engine reads; weights are hashed per tensor by the eval worker instead."""


@dataclass(frozen=True)
class Manifest:
    """What the grader took of a submitted folder; kept in the record with the submission."""

    files: list[IntakeFile]
    bytes: int
    copy_seconds: float
    weights_format: str
    """``safetensors`` or ``pytorch`` (pickled tensors, loaded with weights_only)."""
    left_out: list[str] = field(default_factory=list)
    """Names in the folder that no engine reads (the first ``LEFT_OUT_SHOWN``), not copied."""
    n_left_out: int = 0
    ignored_settings: list[str] = field(default_factory=list)
    """What the folder carried that the grader does not apply: decoding settings (``file: key``), a
    tokenizer or chat template other than the base model's."""

    @property
    def weight_names(self) -> list[str]:
        return [f.name for f in self.files if f.role == "weights"]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Manifest:
        return cls(**{**data, "files": [IntakeFile(**f) for f in data.get("files", [])]})


@dataclass(frozen=True)
class Intake:
    """A submission as the grader holds it: its copy and the manifest of that copy."""

    folder: Path
    manifest: Manifest

    def to_json(self) -> str:
        """As run.db's ``submissions.intake_json`` keeps it."""
        return json.dumps({"folder": str(self.folder), "manifest": self.manifest.to_dict()})

    @classmethod
    def from_json(cls, text: str) -> Intake:
        data = json.loads(text)
        return cls(Path(data["folder"]), Manifest.from_dict(data["manifest"]))


@dataclass(frozen=True)
class BaseModel:
    """What a submission is held to: the base model's tensors and architecture, and the tokenizer
    every submission is evaluated with (the base model's own files, read once by the grader from
    the read-only copy in the workspace)."""

    tensors: frozenset[str]
    architecture: tuple[Any, Any] | None
    tokenizer: dict[str, bytes]

    @classmethod
    def read(cls, folder: Path) -> BaseModel:
        tokenizer = {n: (folder / n).read_bytes() for n in TOKENIZER_NAMES if (folder / n).is_file()}
        try:
            config = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
            weights, fmt, _ = weights_to_load(set(os.listdir(folder)), lambda index: list(
                json.loads((folder / index).read_text(encoding="utf-8"))["weight_map"].values()))
        except (OSError, ValueError, KeyError, AttributeError, Rejection):
            return cls(frozenset(), None, tokenizer)
        if fmt != "safetensors":
            return cls(frozenset(), None, tokenizer)
        return cls(tensor_names(folder, weights), (config.get("architectures"), config.get("model_type")), tokenizer)


# -- which files an engine loads ---------------------------------------------------------------

def weights_to_load(names: set[str], index_of: Any) -> tuple[list[str], str, str | None]:
    """(weight files, format, index file) an engine loads from a folder holding ``names``.

    One rule for both engines, the order transformers looks in: ``model.safetensors``, else
    the shards its index names, else ``pytorch_model.bin``, else the shards of its index.
    ``index_of(name)`` reads an index file's ``weight_map`` values.
    """
    if SAFE in names:
        return [SAFE], "safetensors", None
    for index, fmt, suffix in ((SAFE_INDEX, "safetensors", ".safetensors"), (BIN, "pytorch", ""),
                               (BIN_INDEX, "pytorch", ".bin")):
        if index not in names:
            continue
        if index == BIN:
            return [BIN], fmt, None
        values = index_of(index)
        if not values or not all(isinstance(s, str) and "/" not in s and not s.startswith(".") and s.endswith(suffix)
                                 for s in values):
            raise Rejection(422, "invalid_index", f"{index} must name its shards as plain {suffix} file names in the "
                            "same folder; save the model again with save_pretrained(DIR).")
        shards = sorted(set(values))
        missing = [s for s in shards if s not in names]
        if missing:
            raise Rejection(422, "missing_weights", f"{index} names {len(missing)} shard(s) that are not in the "
                            f"folder (e.g. {missing[0]}); save the whole model with save_pretrained(DIR).")
        return shards, fmt, index
    raise Rejection(422, "no_weights", "The folder has no model.safetensors, model.safetensors.index.json, "
                    "pytorch_model.bin or pytorch_model.bin.index.json. Save the full model with save_pretrained(DIR).")


# -- reading untrusted files ------------------------------------------------------------------

def _listing(dir_fd: int) -> set[str]:
    """The names in the submitted folder, at most ``MAX_ENTRIES`` of them."""
    names: set[str] = set()
    with os.scandir(dir_fd) as entries:
        for entry in entries:
            names.add(entry.name)
            if len(names) > MAX_ENTRIES:
                raise Rejection(422, "too_many_files", f"the folder holds over {MAX_ENTRIES:,} entries; submit a "
                                "folder that holds only the saved model (save_pretrained(DIR)).")
    return names


def _member_error(name: str, exc: OSError) -> Rejection:
    if isinstance(exc, NotRegular):
        return Rejection(422, "not_a_regular_file", f"{name} is not a regular file ({exc.reason}); save the model "
                         "with save_pretrained(DIR).")
    if exc.errno == errno.ELOOP:
        return Rejection(422, "symlink", f"{name} is a symbolic link; the grader reads only regular files. Copy the "
                         "file into the model folder (cp -L) and submit again.")
    if exc.errno == errno.ENOENT:
        return Rejection(409, "changed_while_copied", f"{name} disappeared while the grader read the folder; "
                         "submit once the model is saved.")
    return Rejection(422, "unreadable", f"{name} cannot be read ({os.strerror(exc.errno or 0)}).")


def _unchanged(fd: int, before: os.stat_result, name: str) -> None:
    """Refuse a file written while it was read: its size, mtime or ctime moved (a write, or a
    write with the mtime set back)."""
    after = os.fstat(fd)
    if (after.st_size, after.st_mtime_ns, after.st_ctime_ns) != (before.st_size, before.st_mtime_ns,
                                                                  before.st_ctime_ns):
        raise Rejection(409, "changed_while_copied", f"{name} was being written while the grader copied it; "
                        "submit once save_pretrained has returned.")


def _read_small(dir_fd: int, name: str) -> bytes:
    """A config, tokenizer or index file of the folder, whole and unchanged, or a Rejection."""
    try:
        with open_regular(name, dir_fd=dir_fd) as (fh, st):
            if st.st_size > SMALL_FILE_LIMIT:
                raise Rejection(413, "too_large", f"{name} is {st.st_size:,} bytes; files other than the weights "
                                f"may be at most {SMALL_FILE_LIMIT:,}.")
            data = fh.read(st.st_size + 1)
            if len(data) != st.st_size:
                raise Rejection(409, "changed_while_copied", f"{name} was being written while the grader read it; "
                                "submit once save_pretrained has returned.")
            _unchanged(fh.fileno(), st, name)
            return data
    except OSError as exc:
        raise _member_error(name, exc) from None


def _json_object(data: bytes, name: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        raise Rejection(422, "invalid_json_file", f"{name} is not valid JSON; save the model with "
                        "save_pretrained(DIR).") from None
    if not isinstance(value, dict):
        raise Rejection(422, "invalid_json_file", f"{name} must hold a JSON object.")
    return value


def _tensors_of_copy(path: Path, name: str) -> set[str]:
    """The tensor names of a copied safetensors file (what the engine will load), its header checked."""
    try:
        with path.open("rb") as fh:
            return set(safetensors_header(fh, os.fstat(fh.fileno()).st_size))
    except ValueError:
        raise Rejection(422, "invalid_weights", f"{name} is not a valid safetensors file (its header or offsets are "
                        "wrong); save the model with save_pretrained(DIR).") from None


# -- copying --------------------------------------------------------------------------------------

def _copy_bytes(src: int, dst: int, size: int) -> int:
    """Copy ``size`` bytes from the start of ``src`` (kernel-side where it can); bytes copied."""
    done = 0
    try:
        while done < size:
            n = os.copy_file_range(src, dst, min(COPY_CHUNK, size - done), done, done)
            if n == 0:
                return done
            done += n
        return done
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
            raise
    while done < size:  # copy_file_range refused: through user space
        chunk = os.pread(src, min(1 << 24, size - done), done)
        if not chunk:
            break
        os.pwrite(dst, chunk, done)
        done += len(chunk)
    return done


class _Budget:
    def __init__(self, limit: int) -> None:
        self.limit, self.used = limit, 0

    def take(self, name: str, size: int) -> None:
        self.used += size
        if self.used > self.limit:
            raise Rejection(413, "too_large", f"the model's files are over the grader's limit of {self.limit:,} "
                            f"bytes (at {name}); submit a model of the base model's size.")


def _copy_member(dir_fd: int, name: str, dest: Path, budget: _Budget) -> int:
    """Copy one weights file into ``dest``; its size. Refused if it changes while it is copied."""
    try:
        with open_regular(name, dir_fd=dir_fd) as (fh, st):
            budget.take(name, st.st_size)
            out = os.open(dest / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                copied = _copy_bytes(fh.fileno(), out, st.st_size)
            finally:
                os.close(out)
            if copied != st.st_size:
                raise Rejection(409, "changed_while_copied", f"{name} shrank while the grader copied it; submit "
                                "once save_pretrained has returned.")
            _unchanged(fh.fileno(), st, name)
            return st.st_size
    except Rejection:
        raise
    except OSError as exc:
        raise _member_error(name, exc) from None


def _write(dest: Path, name: str, data: bytes) -> str:
    (dest / name).write_bytes(data)
    return hashlib.blake2b(data, digest_size=16).hexdigest()


LAYER_COUNT_KEYS = ("num_hidden_layers", "n_layer", "num_layers")
LAYER_INDEX = re.compile(r"(?:^|\.)(?:layers|layer|h|blocks|block)\.(\d{1,9})\.")


def check_layers(config: dict[str, Any], tensors: set[str]) -> None:
    """A config may declare no more layers than its weights hold: transformers builds every declared
    layer (at random where its weights are missing) before it notices, so 20,000 declared layers over a
    small model's weights cost the whole eval timeout. Refused at intake, in the time a header takes."""
    declared = next((config[k] for k in LAYER_COUNT_KEYS if k in config), None)
    if not isinstance(declared, int) or isinstance(declared, bool):
        return
    held = {m.group(1) for name in tensors if (m := LAYER_INDEX.search(name))}
    if declared > len(held):
        raise Rejection(422, "missing_weights", f"the config declares {declared:,} layers and the weights hold "
                        f"{len(held):,}; the missing ones would be initialised at random. Save the full model with "
                        "save_pretrained(DIR), its config as trained.")


def _sanitised_configs(config: dict[str, Any], generation: dict[str, Any] | None) -> tuple[
        dict[str, Any] | None, dict[str, Any], list[str]]:
    """(config.json without decoding keys, or None if it had none; generation_config.json with only its
    token ids; what was dropped that would have changed generation)."""
    def changes(key: str, value: Any) -> bool:
        return value is not None and not (key in DECODING_DEFAULTS and value == DECODING_DEFAULTS[key])

    clean = {k: v for k, v in config.items() if k not in DECODING_KEYS}
    ignored = [f"{CONFIG}: {k}" for k in sorted(config) if k in DECODING_KEYS and changes(k, config[k])]
    clean_config = None if len(clean) == len(config) else clean
    source = generation if generation is not None else config
    kept: dict[str, Any] = {}
    for key in TOKEN_ID_KEYS:
        value = source.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            kept[key] = value
        elif isinstance(value, list) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            kept[key] = value
    if generation is not None:
        ignored += [f"{GENERATION_CONFIG}: {k}" for k in sorted(generation) if changes(k, generation[k])
                    and k not in TOKEN_ID_KEYS and k not in ("transformers_version", "_from_model_config")]
    return clean_config, kept, ignored


def tokenizer_signature(files: dict[str, bytes]) -> dict[str, Any]:
    """What of a tokenizer changes the prompt the model sees or the text read back: the chat template,
    the special tokens, and the tokenizer model, normalizer, pre-tokenizer, post-processor and decoder.
    Layout, key order and settings a re-save touches do not count (TRL re-saves an unchanged tokenizer
    in another layout)."""
    def load(name: str) -> Any:
        try:
            return json.loads(files[name]) if name in files else None
        except (ValueError, RecursionError):
            return files[name]

    config = load("tokenizer_config.json")
    config = config if isinstance(config, dict) else {}
    fast = load("tokenizer.json")
    fast = {k: v for k, v in fast.items() if k not in ("truncation", "padding", "version")} \
        if isinstance(fast, dict) else fast
    template = files.get("chat_template.jinja", b"").decode("utf-8", "replace") or config.get("chat_template") \
        or load("chat_template.json")
    special = {k: config.get(k) for k in ("bos_token", "eos_token", "unk_token")}
    other = {n: hashlib.blake2b(files[n], digest_size=16).hexdigest()
             for n in ("tokenizer.model", "vocab.json", "merges.txt", "added_tokens.json") if n in files}
    return {"chat template": template, "special tokens": special, "tokenizer": fast, "vocabulary files": other}


def take(model_dir: Path, workspace: Path | None, dest: Path, *, max_bytes: int, base: BaseModel | None) -> Intake:
    """Copy what an engine loads of ``model_dir`` into ``dest`` (created here; removed on refusal).

    ``workspace``: where the folder must really be (checked on the opened folder, so a path
    swapped for a link after it was resolved is caught); None for the grader's own base model.
    ``base``: what the submission is held to (its tokenizer is the one copied); None when
    ``model_dir`` is the base model itself.
    """
    started = time.perf_counter()
    try:
        dir_fd = os.open(model_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        raise Rejection(409, "changed_while_copied", f"{model_dir} changed while the grader opened it; keep a "
                        "submitted folder in place.") from None
    dest.mkdir(parents=True, exist_ok=False)
    try:
        if workspace is not None:
            where = Path(os.readlink(f"/proc/self/fd/{dir_fd}"))
            if not where.is_relative_to(workspace):
                raise Rejection(403, "outside_workspace", f"the folder turned out to be {where}, outside the "
                                "workspace; keep a submitted folder in place and inside the workspace.")
        intake = _take(dir_fd, dest, _Budget(max_bytes), base, started)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    finally:
        os.close(dir_fd)
    return intake


def _take(dir_fd: int, dest: Path, budget: _Budget, base: BaseModel | None, started: float) -> Intake:
    names = _listing(dir_fd)
    files: list[IntakeFile] = []
    if CONFIG not in names:
        raise Rejection(422, "no_config", "The folder has no config.json. Save the model with save_pretrained(DIR).")
    config_bytes = _read_small(dir_fd, CONFIG)
    config = _json_object(config_bytes, CONFIG)
    generation = _json_object(_read_small(dir_fd, GENERATION_CONFIG), GENERATION_CONFIG) \
        if GENERATION_CONFIG in names else None
    clean_config, token_ids, ignored = _sanitised_configs(config, generation)
    budget.take(CONFIG, len(config_bytes))
    data = config_bytes if clean_config is None else json.dumps(clean_config, indent=2).encode()
    files.append(IntakeFile(CONFIG, "config", len(data), _write(dest, CONFIG, data)))
    data = json.dumps(token_ids, indent=2).encode()
    files.append(IntakeFile(GENERATION_CONFIG, "generation_config", len(data), _write(dest, GENERATION_CONFIG, data)))

    own: dict[str, bytes] = {}
    for name in TOKENIZER_NAMES:
        if name in names:
            own[name] = _read_small(dir_fd, name)
            budget.take(name, len(own[name]))
    tokenizer = own if base is None else base.tokenizer
    if base is not None:
        mine, theirs = tokenizer_signature(own), tokenizer_signature(base.tokenizer)
        ignored += [f"tokenizer: its {part} differs from the base model's; the grader prompts and reads answers "
                    "with the base model's tokenizer" for part in mine if mine[part] != theirs[part]]
    for name, data in tokenizer.items():
        files.append(IntakeFile(name, "tokenizer", len(data), _write(dest, name, data)))

    indexes: dict[str, bytes] = {}

    def index_of(index: str) -> list[Any]:
        indexes[index] = _read_small(dir_fd, index)
        weight_map = _json_object(indexes[index], index).get("weight_map")
        if not isinstance(weight_map, dict):
            raise Rejection(422, "invalid_index", f"{index} has no weight_map; save the model with save_pretrained(DIR).")
        return list(weight_map.values())

    weights, fmt, index = weights_to_load(names, index_of)
    if index is not None:
        budget.take(index, len(indexes[index]))
        files.append(IntakeFile(index, "index", len(indexes[index]), _write(dest, index, indexes[index])))
    tensors: set[str] = set()
    for name in weights:
        files.append(IntakeFile(name, "weights", _copy_member(dir_fd, name, dest, budget)))
        if fmt == "safetensors":
            tensors |= _tensors_of_copy(dest / name, name)
    if base is not None and fmt == "safetensors" and base.tensors and \
            (config.get("architectures"), config.get("model_type")) == base.architecture:
        missing = sorted(base.tensors - tensors)
        if missing:
            raise Rejection(422, "missing_weights", f"the weights lack {len(missing)} tensor(s) the model's config "
                            f"declares (e.g. {missing[0]}); they would be initialised at random. Save the full model "
                            "with save_pretrained(DIR) (merge LoRA adapters first).")
    if fmt == "safetensors":
        check_layers(config, tensors)
    left_out = sorted(names - {f.name for f in files} - set(own) - {GENERATION_CONFIG})
    manifest = Manifest(files=files, bytes=sum(f.size for f in files), copy_seconds=time.perf_counter() - started,
                        weights_format=fmt, left_out=left_out[:LEFT_OUT_SHOWN], n_left_out=len(left_out),
                        ignored_settings=ignored)
    return Intake(dest, manifest)
