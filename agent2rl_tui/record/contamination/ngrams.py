"""How an eval item is recognised in text: normalisation, token and n-gram hashes, the eval index.

This module is the matching rule of the contamination check, kept apart from where the bytes
come from (blobs.py, workspace.py) so that both sides, the eval items and the scanned files,
go through the very same steps:

- Text is normalised: the escapes a JSON writer adds are undone (``\\\\``, ``\\uXXXX``,
  ``\\n`` ``\\r`` ``\\t``; other backslashes count as space), ASCII letters are lowercased,
  and the text is cut into tokens: runs of word bytes (letters, digits, ``_`` and every
  non-ASCII byte) and single punctuation characters. Whitespace differences vanish, code
  punctuation counts.
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
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agent2rl_tui.record.contamination.params import CHUNK_BYTES as CHUNK_BYTES
from agent2rl_tui.record.contamination.params import MIN_SHARED as MIN_SHARED
from agent2rl_tui.record.contamination.params import N_TOKENS as N_TOKENS

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
        maybe: np.ndarray = grams[self.filter_bits[grams & mask]]
        found: np.ndarray = maybe[_member(maybe, self.keys)]
        return found

    def items_in(self, shared: np.ndarray) -> list[int]:
        """The items (positions) held by a file that shares the n-grams ``shared`` with the index."""
        if shared.size == 0:
            return []
        held = _member(self.pair_hash, np.sort(shared))
        counts = np.bincount(self.pair_item[held], minlength=len(self.item_ids))
        items: list[int] = np.flatnonzero((self.need > 0) & (counts >= self.need)).tolist()
        return items


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
    found: np.ndarray = sorted_keys[at] == values
    return found


def _filter_size(keys: int) -> int:
    """A power of two about 64 times the key count (at most ~1.6% of misses pass), 1 Mi to 256 Mi."""
    return 1 << min(28, max(20, (keys * 64).bit_length()))
