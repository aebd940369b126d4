"""What a code revision captures: the agent's work, not its models, data or caches.

The rules live here and only here; the watcher, the snapshotter, the report and the TUI all
read them. A path is left out for a named reason, and the left-out paths are counted per
reason, so nothing disappears from the record silently.

The workspace is the agent's, so reading it is reading hostile data. The walk here is the
only reader of the workspace a snapshot has (git never reads it: the snapshotter writes the
blobs from what this walk read), and it never stalls or blows up:

- only regular files and symbolic links are captured; a link is captured as a link (its
  target), never followed. FIFOs, sockets and devices are left out by their kind.
- a file is opened with ``O_NONBLOCK | O_NOFOLLOW`` and checked with ``fstat`` on the open
  descriptor, so a file swapped for a FIFO or a link after it was listed is never waited on
  or followed; at most ``size_cap_bytes + 1`` bytes are read, however fast it grows.
- a file or folder that cannot be read is left out as ``unreadable``; nothing is fatal.
- a file left out for its size is named in the record with its size and its sha256 (``TooBig``;
  the hash of a file up to ``HASH_CAP_BYTES``, read as above, and remembered while its lstat
  holds), so code too big to keep is still known by name and content.
- a walk looks at no more than ``max_entries`` entries (millions of tiny files cost a bounded
  walk and bounded memory), and stops when its caller's time is up; a walk cut short says so
  (``complete`` is False, and a reason counts it).
"""

from __future__ import annotations

import errno
import fnmatch
import functools
import hashlib
import itertools
import os
import re
import stat
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

# Top-level workspace folders that hold artifacts, not work.
TOP_LEVEL_IGNORED = ("output", "data", "models")
# Folder names ignored at any depth.
IGNORED_DIR_NAMES = (
    "__pycache__", ".git", ".hg", ".svn", ".venv", ".conda", "node_modules",
    "wandb", "mlruns", "lightning_logs", ".cache", ".mypy_cache", ".pytest_cache", ".ruff_cache",
    ".ipynb_checkpoints", "checkpoints", "site-packages",
)
IGNORED_DIR_GLOBS = ("checkpoint-*", "*.egg-info", ".*-trainer")
# Files ignored by name, at any depth: weights, arrays, archives, compiled code.
IGNORED_FILE_GLOBS = (
    "*.safetensors", "*.bin", "*.pt", "*.pth", "*.ckpt", "*.gguf", "*.onnx", "*.npy", "*.npz",
    "*.pkl", "*.pickle", "*.arrow", "*.parquet", "*.h5", "*.pyc", "*.pyo", "*.so", "*.o", "*.a",
    "*.zip", "*.tar", "*.gz", "*.tgz", "*.bz2", "*.xz", "*.7z", "*.whl", "*.db", "*.sqlite",
    "events.out.tfevents.*", "*.swp", "*~", ".env",  # .env: API keys stay out of the record
)
SIZE_CAP_BYTES = 1_000_000
BINARY_SNIFF_BYTES = 8192
MAX_ENTRIES = 50_000
HASH_CAP_BYTES = 256 * 1024 * 1024
"""A file over the size cap is hashed whole up to this size; a bigger one is named with its size only."""
HASH_BUDGET_BYTES = 1024 * 1024 * 1024
"""What one walk reads to hash files over the size cap; past it they are named with their size only."""
MAX_TOO_BIG = 200
"""Files over the size cap named per snapshot (the rest are counted)."""
"""Entries (files, folders, links) one walk looks at; a bigger workspace is captured in part."""

UNREADABLE = "unreadable"
CUT_SHORT_TIME = "not looked at: the snapshot's time ran out"
GIT_REFUSES = "a name git refuses"
LINK_MODE, FILE_MODE, EXEC_MODE = 0o120000, 0o100644, 0o100755
RACY_NS = 1_000_000_000
"""A file changed this recently when it was read may change again within the same timestamp
tick: its read is not remembered (git's "racily clean" rule)."""


def special_reason(mode: int) -> str:
    """The reason a path that is neither a regular file, a folder nor a link is left out."""
    kind = ("fifo" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode)
            else "device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "other")
    return f"not a regular file ({kind})"


class NotRegular(OSError):
    """The path is not a regular file (any more): a FIFO, a socket, a device, a folder."""

    def __init__(self, path: str, mode: int) -> None:
        super().__init__(errno.EINVAL, special_reason(mode), path)
        self.reason = special_reason(mode)


@contextmanager
def open_regular(path: str | os.PathLike[str], *, dir_fd: int | None = None) -> Iterator[
        tuple[BinaryIO, os.stat_result]]:
    """A regular file opened for reading, and its stat; never blocks, never follows a link.

    ``O_NONBLOCK`` makes opening a FIFO return at once (a regular file ignores it), and
    ``O_NOFOLLOW`` refuses a link (ELOOP); what was opened is then checked on the descriptor
    itself, so a path swapped between a listing and this open is caught here. Raises
    ``NotRegular`` for anything but a regular file, OSError when it cannot be opened.
    ``dir_fd``: ``path`` is a name in that open folder (which cannot be swapped meanwhile).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):  # a socket, a device without a driver
            st = os.lstat(path, dir_fd=dir_fd)
            if not stat.S_ISREG(st.st_mode):
                raise NotRegular(os.fsdecode(path), st.st_mode) from exc
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(os.fsdecode(path), st.st_mode)
        fh = os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise
    with fh:
        yield fh, st


def read_capped(fh: BinaryIO, cap: int) -> bytes:
    """At most ``cap + 1`` bytes of an open file: enough to tell it is over ``cap``."""
    parts, size = [], 0
    while size <= cap:
        data = fh.read(cap + 1 - size)
        if not data:
            break
        parts.append(data)
        size += len(data)
    return b"".join(parts)


@functools.cache
def _any_glob(globs: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(fnmatch.translate(g) for g in globs) or "(?!)")


@dataclass(frozen=True)
class CaptureRules:
    top_level_ignored: tuple[str, ...] = TOP_LEVEL_IGNORED
    ignored_dir_names: tuple[str, ...] = IGNORED_DIR_NAMES
    ignored_dir_globs: tuple[str, ...] = IGNORED_DIR_GLOBS
    ignored_file_globs: tuple[str, ...] = IGNORED_FILE_GLOBS
    size_cap_bytes: int = SIZE_CAP_BYTES
    max_entries: int = MAX_ENTRIES

    def describe(self) -> list[str]:
        """The rules in words, for the TUI and the report."""
        return [
            "captured: every other file under workspace/ (code, scripts, configs, notes); links as links",
            f"not captured: the top-level folders {', '.join(f'{d}/' for d in self.top_level_ignored)}",
            f"not captured: folders named {', '.join(self.ignored_dir_names)} or matching "
            f"{', '.join(self.ignored_dir_globs)}, and any virtualenv or conda env (pyvenv.cfg, conda-meta/)",
            f"not captured: files matching {', '.join(self.ignored_file_globs)}",
            f"not captured: files over {self.size_cap_bytes:,} bytes, and binary files (a NUL byte in the first "
            f"{BINARY_SNIFF_BYTES} bytes)",
            "not captured: FIFOs, sockets and devices, and files or folders that cannot be read (counted)",
            f"a snapshot looks at {self.max_entries:,} entries at most and has a time limit; one cut short "
            "adds and changes what it reached and drops nothing",
        ]

    @property
    def cut_short_entries(self) -> str:
        return f"not looked at: over {self.max_entries:,} entries"

    def dir_reason(self, rel: str, abs_path: str | None = None) -> str | None:
        """Why a folder (workspace-relative, '/'-separated) is left out, or None."""
        parts = rel.split("/")
        if len(parts) == 1 and parts[0] in self.top_level_ignored:
            return f"{parts[0]}/"
        name = parts[-1]
        if name in self.ignored_dir_names:
            return f"{name}/"
        for pattern in self.ignored_dir_globs:
            if fnmatch.fnmatch(name, pattern):
                return f"{pattern}/"
        if abs_path is not None and (
            os.path.exists(os.path.join(abs_path, "pyvenv.cfg"))
            or os.path.isdir(os.path.join(abs_path, "conda-meta"))
        ):
            return "virtualenv/"
        return None

    def path_reason(self, rel: str) -> str | None:
        """Why a path is left out judging by its name alone (used to filter watch events)."""
        parts = rel.split("/")
        for i in range(1, len(parts)):
            reason = self.dir_reason("/".join(parts[:i]))
            if reason:
                return reason
        return self.name_reason(parts[-1])

    def name_reason(self, name: str) -> str | None:
        """Why a file is left out by its name, or None."""
        if not _any_glob(self.ignored_file_globs).match(name):  # one regex for the common case
            return None
        return next((p for p in self.ignored_file_globs if fnmatch.fnmatchcase(name, p)), None)

    def content_reason(self, data: bytes) -> str | None:
        """Why a file with these bytes (at most size_cap + 1 of them) is left out, or None."""
        if len(data) > self.size_cap_bytes:
            return f"over {self.size_cap_bytes:,} bytes"
        if b"\0" in data[:BINARY_SNIFF_BYTES]:
            return "binary"
        return None


DEFAULT_RULES = CaptureRules()

Captured = tuple[int, str]
"""A captured path's git mode and blob sha."""


@dataclass(frozen=True)
class TooBig:
    """A file left out for its size, as the record names it: its size and sha256 (None over ``HASH_CAP_BYTES``)."""

    size: int
    sha256: str | None

    def record(self, path: str) -> dict[str, object]:
        return {"path": path, "size": self.size, "sha256": self.sha256}


StatKey = tuple[int, int, int, int, int, int]
StatCache = dict[str, tuple[StatKey, "Captured | str | TooBig"]]
"""What a walk remembers between snapshots: path -> (its lstat then, captured or a reason)."""


@dataclass
class WalkResult:
    files: list[str] = field(default_factory=list)  # workspace-relative, '/'-separated, sorted
    ignored: Counter[str] = field(default_factory=Counter)  # reason -> count of paths left out
    examples: dict[str, list[str]] = field(default_factory=dict)  # reason -> a few paths
    captured: dict[str, Captured] = field(default_factory=dict)  # path -> (mode, sha) when blobs are stored
    too_big: dict[str, TooBig] = field(default_factory=dict)  # files left out for their size (MAX_TOO_BIG)
    hashed_bytes: int = 0  # read to hash them (HASH_BUDGET_BYTES)
    complete: bool = True  # False: cut short (entries or time)
    looked_at: set[str] = field(default_factory=set)  # files, and left-out folders as "x/"
    unseen_dirs: set[str] = field(default_factory=set)  # folders ("" the root, "a/b/") not (wholly) listed

    def leave_out(self, reason: str, rel: str) -> None:
        self.ignored[reason] += 1
        ex = self.examples.setdefault(reason, [])
        if len(ex) < 3:
            ex.append(rel)

    def unseen(self, path: str) -> bool:
        """Whether this walk cannot tell what became of ``path`` (a file of an earlier walk):
        it lies in a folder that could not be listed, or that a walk cut short did not reach."""
        if not self.unseen_dirs or path in self.looked_at:
            return False
        parts = path.split("/")
        ancestors = ["/".join(parts[:i]) + "/" if i else "" for i in range(len(parts))]
        return (any(a in self.unseen_dirs for a in ancestors)
                and not any(a in self.looked_at for a in ancestors[1:]))


def _stat_key(st: os.stat_result) -> StatKey:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


def walk(root: Path, rules: CaptureRules = DEFAULT_RULES, *, store: Callable[[bytes], str] | None = None,
         cache: StatCache | None = None, expired: Callable[[], bool] | None = None) -> WalkResult:
    """The files a snapshot of ``root`` captures, and what it leaves out (counted by reason).

    Ignored folders are not descended into, so a virtualenv or a checkpoint folder costs
    one entry, not a walk. With ``store``, each captured file's bytes (a link's target) are
    given to it and ``captured`` maps the path to (git mode, what ``store`` returned); with
    ``cache`` too, a file whose lstat has not changed since a walk read it is not read again.
    ``expired`` is asked between entries: when it says yes the walk stops, cut short.
    """
    out = WalkResult()
    seen: StatCache = {}
    started_ns = time.time_ns()
    left = rules.max_entries
    stack = [("", str(root))]
    while stack:
        rel_dir, abs_dir = stack.pop()
        prefix = f"{rel_dir}/" if rel_dir else ""
        try:
            with os.scandir(abs_dir) as it:
                entries = sorted(itertools.islice(it, left + 1), key=lambda e: e.name)
        except OSError:
            out.leave_out(UNREADABLE, prefix or "./")
            out.unseen_dirs.add(prefix)
            continue
        subdirs: list[tuple[str, str]] = []
        for entry in entries:
            cut = (rules.cut_short_entries if left <= 0
                   else CUT_SHORT_TIME if expired is not None and expired() else None)
            if cut:
                out.complete = False
                out.leave_out(cut, prefix or "./")
                out.unseen_dirs.update([prefix, *(f"{r}/" for r, _ in stack)])
                stack.clear()
                subdirs.clear()
                break
            left -= 1
            rel = prefix + entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # vanished while we looked
            if stat.S_ISDIR(st.st_mode):
                reason = rules.dir_reason(rel, entry.path)
                if reason:
                    out.leave_out(reason, rel + "/")
                    out.looked_at.add(rel + "/")
                else:
                    subdirs.append((rel, entry.path))
                continue
            out.looked_at.add(rel)
            _visit_file(out, rules, rel, entry.path, st, store, cache, seen, started_ns)
        stack.extend(reversed(subdirs))
    out.files.sort()
    if cache is not None:  # forget paths gone since (a walk that did not see all keeps the rest a while)
        if not out.unseen_dirs or len(cache) >= 2 * rules.max_entries:
            cache.clear()
        cache.update(seen)
    return out


def _visit_file(out: WalkResult, rules: CaptureRules, rel: str, path: str, st: os.stat_result,
                store: Callable[[bytes], str] | None, cache: StatCache | None, seen: StatCache,
                started_ns: int) -> None:
    """Capture one entry that is not a folder, or count why not."""
    if stat.S_ISLNK(st.st_mode):
        if store is None:
            out.files.append(rel)
            return
        try:
            target = os.readlink(os.fsencode(path))
        except OSError:
            return  # replaced since it was listed: the next snapshot sees what it became
        out.files.append(rel)
        out.captured[rel] = (LINK_MODE, store(target))
        return
    if not stat.S_ISREG(st.st_mode):
        out.leave_out(special_reason(st.st_mode), rel)
        return
    reason = rules.name_reason(rel.rsplit("/", 1)[-1])
    if reason:
        out.leave_out(reason, rel)
        return
    key = _stat_key(st)
    known = cache.get(rel) if cache is not None and store is not None else None
    if known is not None and known[0] == key:
        verdict = known[1]
        seen[rel] = known
    else:
        if st.st_size > rules.size_cap_bytes:
            read: Captured | str | TooBig | None = _too_big(path, st, HASH_BUDGET_BYTES - out.hashed_bytes)
            out.hashed_bytes += read.size if isinstance(read, TooBig) and read.sha256 else 0
        else:
            read = _read_file(rules, path, store)
        if read is None:
            return
        verdict = read
        unhashed = isinstance(read, TooBig) and read.sha256 is None and read.size <= HASH_CAP_BYTES  # budget spent
        if cache is not None and store is not None and st.st_ctime_ns < started_ns - RACY_NS and not unhashed:
            seen[rel] = (key, verdict)
    if isinstance(verdict, TooBig):
        out.leave_out(f"over {rules.size_cap_bytes:,} bytes", rel)
        if len(out.too_big) < MAX_TOO_BIG:
            out.too_big[rel] = verdict
    elif isinstance(verdict, str):
        out.leave_out(verdict, rel)
    else:
        out.files.append(rel)
        if store is not None:
            out.captured[rel] = verdict


def _too_big(path: str, listed: os.stat_result, budget: int) -> TooBig | None:
    """A file over the size cap: its size, and its sha256 if it is at most ``HASH_CAP_BYTES`` and the
    walk's ``budget`` (read as every file here is, never waiting on it or following it); None if it
    vanished meanwhile."""
    size = listed.st_size
    if size > min(HASH_CAP_BYTES, budget):
        return TooBig(size, None)
    digest = hashlib.sha256()
    try:
        with open_regular(path) as (fh, _):
            read = 0
            while chunk := fh.read(min(1 << 20, HASH_CAP_BYTES + 1 - read)):
                digest.update(chunk)
                read += len(chunk)
                if read > HASH_CAP_BYTES:
                    return TooBig(read, None)
    except (NotRegular, OSError):
        return None  # replaced or gone since it was listed: the next snapshot sees what it became
    return TooBig(read, digest.hexdigest())


def _read_file(rules: CaptureRules, path: str, store: Callable[[bytes], str] | None) -> Captured | str | None:
    """(mode, blob) of a regular file, or why it is left out; None if it vanished meanwhile."""
    try:
        with open_regular(path) as (fh, st):
            data = read_capped(fh, rules.size_cap_bytes)
    except NotRegular as exc:
        return exc.reason
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # swapped for a link since it was listed
            return None
        return UNREADABLE
    reason = rules.content_reason(data)
    if reason:
        return reason
    mode = EXEC_MODE if st.st_mode & stat.S_IXUSR else FILE_MODE
    return mode, store(data) if store is not None else ""
