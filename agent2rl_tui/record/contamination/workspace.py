"""The final workspace and the agent's home: what no revision holds, read as hostile data.

Revisions capture code only, so what the agent left at the end is scanned too: the files in
``workspace/`` that no revision holds (``output/``, files over the capture size cap, ...)
and the contained agent's own home (``agent-home/``, reported as ``~/...``), where a
download or a stash lands. A file whose bytes were already scanned (a revision's blob, an
identical file) takes that result without being read again.

Not scanned: ``workspace/models/`` and ``workspace/data/`` (the base model and the train
split are ours), installed-package folders (virtualenvs, ``site-packages``,
``node_modules``, ``.git``), weight files by name; binary files and files over the size cap
are skipped by scanner.py. Each is counted under ``skipped``.

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
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from agent2rl_tui.record.capture import NotRegular, open_regular
from agent2rl_tui.record.contamination.ngrams import CHUNK_BYTES, EvalIndex
from agent2rl_tui.record.contamination.scanner import ScanStats, Seen, scan_stream
from agent2rl_tui.record.sessions import AGENT_HOME as AGENT_HOME  # the contained agent's $HOME: scanned too

NOT_SCANNED_TOP = ("models", "data")
PACKAGE_DIR_NAMES = ("site-packages", "dist-packages", "node_modules", "__pycache__", ".git")
WEIGHT_SUFFIXES = (
    ".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".npy", ".npz", ".pkl", ".pickle",
    ".onnx", ".h5", ".msgpack", ".pyc", ".so",
)


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


def _git_sha(size: int) -> hashlib._Hash:
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
            items = scan_stream(index, fh.read, size, stats, size_cap, on_data=digest.update)
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
