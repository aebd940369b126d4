"""The history: every distinct blob of every revision in snapshots.git, read once.

A file the agent wrote and deleted before the end is still in a revision, so the check reads
the snapshots as well as the final workspace. ``revision_blobs`` maps each blob to the
revisions and paths that held it in one ``git log --raw`` pass (a path that keeps its blob
over many revisions is one range, so the map grows with the changes, not with revisions
times files); ``scan_blobs`` then reads each distinct blob once through one
``git cat-file --batch``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from agent2rl_tui.record.contamination.ngrams import CHUNK_BYTES, EvalIndex
from agent2rl_tui.record.contamination.scanner import ScanStats, Seen, scan_stream
from agent2rl_tui.record.revisions import BRANCH, GitRepo, list_revisions


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
        items = scan_stream(index, read, size, stats, size_cap)
    except Exception as exc:  # noqa: BLE001 - one blob's failure is counted; the others are still read
        stats.error(f"snapshots.git:{sha}", exc)
    while left[0] > 0:  # skipped or cut short: the rest of the blob is still in the pipe
        if not read(CHUNK_BYTES):
            break
    out.read(1)  # the newline after each object
    if items is not None:
        seen.add(sha, size, items)
    return items
