"""One stream of bytes scanned for the index's n-grams, and the counts a scan keeps.

Both sources of bytes, the git blobs of snapshots.git (blobs.py) and the files of the final
workspace (workspace.py), hand their bytes to ``scan_stream`` here: it skips binary
content (a NUL byte in the first 8 KiB) and anything over the size cap, and feeds the rest
through a ``Scanner`` in chunks, tokenised with numpy, so a multi-gigabyte file is scanned
without being held in memory. ``ScanStats`` counts what was read and skipped (by reason)
and lists the first errors; ``Seen`` remembers each content by its git blob sha, so the
same bytes are never scanned twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from agent2rl_tui.record.capture import BINARY_SNIFF_BYTES
from agent2rl_tui.record.contamination.ngrams import CHUNK_BYTES, EvalIndex, ngram_hashes, normalise, token_hashes

SIZE_CAP_BYTES = 512 * 2**20
MIN_CUT_LIMIT = 2**16
MAX_ERRORS_LISTED = 20
MAX_ENTRIES = 200_000
"""Entries of the final workspace and the agent's home looked at, together, before the walk stops."""


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


def scan_stream(index: EvalIndex, read: Callable[[int], bytes], size: int, stats: ScanStats, size_cap: int,
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
