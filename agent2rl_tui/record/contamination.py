"""The contamination check: did the agent put eval items in what it wrote?

The agent never sees the eval split, but nothing stops it from downloading the test split
of a public benchmark and training on it. After a run this module scans everything the
agent wrote for long token sequences of the eval items, so a reviewer learns which items
leaked, into which file, and when.

How an item is recognised:

- Text is normalised: the escapes a JSON writer adds are undone (``\\\\``, ``\\uXXXX``,
  ``\\n`` ``\\r`` ``\\t``; other backslashes count as space), ASCII letters are lowercased,
  and the text is cut into tokens: runs of word bytes (letters, digits, ``_`` and every
  non-ASCII byte) and single punctuation characters. Whitespace differences vanish, code
  punctuation counts. Both sides, eval items and scanned files, go through the same steps.
- The texts of an item are its string fields (question and gold answer; prompt, solution
  and tests), each cut into n-grams of ``n`` tokens (13 by default) that never cross from
  one field to the next. An n-gram that also occurs in the train split does not count:
  boilerplate that both splits share (``from typing import List``, docstring phrases)
  never flags a file, and neither does an agent that copies its own train data. An item
  with no n-gram left is not checkable; the result says how many were.
- An item is found in a file when the file holds at least ``min_shared`` (default 2) of the
  item's distinct n-grams, or all of them when the item has fewer. A stretch of 13 tokens
  that no train item holds is already unlikely to be written by chance; needing two (14
  tokens in a row at the least) keeps a single stock phrase from flagging a file, and a
  copied question holds dozens.
- An item is named by its ``id`` field, else by its position in the eval split (``"17"``).

What is scanned: every distinct blob of every revision in ``snapshots.git`` (read once
each, and mapped back to the revisions and paths that hold it), and the files in
``workspace/`` at the end that no revision holds (``output/``, files over the capture size
cap, ...). Not scanned: ``workspace/models/`` and ``workspace/data/`` (the base model and
the train split are ours), installed-package folders (virtualenvs, ``site-packages``,
``node_modules``, ``.git``), weight files by name, binary files (a NUL byte in the first
8 KiB) and files over ``size_cap`` bytes; each is counted under ``skipped``. Files are
read in chunks and tokenised with numpy, so a multi-gigabyte output folder is scanned
without holding a file in memory.

The final workspace is the agent's, read as hostile data: only regular files are read,
opened without blocking or following links (capture.open_regular; FIFOs, sockets and
devices count as ``special``), never past the size they had when opened; files and folders
that cannot be read count as ``unreadable``; and the walk stops after ``MAX_ENTRIES``
entries (``not_walked`` is 1 when it did), so millions of tiny files cost a bounded scan.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO

import numpy as np

from agent2rl_tui.record.capture import BINARY_SNIFF_BYTES, NotRegular, open_regular
from agent2rl_tui.record.evalset import run_eval_items
from agent2rl_tui.record.revisions import BRANCH, GitRepo, list_revisions
from agent2rl_tui.tasks.registry import Task

N_TOKENS = 13
MIN_SHARED = 2
SIZE_CAP_BYTES = 512 * 2**20
CHUNK_BYTES = 2**20
MIN_CUT_LIMIT = 2**16
REPORT_FILE = "contamination.json"
AGENT_HOME = "agent-home"
"""The contained agent's $HOME, a folder of the run (run/containment.py); scanned with the workspace."""
NOT_SCANNED_TOP = ("models", "data")
PACKAGE_DIR_NAMES = ("site-packages", "dist-packages", "node_modules", "__pycache__", ".git")
WEIGHT_SUFFIXES = (
    ".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".npy", ".npz", ".pkl", ".pickle",
    ".onnx", ".h5", ".msgpack", ".pyc", ".so",
)
MAX_ERRORS_LISTED = 20
MAX_ENTRIES = 200_000
"""Entries of the final workspace and the agent's home looked at, together, before the walk stops."""

# -- normalisation and hashing ---------------------------------------------------------------

_U_ESCAPES = re.compile(rb"(?:\\u[0-9a-fA-F]{4})+")
_TOKEN_BASE = 0x9E3779B97F4A7C15  # odd: invertible modulo 2**64
_TOKEN_BASE_INV = pow(_TOKEN_BASE, -1, 2**64)
_GRAM_BASE = np.uint64(0xC2B2AE3D27D4EB4F)
_powers: dict[str, np.ndarray] = {}


def _decode_u(match: re.Match[bytes]) -> bytes:
    text = match.group(0).decode("unicode_escape")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # surrogates: pairs joined, lone ones replaced
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace").encode("utf-8")


def _decode_u_escapes(data: bytes) -> bytes:
    """``\\uXXXX`` runs decoded to UTF-8; found with bytes.find, which is far faster than re.sub here."""
    parts, pos = [], 0
    at = data.find(b"\\u")
    while at >= 0:
        match = _U_ESCAPES.match(data, at)
        if match is None:
            at = data.find(b"\\u", at + 2)
            continue
        parts += [data[pos:at], _decode_u(match)]
        pos = match.end()
        at = data.find(b"\\u", pos)
    parts.append(data[pos:])
    return b"".join(parts)


def normalise(data: bytes) -> bytes:
    """JSON escapes undone and ASCII lowercased; what tokenising it needs besides the byte classes."""
    if b"\\\\" in data:
        data = data.replace(b"\\\\", b"\\")
    if b"\\u" in data:
        data = _decode_u_escapes(data)
    data = data.lower()
    for escape in (b"\\n", b"\\r", b"\\t"):
        if escape in data:
            data = data.replace(escape, b" ")
    return data


def _powers_of(base: int, size: int) -> np.ndarray:
    """base**j modulo 2**64 for j < size, by doubling (numpy's cumprod is slow on uint64)."""
    out = np.ones(size, dtype=np.uint64)
    done = 1
    while done < size:
        k = min(done, size - done)
        np.multiply(out[:k], np.uint64(pow(base, done, 2**64)), out=out[done:done + k])
        done += k
    return out


def _power_tables(size: int) -> tuple[np.ndarray, np.ndarray]:
    """BASE**j and BASE**-j modulo 2**64 for j < size (grown on demand, kept for the process)."""
    if "fwd" not in _powers or len(_powers["fwd"]) < size:
        size = max(size, CHUNK_BYTES * 2)
        _powers["fwd"], _powers["inv"] = _powers_of(_TOKEN_BASE, size), _powers_of(_TOKEN_BASE_INV, size)
    return _powers["fwd"], _powers["inv"]


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a token's hash spread over all 64 bits."""
    x = x ^ (x >> np.uint64(30))
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def token_hashes(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """A 64-bit hash per token of normalised bytes, and each token's start offset.

    Word bytes are ASCII letters and digits, ``_`` and every non-ASCII byte; bytes up to 0x20
    and the backslash are space; every other byte is a token of its own (punctuation).
    A token's hash is a polynomial over its bytes, computed for all tokens at once from one
    prefix sum: sum(b[j] * BASE**j) over the token, divided by BASE**start.
    """
    arr = np.frombuffer(data, dtype=np.uint8)
    if arr.size == 0:
        return np.empty(0, np.uint64), np.empty(0, np.int64)
    letter = arr | np.uint8(0x20)
    word = ((letter >= ord("a")) & (letter <= ord("z"))) | ((arr >= ord("0")) & (arr <= ord("9")))
    word |= (arr >= 0x80) | (arr == ord("_"))
    punct = ~word & (arr > 0x20) & (arr != ord("\\"))
    before, after = np.zeros_like(word), np.zeros_like(word)
    before[1:], after[:-1] = word[:-1], word[1:]
    starts = np.flatnonzero((word & ~before) | punct)
    ends = np.flatnonzero((word & ~after) | punct)
    fwd, inv = _power_tables(arr.size)
    prefix = np.zeros(arr.size + 1, dtype=np.uint64)
    np.cumsum(arr.astype(np.uint64) * fwd[:arr.size], out=prefix[1:])
    sums = (prefix[ends + 1] - prefix[starts]) * inv[starts]
    return _mix(sums), starts


def ngram_hashes(tokens: np.ndarray, n: int) -> np.ndarray:
    """The hash of every window of ``n`` consecutive tokens (a polynomial over token hashes)."""
    count = tokens.size - n + 1
    if count <= 0:
        return np.empty(0, np.uint64)
    acc = tokens[:count].copy()
    for k in range(1, n):
        acc *= _GRAM_BASE
        acc += tokens[k:k + count]
    return acc


def _owned_ngrams(texts: list[str], owners: list[int], n: int) -> tuple[np.ndarray, np.ndarray]:
    """The n-grams of many texts, each with its owner, no n-gram crossing from one text to the next.

    The texts are joined by NUL bytes (a separator no token holds) and hashed in one pass.
    """
    parts = [normalise(t.encode("utf-8", "surrogatepass")).replace(b"\0", b" ") for t in texts]
    all_grams, all_owners = [np.empty(0, np.uint64)], [np.empty(0, np.int64)]
    first = 0
    while first < len(parts):  # batches of about a chunk: the power tables stay small
        last, size = first, 0
        while last < len(parts) and (last == first or size + len(parts[last]) < CHUNK_BYTES):
            size += len(parts[last]) + 1
            last += 1
        joined = b"\0".join(parts[first:last])
        tokens, starts = token_hashes(joined)
        bounds = np.flatnonzero(np.frombuffer(joined, dtype=np.uint8) == 0)
        text_of = np.searchsorted(bounds, starts)  # index of the text each token lies in
        grams = ngram_hashes(tokens, n)
        same_text = text_of[:grams.size] == text_of[n - 1:]
        all_grams.append(grams[same_text])
        all_owners.append(np.asarray(owners[first:last], dtype=np.int64)[text_of[:grams.size][same_text]])
        first = last
    return np.concatenate(all_grams), np.concatenate(all_owners)


# -- the eval index -----------------------------------------------------------------------------

def item_id(row: dict[str, Any], index: int) -> str:
    """An eval item's id: its ``id`` field (``task_id`` for HumanEval), else its position in the eval split."""
    for key in ("id", "task_id"):
        if row.get(key) is not None:
            return str(row[key])
    return str(index)


def _texts(rows: list[dict[str, Any]]) -> tuple[list[str], list[int]]:
    texts, owners = [], []
    for i, row in enumerate(rows):
        for value in row.values():
            if isinstance(value, str) and value.strip():
                texts.append(value)
                owners.append(i)
    return texts, owners


@dataclass
class EvalIndex:
    """Which eval items each n-gram belongs to, train n-grams removed."""

    n: int
    min_shared: int
    item_ids: list[str]
    pair_hash: np.ndarray  # one row per (n-gram, item) pair, sorted by hash
    pair_item: np.ndarray
    keys: np.ndarray  # the distinct n-gram hashes, sorted
    need: np.ndarray  # per item: n-grams a file must share to hold it (0: not checkable)
    filter_bits: np.ndarray = field(repr=False)  # a bitmap on the low hash bits: a cheap first test

    @property
    def checkable(self) -> int:
        return int(np.count_nonzero(self.need))

    def candidates(self, grams: np.ndarray) -> np.ndarray:
        """The n-grams of ``grams`` that are in the index."""
        mask = np.uint64(self.filter_bits.size - 1)
        maybe = grams[self.filter_bits[grams & mask]]
        return maybe[_member(maybe, self.keys)]

    def items_in(self, shared: np.ndarray) -> list[int]:
        """The items (positions) held by a file that shares the n-grams ``shared`` with the index."""
        if shared.size == 0:
            return []
        held = _member(self.pair_hash, np.sort(shared))
        counts = np.bincount(self.pair_item[held], minlength=len(self.item_ids))
        return np.flatnonzero((self.need > 0) & (counts >= self.need)).tolist()


def build_index(eval_rows: list[dict[str, Any]], train_rows: list[dict[str, Any]], *, n: int = N_TOKENS,
                min_shared: int = MIN_SHARED) -> EvalIndex:
    """The n-grams of the eval items that the train split does not hold."""
    grams, owners = _owned_ngrams(*_texts(eval_rows), n)
    train_grams, _ = _owned_ngrams(*_texts(train_rows), n)
    keep = ~_member(grams, np.sort(train_grams))
    grams, owners = grams[keep], owners[keep]
    order = np.lexsort((owners, grams))
    grams, owners = grams[order], owners[order]
    new_gram = np.ones(grams.size, dtype=bool)
    new_gram[1:] = grams[1:] != grams[:-1]
    distinct = new_gram.copy()
    distinct[1:] |= owners[1:] != owners[:-1]
    grams, owners, keys = grams[distinct], owners[distinct], grams[new_gram]
    totals = np.bincount(owners, minlength=len(eval_rows))
    bits = np.zeros(_filter_size(keys.size), dtype=bool)
    bits[keys & np.uint64(bits.size - 1)] = True
    return EvalIndex(n=n, min_shared=min_shared, item_ids=[item_id(r, i) for i, r in enumerate(eval_rows)],
                     pair_hash=grams, pair_item=owners, keys=keys,
                     need=np.minimum(totals, min_shared).astype(np.int64), filter_bits=bits)


def _member(values: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """values[i] in sorted_keys, by binary search (np.isin re-hashes the keys on every call)."""
    if sorted_keys.size == 0:
        return np.zeros(values.size, dtype=bool)
    at = np.minimum(np.searchsorted(sorted_keys, values), sorted_keys.size - 1)
    return sorted_keys[at] == values


def _filter_size(keys: int) -> int:
    """A power of two about 64 times the key count (at most ~1.6% of misses pass), 1 Mi to 256 Mi."""
    return 1 << min(28, max(20, (keys * 64).bit_length()))


# -- scanning bytes ---------------------------------------------------------------------------------

class Scanner:
    """The index n-grams in one stream of bytes, fed in chunks of any size.

    Chunks are cut after their last newline (else their last space), so no token and no
    escape is split (only a run of twice the chunk size without whitespace is cut where
    it must be); the last ``n - 1`` tokens carry over, so n-grams cross chunks.
    """

    def __init__(self, index: EvalIndex, chunk_bytes: int = CHUNK_BYTES) -> None:
        self.index = index
        self.chunk_bytes = chunk_bytes
        self.pending = b""
        self.tail = np.empty(0, np.uint64)
        self.found: list[np.ndarray] = []

    def feed(self, data: bytes) -> None:
        self.pending = self.pending + data if self.pending else data
        limit = max(2 * self.chunk_bytes, MIN_CUT_LIMIT)
        while len(self.pending) >= self.chunk_bytes:
            cut = self.pending.rfind(b"\n", 0, limit) + 1 or self.pending.rfind(b" ", 0, limit) + 1
            if not cut:  # no whitespace yet: wait for some, but never hold more than the limit
                if len(self.pending) < limit:
                    return
                cut = limit
            text, self.pending = self.pending[:cut], self.pending[cut:]
            self._scan(text)

    def finish(self) -> np.ndarray:
        """The distinct index n-grams the stream held."""
        self._scan(self.pending)
        self.pending = b""
        return np.unique(np.concatenate(self.found)) if self.found else np.empty(0, np.uint64)

    def _scan(self, text: bytes) -> None:
        if not text:
            return
        tokens, _ = token_hashes(normalise(text))
        if self.tail.size:
            tokens = np.concatenate([self.tail, tokens])
        hits = self.index.candidates(ngram_hashes(tokens, self.index.n))
        if hits.size:
            self.found.append(hits)
        self.tail = tokens[-(self.index.n - 1):] if self.index.n > 1 else np.empty(0, np.uint64)


@dataclass
class ScanStats:
    files_scanned: int = 0
    bytes_scanned: int = 0
    skipped: dict[str, int] = field(default_factory=lambda: {
        "binary": 0, "too_large": 0, "weights": 0, "package_dirs": 0, "links": 0, "errors": 0,
        "special": 0, "unreadable": 0, "not_walked": 0})
    errors: list[dict[str, str]] = field(default_factory=list)
    entries_left: int = MAX_ENTRIES  # of the final workspace's walk

    def error(self, where: str, exc: BaseException) -> None:
        self.skipped["errors"] += 1
        if len(self.errors) < MAX_ERRORS_LISTED:
            self.errors.append({"path": where, "error": f"{type(exc).__name__}: {exc}"})


@dataclass
class Seen:
    """Contents already scanned, by git blob sha: the same bytes are never scanned twice."""

    items: dict[str, list[int]] = field(default_factory=dict)
    sizes: set[int] = field(default_factory=set)

    def add(self, sha: str, size: int, items: list[int]) -> None:
        self.items[sha] = items
        self.sizes.add(size)


def _scan_stream(index: EvalIndex, read: Callable[[int], bytes], size: int, stats: ScanStats, size_cap: int,
                 on_data: Callable[[bytes], object] | None = None) -> list[int] | None:
    """Items in ``size`` bytes given by ``read(k)``; None when skipped (binary, too large)."""
    if size > size_cap:
        stats.skipped["too_large"] += 1
        return None
    data = read(min(size, BINARY_SNIFF_BYTES))
    if b"\0" in data:
        stats.skipped["binary"] += 1
        return None
    scanner = Scanner(index)
    left = size
    while data:
        scanner.feed(data)
        if on_data is not None:
            on_data(data)
        left -= len(data)
        data = read(min(left, CHUNK_BYTES)) if left > 0 else b""
    stats.files_scanned += 1
    stats.bytes_scanned += size - left
    return index.items_in(scanner.finish())


# -- revisions ----------------------------------------------------------------------------------------

@dataclass
class RevisionBlobs:
    """Every blob of every revision, with the (revision seq, path) pairs that hold it.

    A path that keeps its blob over many revisions is one range, not one pair per revision:
    the map grows with the changes the snapshots stored, never with revisions times files.
    """

    where: dict[str, list[tuple[int, int, str]]] = field(default_factory=dict)  # sha -> (first, last, path)
    seqs: list[int] = field(default_factory=list)  # the revisions' seqs, in order; ranges index it

    @property
    def revisions(self) -> int:
        return len(self.seqs)

    def holders(self, sha: str) -> Iterator[tuple[int, str]]:
        """(revision seq, path) of every revision and path that hold the blob."""
        for first, last, path in self.where.get(sha, []):
            for i in range(first, last + 1):
                yield self.seqs[i], path


def revision_blobs(run_dir: Path) -> RevisionBlobs:
    """One ``git log --raw`` pass, read as it comes: each commit's tree rebuilt from its parent's
    and its changes, and each blob's stretch of revisions closed when its path changes."""
    found = RevisionBlobs()
    git_dir = run_dir / "snapshots.git"
    if not (git_dir / "HEAD").exists():
        return found
    repo = GitRepo(git_dir)
    if repo.head() is None:
        return found
    seq_of = {r.sha: r.seq for r in list_revisions(run_dir)}
    tree: dict[str, tuple[str, int]] = {}  # path -> (blob, index of the first revision holding it)
    commit: str | None = None
    change: list[bytes] | None = None
    for part in _log_records(repo):
        part = part.lstrip(b"\n")
        if part.startswith(b"\x01"):
            _record_tree(found, seq_of.get(commit or ""))
            commit, change = part[1:].decode(), None
        elif part.startswith(b":"):
            change = part[1:].split(b" ")
        elif change is not None and part:
            _apply_change(found, tree, change, part.decode("utf-8", "surrogateescape"))
            change = None
    _record_tree(found, seq_of.get(commit or ""))
    for path, held in tree.items():
        _close(found, path, held)
    return found


def _log_records(repo: GitRepo) -> Iterator[bytes]:
    """The NUL-separated fields of the branch's ``git log --raw -z``, oldest commit first."""
    argv = ["git", f"--git-dir={repo.git_dir}", "log", "--reverse", "--raw", "-z", "--no-renames", "--no-abbrev",
            "--root", "--format=%x01%H", BRANCH]
    with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          env={**os.environ, **repo.env}) as proc:
        assert proc.stdout is not None
        rest = b""
        while chunk := proc.stdout.read(CHUNK_BYTES):
            fields = (rest + chunk).split(b"\0")
            rest = fields.pop()
            yield from fields
        if rest:
            yield rest
        if proc.wait() != 0:
            raise RuntimeError(f"git log failed with exit code {proc.returncode}")


def _apply_change(found: RevisionBlobs, tree: dict[str, tuple[str, int]], change: list[bytes], path: str) -> None:
    _old_mode, new_mode, _old_sha, new_sha, status = change[:5]
    held = tree.pop(path, None)
    if held is not None:
        _close(found, path, held)
    if not status.startswith(b"D") and new_mode in (b"100644", b"100755"):  # else a link or a submodule now
        tree[path] = (new_sha.decode(), found.revisions)  # held from the next revision recorded


def _close(found: RevisionBlobs, path: str, held: tuple[str, int]) -> None:
    """The stretch of revisions in which ``path`` held a blob, ended by a change (or the last one)."""
    sha, first = held
    if first < found.revisions:  # held by at least one recorded revision
        found.where.setdefault(sha, []).append((first, found.revisions - 1, path))


def _record_tree(found: RevisionBlobs, seq: int | None) -> None:
    if seq is not None:  # None: before the first commit, or a commit run.db does not know
        found.seqs.append(seq)


def scan_blobs(run_dir: Path, shas: Iterable[str], index: EvalIndex, stats: ScanStats, size_cap: int,
               seen: Seen) -> dict[str, list[int]]:
    """Each blob read once through one ``git cat-file --batch``: sha -> items, for the blobs that hold any."""
    repo = GitRepo(run_dir / "snapshots.git")
    argv = ["git", f"--git-dir={repo.git_dir}", "cat-file", "--batch"]
    found: dict[str, list[int]] = {}
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          env={**os.environ, **repo.env}) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            for sha in sorted(shas):
                proc.stdin.write(sha.encode() + b"\n")
                proc.stdin.flush()
                items = _read_blob(proc.stdout, sha, index, stats, size_cap, seen)
                if items:
                    found[sha] = items
        finally:
            proc.stdin.close()
    return found


def _read_blob(out: IO[bytes], sha: str, index: EvalIndex, stats: ScanStats, size_cap: int,
               seen: Seen) -> list[int] | None:
    header = out.readline().split()
    if len(header) != 3 or not header[2].isdigit():
        stats.error(f"snapshots.git:{sha}", LookupError(b" ".join(header).decode(errors="replace") or "no answer"))
        return None
    size = int(header[2])
    left = [size]

    def read(k: int) -> bytes:
        data = out.read(min(k, left[0]))
        left[0] -= len(data)
        return data

    items = None
    try:
        items = _scan_stream(index, read, size, stats, size_cap)
    except Exception as exc:  # noqa: BLE001 - one blob's failure is counted; the others are still read
        stats.error(f"snapshots.git:{sha}", exc)
    while left[0] > 0:  # skipped or cut short: the rest of the blob is still in the pipe
        if not read(CHUNK_BYTES):
            break
    out.read(1)  # the newline after each object
    if items is not None:
        seen.add(sha, size, items)
    return items


# -- the final workspace ------------------------------------------------------------------------------

def workspace_files(workspace: Path, stats: ScanStats, *, skip_top: tuple[str, ...] = NOT_SCANNED_TOP,
                    prefix: str = "") -> Iterator[tuple[str, Path]]:
    """(path as reported, path) of the files to look at under one folder, in a fixed order.

    Links are counted and not followed, a folder that cannot be listed is counted as
    unreadable, and no more than ``stats.entries_left`` entries are looked at (a folder is
    listed no further than that either).
    """
    stack = [("", str(workspace))]
    while stack:
        rel_root, root = stack.pop()
        try:
            with os.scandir(root) as it:
                entries = sorted(itertools.islice(it, stats.entries_left + 1), key=lambda e: e.name)
        except OSError:
            stats.skipped["unreadable"] += 1
            continue
        subdirs = []
        for entry in entries:
            if stats.entries_left <= 0:
                stats.skipped["not_walked"] = 1  # the walk stopped here: what is past it is unknown
                return
            stats.entries_left -= 1
            if entry.is_symlink():
                stats.skipped["links"] += 1
            elif not entry.is_dir(follow_symlinks=False):
                yield prefix + rel_root + entry.name, Path(entry.path)
            elif rel_root or entry.name not in skip_top:
                if _is_package_dir(entry.name, entry.path):
                    stats.skipped["package_dirs"] += 1
                else:
                    subdirs.append((rel_root + entry.name + "/", entry.path))
        stack.extend(reversed(subdirs))


def _is_package_dir(name: str, full: str) -> bool:
    return (name in PACKAGE_DIR_NAMES or os.path.exists(os.path.join(full, "pyvenv.cfg"))
            or os.path.isdir(os.path.join(full, "conda-meta")))


def _git_sha(size: int) -> Any:
    return hashlib.sha1(b"blob %d\0" % size)  # noqa: S324 - git's object name, not security


def git_blob_sha(fh: BinaryIO, size: int) -> str:
    """The sha git gives the first ``size`` bytes of an open file (its size when opened)."""
    digest = _git_sha(size)
    left = size
    while left > 0 and (data := fh.read(min(left, CHUNK_BYTES))):
        digest.update(data)
        left -= len(data)
    return digest.hexdigest()


def scan_workspace(run_dir: Path, index: EvalIndex, stats: ScanStats, size_cap: int,
                   seen: Seen) -> dict[str, list[int]]:
    """Path -> items, for the files at the end that hold any: the workspace's, and the contained
    agent's own home (``agent-home/``, reported as ``~/...``), where a download or a stash lands.

    A file whose bytes were already scanned (a revision's blob, an identical file, such as
    the tokenizer files of every checkpoint) takes that result without being scanned again.
    """
    walks: list[Iterator[tuple[str, Path]]] = []  # walked as they are scanned: a path list is never held
    if (run_dir / "workspace").is_dir():
        walks.append(workspace_files(run_dir / "workspace", stats))
    if (run_dir / AGENT_HOME).is_dir():
        walks.append(workspace_files(run_dir / AGENT_HOME, stats, skip_top=(), prefix="~/"))
    found: dict[str, list[int]] = {}
    for rel, path in itertools.chain(*walks):
        try:
            items = _scan_file(path, index, stats, size_cap, seen)
        except OSError as exc:
            stats.error(rel if rel.startswith("~/") else f"workspace/{rel}", exc)
            continue
        if items:
            found[rel] = items
    return found


def _scan_file(path: Path, index: EvalIndex, stats: ScanStats, size_cap: int, seen: Seen) -> list[int] | None:
    if path.suffix.lower() in WEIGHT_SUFFIXES:
        stats.skipped["weights"] += 1
        return None
    try:
        with open_regular(path) as (fh, st):  # never waits on a FIFO, never follows a link
            size = st.st_size
            if size in seen.sizes:  # only then can the bytes have been seen: hash before scanning
                known = seen.items.get(git_blob_sha(fh, size))
                if known is not None:
                    return known
                fh.seek(0)
            digest = _git_sha(size)
            items = _scan_stream(index, fh.read, size, stats, size_cap, on_data=digest.update)
    except NotRegular:
        stats.skipped["special"] += 1
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # swapped for a link since it was listed
            stats.skipped["links"] += 1
        elif exc.errno in (errno.EACCES, errno.EPERM):
            stats.skipped["unreadable"] += 1
        elif exc.errno != errno.ENOENT:  # gone since: nothing to scan
            raise
        return None
    if items is not None:
        seen.add(digest.hexdigest(), size, items)
    return items


# -- the check --------------------------------------------------------------------------------------

def check_run(run_dir: Path, task: Task, *, n: int = N_TOKENS, min_shared: int = MIN_SHARED,
              size_cap: int = SIZE_CAP_BYTES) -> dict[str, Any]:
    """Scan a run's revisions and final workspace for the task's eval items.

    The result (JSON-able, deterministic but for the timings): ``n``, ``min_shared``,
    ``task``, ``eval_items``, ``checkable_items``, ``revisions_scanned``, ``files_scanned``
    and ``bytes_scanned`` (distinct contents read), ``skipped`` (counts by reason),
    ``errors`` (the first few), ``hits`` (one per path: ``path``, ``revisions``,
    ``in_final_workspace``, ``items``), ``items`` (all found), ``contaminated``,
    ``index_seconds``, ``seconds``.
    """
    started = time.monotonic()
    # The run's own eval items (its eval seed's draw: record/evalset.py), the ones the grader scores.
    index = build_index(run_eval_items(run_dir, task), task.load_split("train"), n=n, min_shared=min_shared)
    index_seconds = time.monotonic() - started
    result = scan_run(Path(run_dir), index, size_cap=size_cap)
    result["task"] = task.name
    result["index_seconds"] = round(index_seconds, 3)
    result["seconds"] = round(time.monotonic() - started, 3)
    return result


def scan_run(run_dir: Path, index: EvalIndex, *, size_cap: int = SIZE_CAP_BYTES) -> dict[str, Any]:
    """The check with a ready index: revisions first, then what only the final workspace holds."""
    started = time.monotonic()
    stats, seen = ScanStats(), Seen()
    revs = RevisionBlobs()
    blobs: dict[str, list[int]] = {}
    try:
        revs = revision_blobs(run_dir)
        blobs = scan_blobs(run_dir, revs.where, index, stats, size_cap, seen)
    except Exception as exc:  # noqa: BLE001 - a broken repo still leaves the workspace to scan
        stats.error("snapshots.git", exc)
    final = scan_workspace(run_dir, index, stats, size_cap, seen)
    hits = _hits(index, revs, blobs, final)
    items = sorted({i for hit in hits for i in hit["items"]})
    return {
        "n": index.n, "min_shared": index.min_shared, "eval_items": len(index.item_ids),
        "checkable_items": index.checkable, "revisions_scanned": revs.revisions,
        "files_scanned": stats.files_scanned, "bytes_scanned": stats.bytes_scanned,
        "skipped": dict(stats.skipped), "errors": stats.errors, "hits": hits, "items": items,
        "contaminated": bool(items), "seconds": round(time.monotonic() - started, 3),
    }


def _hits(index: EvalIndex, revs: RevisionBlobs, blobs: dict[str, list[int]],
          final: dict[str, list[int]]) -> list[dict[str, Any]]:
    """One entry per path that held eval items: in which revisions, whether still at the end, which items."""
    by_path: dict[str, dict[str, Any]] = {}

    def entry(path: str) -> dict[str, Any]:
        return by_path.setdefault(path, {"path": path, "revisions": set(), "in_final_workspace": False,
                                         "items": set()})

    for sha, items in blobs.items():
        for seq, path in revs.holders(sha):
            e = entry(path)
            e["revisions"].add(seq)
            e["items"].update(items)
    for path, items in final.items():
        e = entry(path)
        e["in_final_workspace"] = True
        e["items"].update(items)
    return [{**e, "revisions": sorted(e["revisions"]), "items": sorted(index.item_ids[i] for i in e["items"])}
            for _, e in sorted(by_path.items())]


def write_contamination(run_dir: Path, result: dict[str, Any]) -> Path:
    """``report/contamination.json``, written whole or not at all."""
    out = Path(run_dir) / "report"
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".{REPORT_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(result, indent=2), encoding="utf-8")
    os.replace(tmp, out / REPORT_FILE)
    return out / REPORT_FILE


def read_contamination(run_dir: Path) -> dict[str, Any] | None:
    """The last check's result, or None when no check ran (or its file is unreadable)."""
    try:
        data = json.loads((Path(run_dir) / "report" / REPORT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
