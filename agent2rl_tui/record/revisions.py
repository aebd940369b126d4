"""Code revisions: snapshots of workspace/ in a bare git repo beside it, and queries on them.

``snapshots.git`` lives in the run folder, outside the agent's reach; its work tree is the
workspace. A snapshot stages exactly the files the capture rules keep (record/capture.py),
writes a tree, and commits it only if the tree changed, with git plumbing (no hooks, no
user config, no signing). Every commit becomes a row in run.db's ``revisions`` table.

Git never reads the workspace: the capture walk reads each file once, without blocking
(capture.open_regular), and this module writes what it read as a loose blob object and
stages it by its sha (``update-index --index-info`` into an index of our own). So a file
that turns into a FIFO between the walk and the commit cannot hang git or fail the
snapshot. A walk remembers the lstat of what it read, so an unchanged file is not read
again by the next snapshot of the same process.

A snapshot has a time limit (``TIME_LIMIT_S``), and never runs past the run's deadline plus
its grace by more than ``END_FLOOR_S``: the record cannot hold a run past its end. A walk cut
short (time, or ``max_entries``) commits what it reached and carries the rest over from the
previous revision unchanged; so does a folder that cannot be listed.

Several processes take snapshots (the supervisor's watcher, the grader at each submission,
the supervisor at the end), so each snapshot holds an exclusive file lock on the repo,
waited for within the time limit. A failed snapshot raises SnapshotError; callers log it
and retry, and the run goes on.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import json
import os
import subprocess
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, overload

import git

from agent2rl_tui.record.capture import DEFAULT_RULES, GIT_REFUSES, CaptureRules, StatCache, walk
from agent2rl_tui.record.store import RunStore, previous_revision_seq
from agent2rl_tui.util.numbers import is_digits
from agent2rl_tui.util.timeutil import now

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
BRANCH = "refs/heads/main"
INDEX_FILE = "agent2rl-index"
"""The index a snapshot builds from scratch (git's own ``index`` is not used)."""
TIME_LIMIT_S = 30.0
END_FLOOR_S = 5.0
"""Past the run's deadline plus grace, a snapshot (the final one) gets this long."""
DIFF_CAP_BYTES = 8 * 2**20
RECOVERY_DIFF_S = 30.0
"""How long recording a commit that reached git but not run.db may spend on its renames and counts."""


class SnapshotError(RuntimeError):
    """A snapshot could not be taken (disk full, git failure); the run goes on."""


class RevisionNotFound(LookupError):
    pass


@dataclass(frozen=True)
class Revision:
    seq: int
    sha: str
    at: float
    trigger: str
    files_changed: int
    added: int
    removed: int
    paths: list[dict[str, Any]]
    ignored: dict[str, int]
    too_big: list[dict[str, Any]]
    """Files this snapshot left out for their size: path, size, sha256 (None for a file too big to hash)."""

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Revision:
        return cls(
            seq=row["seq"], sha=row["sha"], at=row["at"], trigger=row["trigger"],
            files_changed=row["files_changed"], added=row["added"], removed=row["removed"],
            paths=json.loads(row["paths_json"]), ignored=json.loads(row["ignored_json"]),
            too_big=json.loads(row.get("too_big_json") or "[]"),
        )


class GitRepo:
    """Plumbing on snapshots.git through GitPython, isolated from user and system config."""

    def __init__(self, git_dir: Path, work_tree: Path | None = None) -> None:
        self.git_dir = Path(git_dir).absolute()  # git runs in it: a relative path would not resolve
        self.work_tree = work_tree
        self.cmd = git.Git(str(git_dir))
        self.env = {
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_AUTHOR_NAME": "agent2rl-tui",
            "GIT_AUTHOR_EMAIL": "snapshots@agent2rl-tui",
            "GIT_COMMITTER_NAME": "agent2rl-tui",
            "GIT_COMMITTER_EMAIL": "snapshots@agent2rl-tui",
            "GIT_TERMINAL_PROMPT": "0",
        }

    @overload
    def run(self, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None,
            binary: Literal[False] = False, stderr: bool = False, timeout: float | None = None) -> str: ...

    @overload
    def run(self, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None,
            binary: Literal[True], stderr: bool = False, timeout: float | None = None) -> bytes: ...

    def run(self, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None,
            binary: bool = False, stderr: bool = False, timeout: float | None = None) -> str | bytes:
        """git's output (str, or bytes if ``binary``); with ``stderr``, what it said there instead.

        Past ``timeout`` seconds git is killed and SnapshotError says "Timeout".
        """
        argv = ["git", f"--git-dir={self.git_dir}"]
        if self.work_tree is not None:
            argv.append(f"--work-tree={self.work_tree}")
        argv += list(args)
        full_env = {**self.env, **(env or {})}
        kw: dict[str, Any] = {"env": full_env, "stdout_as_string": not binary, "strip_newline_in_stdout": not binary,
                              "with_extended_output": stderr, "kill_after_timeout": timeout}
        try:
            if stdin is None:
                out = self.cmd.execute(argv, **kw)
            else:
                with tempfile.TemporaryFile() as fh:
                    fh.write(stdin)
                    fh.seek(0)
                    out = self.cmd.execute(argv, istream=fh, **kw)
            result: str | bytes = out[2] if stderr else out  # GitPython's execute returns a tuple with_extended_output
            return result
        except git.GitCommandError as exc:
            raise SnapshotError(f"git {args[0]} failed: {exc.stderr.strip() or exc}") from exc

    def capped(self, cap: int, *args: str) -> tuple[bytes, bool]:
        """git's output up to the last whole line within ``cap`` bytes, and whether it went on."""
        argv = ["git", f"--git-dir={self.git_dir}", *args]
        with tempfile.TemporaryFile() as err, subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                env={**os.environ, **self.env}) as proc:
            assert proc.stdout is not None
            data = proc.stdout.read(cap + 1)
            cut = len(data) > cap
            if cut:
                proc.kill()
                data = data[:data.rfind(b"\n", 0, cap) + 1]
            proc.stdout.close()
            if proc.wait() != 0 and not cut:
                err.seek(0)
                raise SnapshotError(f"git {args[0]} failed: {err.read().decode(errors='replace').strip()}")
        return data, cut

    def head(self) -> str | None:
        try:
            return self.run("rev-parse", "--verify", "--quiet", BRANCH) or None
        except SnapshotError:
            return None


def _nul_list(paths: list[str]) -> bytes:
    return b"".join(os.fsencode(p) + b"\0" for p in paths)


def init_repo(git_dir: Path) -> None:
    if (git_dir / "HEAD").exists():
        return
    # sha1 whatever the user's init.defaultObjectFormat: blobs are named here (Snapshotter._write_blob)
    git.Repo.init(str(git_dir), bare=True, initial_branch="main", object_format="sha1").close()


def _parse_changes(repo: GitRepo, parent: str, sha: str, timeout: float | None = None) -> list[dict[str, Any]]:
    """Per-path status and line counts between two commits (renames detected).

    Rename detection compares every deleted file with every added one, and counting lines diffs
    every changed file: past ``timeout`` seconds each gives up (the changes listed without renames,
    the counts left at 0), so a revision of thousands of big files cannot hold a snapshot.
    """
    try:
        status_out = repo.run("diff-tree", "-r", "-M", "-z", "--no-commit-id", "--name-status", parent, sha,
                              timeout=timeout)
    except SnapshotError as exc:
        if "Timeout" not in str(exc):
            raise
        status_out = repo.run("diff-tree", "-r", "-z", "--no-commit-id", "--name-status", parent, sha)
    fields = [f for f in status_out.split("\0") if f != ""] if status_out else []
    changes: list[dict[str, Any]] = []
    i = 0
    while i < len(fields):
        code = fields[i]
        if code[0] in "RC":
            changes.append({"status": code[0], "old_path": fields[i + 1], "path": fields[i + 2]})
            i += 3
        else:
            changes.append({"status": code[0], "path": fields[i + 1]})
            i += 2
    try:
        num_out = repo.run("diff-tree", "-r", "-M", "-z", "--no-commit-id", "--numstat", parent, sha,
                           timeout=timeout)
    except SnapshotError as exc:
        if "Timeout" not in str(exc):
            raise
        num_out = ""
    counts: dict[str, tuple[int, int]] = {}
    parts = num_out.split("\0") if num_out else []
    i = 0
    while i < len(parts):
        head = parts[i]
        if not head:
            i += 1
            continue
        added, removed, path = head.split("\t", 2)
        if path == "":  # a rename: the old and new paths follow as their own fields
            path = parts[i + 2]
            i += 3
        else:
            i += 1
        counts[path] = (int(added) if added != "-" else 0, int(removed) if removed != "-" else 0)
    for change in changes:
        change["added"], change["removed"] = counts.get(change["path"], (0, 0))
    return changes


def _tree_entries(repo: GitRepo, commit: str) -> Iterator[tuple[int, str, str]]:
    """(mode, sha, path) of every file and link in a commit's tree."""
    out: bytes = repo.run("ls-tree", "-r", "-z", "--full-tree", commit, binary=True)
    for record in out.split(b"\0"):
        if record:
            meta, path = record.split(b"\t", 1)
            mode, _kind, sha = meta.split(b" ")
            yield int(mode, 8), sha.decode(), os.fsdecode(path)


class SnapshotCancelled(SnapshotError):
    """The snapshot was asked to stop (its watcher is stopping); nothing was committed."""


class Snapshotter:
    """Takes snapshots of one run's workspace into its snapshots.git."""

    def __init__(self, run_dir: Path, rules: CaptureRules = DEFAULT_RULES, *,
                 time_limit_s: float = TIME_LIMIT_S, redact: Callable[[bytes], bytes] | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.redact = redact  # the run's secrets out of every blob before it is written
        self.git_dir = self.run_dir / "snapshots.git"
        self.workspace = self.run_dir / "workspace"
        self.rules = rules
        self.time_limit_s = time_limit_s
        self._thread_lock = threading.Lock()
        self._cache: StatCache = {}
        self._tmp_names = itertools.count()
        self._folders: set[str] = set()  # objects/xx folders known to exist

    @contextmanager
    def _locked(self, ends: float) -> Iterator[None]:
        """Both locks (this process's threads, other processes), waited for until ``ends``."""
        if not self._thread_lock.acquire(timeout=max(0.0, ends - time.monotonic())):
            raise SnapshotError("another snapshot of this run is still running")
        try:
            self.git_dir.mkdir(parents=True, exist_ok=True)
            with open(self.git_dir / "agent2rl-snapshot.lock", "w") as fh:
                while True:
                    try:
                        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() >= ends:
                            raise SnapshotError("another process's snapshot of this run is still running") from None
                        time.sleep(0.02)
                try:
                    yield
                finally:
                    fcntl.flock(fh, fcntl.LOCK_UN)
        finally:
            self._thread_lock.release()

    def _ends(self, store: RunStore, time_limit_s: float | None) -> float:
        """When (monotonic) this snapshot must be done: its limit, and never long past the run's end."""
        limit = self.time_limit_s if time_limit_s is None else time_limit_s
        deadline, grace_s = store.deadline()
        if deadline is not None:
            limit = min(limit, max(END_FLOOR_S, deadline + grace_s - now()))
        return time.monotonic() + limit

    def snapshot(self, trigger: str, *, cancel: threading.Event | None = None,
                 time_limit_s: float | None = None) -> tuple[Revision, bool]:
        """Commit the workspace if it changed; the head revision and whether it is new.

        ``cancel`` set while it runs stops it without a commit (SnapshotCancelled).
        """
        try:
            with RunStore.of_run(self.run_dir) as store:
                ends = self._ends(store, time_limit_s)
                with self._locked(ends):
                    return self._snapshot(store, trigger, ends, cancel)
        except SnapshotError:
            self._cache.clear()
            raise
        except Exception as exc:  # noqa: BLE001 - sqlite (locked, disk full), git, OS: retried later
            self._cache.clear()  # what it remembers may name blobs that were never written
            raise SnapshotError(f"{type(exc).__name__}: {exc}") from exc

    def _snapshot(self, store: RunStore, trigger: str, ends: float,
                  cancel: threading.Event | None) -> tuple[Revision, bool]:
        init_repo(self.git_dir)
        for stale in (self.git_dir / "index.lock", self.git_dir / f"{INDEX_FILE}.lock",
                      self.git_dir / "HEAD.lock", self.git_dir / f"{BRANCH}.lock"):
            if stale.exists():  # we hold the only lock that runs git here: it is a leftover
                stale.unlink()
                store.event("snapshots", "stale_lock", f"removed a stale snapshots.git/{stale.name}")
        repo = GitRepo(self.git_dir)  # no work tree: git never reads the workspace
        self._record_unrecorded(repo, store)

        def expired() -> bool:
            return (cancel is not None and cancel.is_set()) or time.monotonic() >= ends

        result = walk(self.workspace, self.rules, store=self._write_blob, cache=self._cache, expired=expired)
        if cancel is not None and cancel.is_set():
            raise SnapshotCancelled("the snapshot was stopped")
        head = repo.head()
        entries = dict(result.captured)
        if result.unseen_dirs and head is not None:  # what it could not see stays as it was
            for mode, sha, path in _tree_entries(repo, head):
                if path not in entries and result.unseen(path):
                    entries[path] = (mode, sha)
        index = {"GIT_INDEX_FILE": str(repo.git_dir / INDEX_FILE)}
        (self.git_dir / INDEX_FILE).unlink(missing_ok=True)
        lines = b"".join(b"%o %s\t%s\0" % (mode, sha.encode(), os.fsencode(path))
                         for path, (mode, sha) in sorted(entries.items()))
        refused = repo.run("update-index", "-z", "--index-info", stdin=lines, env=index, stderr=True)
        for line in refused.splitlines():
            if line.startswith("Ignoring path "):  # .git, and names git keeps out on other systems
                result.leave_out(GIT_REFUSES, line.removeprefix("Ignoring path "))
        tree = repo.run("write-tree", env=index)
        if head is not None:
            head_tree = repo.run("rev-parse", f"{head}^{{tree}}")
            if head_tree == tree:
                row = store.conn.execute("SELECT * FROM revisions WHERE sha = ?", (head,)).fetchone()
                if row is not None:
                    return Revision.from_row(dict(row)), False
        at = now()
        stamp = f"{int(at)} +0000"
        args = ["commit-tree", tree, "--no-gpg-sign", "-m", f"{trigger} snapshot"]
        if head:
            args[2:2] = ["-p", head]
        sha = repo.run(*args, env={"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp})
        repo.run("update-ref", BRANCH, sha, *([head] if head else []))
        changes = _parse_changes(repo, head or EMPTY_TREE, sha, timeout=max(END_FLOOR_S, ends - time.monotonic()))
        too_big = [tb.record(path) for path, tb in sorted(result.too_big.items())]
        return _insert_revision(store, sha, at, trigger, changes, dict(result.ignored), too_big), True

    def _write_blob(self, data: bytes) -> str:
        """Store bytes as a loose blob object (git's own format) and give back its sha."""
        if self.redact is not None:
            data = self.redact(data)
        header = b"blob %d\0" % len(data)
        digest = hashlib.sha1(header)  # noqa: S324 - git's object name, not security
        digest.update(data)
        sha = digest.hexdigest()
        folder = f"{self.git_dir}/objects/{sha[:2]}"
        path = f"{folder}/{sha[2:]}"
        if os.path.exists(path):
            return sha
        if folder not in self._folders:
            os.makedirs(folder, exist_ok=True)
            self._folders.add(folder)
        tmp = f"{folder}/tmp_obj_{os.getpid()}_{threading.get_ident()}_{next(self._tmp_names)}"
        packer = zlib.compressobj(1)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(packer.compress(header))
                fh.write(packer.compress(data))
                fh.write(packer.flush())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return sha

    def _record_unrecorded(self, repo: GitRepo, store: RunStore) -> None:
        """Rows for commits that reached git but not run.db (the database refused the write).

        Without them the changes of such a commit would be in no revision: the next one is
        diffed against it.
        """
        head = repo.head()
        if head is None:
            return
        if store.conn.execute("SELECT 1 FROM revisions WHERE sha = ?", (head,)).fetchone():
            return
        known = {r[0] for r in store.conn.execute("SELECT sha FROM revisions")}
        for line in repo.run("rev-list", "--reverse", "--format=%H%x1f%P%x1f%ct%x1f%s", "--no-commit-header",
                             BRANCH).splitlines():
            sha, parents, committed, subject = line.split("\x1f", 3)
            if sha in known:
                continue
            parent = parents.split(" ")[0] if parents else EMPTY_TREE
            at, trigger = float(committed), subject.split(" ")[0]
            rev = _insert_revision(store, sha, at, trigger, _parse_changes(repo, parent, sha, RECOVERY_DIFF_S), {})
            store.event("snapshots", "recovered", f"recorded revision {rev.seq} ({sha[:10]}), committed before "
                        "the database could take it")


def _insert_revision(store: RunStore, sha: str, at: float, trigger: str, changes: list[dict[str, Any]],
                     ignored: dict[str, int], too_big: list[dict[str, Any]] | None = None) -> Revision:
    """The revisions row of a commit, numbered next in one transaction."""
    added, removed = sum(c["added"] for c in changes), sum(c["removed"] for c in changes)
    with store.transaction() as conn:
        seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM revisions").fetchone()[0]
        conn.execute(
            "INSERT INTO revisions (seq, sha, at, trigger, files_changed, added, removed, paths_json,"
            " ignored_json, too_big_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (seq, sha, at, trigger, len(changes), added, removed, json.dumps(changes), json.dumps(ignored),
             json.dumps(too_big or [])),
        )
    return Revision(seq, sha, at, trigger, len(changes), added, removed, changes, ignored, too_big or [])


# -- queries (used by the CLI and the TUI) -------------------------------------------------

def list_revisions(run_dir: Path) -> list[Revision]:
    with RunStore.of_run(run_dir) as store:
        rows = store.conn.execute("SELECT * FROM revisions ORDER BY seq").fetchall()
    return [Revision.from_row(dict(r)) for r in rows]


def get_revision(run_dir: Path, ref: str | int) -> Revision:
    """A revision by its number (``3``), or by a prefix of its sha (at least 4 characters)."""
    with RunStore.of_run(run_dir) as store:
        text = str(ref)
        if is_digits(text) and len(text) < 7:
            row = store.conn.execute("SELECT * FROM revisions WHERE seq = ?", (int(text),)).fetchone()
        elif len(text) >= 4:
            rows = store.conn.execute("SELECT * FROM revisions WHERE sha LIKE ?", (text + "%",)).fetchall()
            if len(rows) > 1:
                raise RevisionNotFound(f"{text!r} matches {len(rows)} revisions; give more of the sha")
            row = rows[0] if rows else None
        else:
            row = None
    if row is None:
        raise RevisionNotFound(f"no revision {ref!r} in {run_dir.name}; `agent2rl-tui run revisions` lists them")
    return Revision.from_row(dict(row))


def diff(run_dir: Path, old: Revision | None, new: Revision, context: int = 3) -> str:
    """Unified diff from ``old`` (None: the empty tree) to ``new``, renames detected.

    A revision may change thousands of files of up to a megabyte each: the text is cut at a
    line after ``DIFF_CAP_BYTES``, and a last line (``\\ [...]``, shown as a note) says so.
    """
    repo = GitRepo(Path(run_dir) / "snapshots.git")
    data, cut = repo.capped(DIFF_CAP_BYTES, "diff", "--no-color", "--no-ext-diff", "-M", f"-U{context}",
                            old.sha if old else EMPTY_TREE, new.sha)
    text = data.decode("utf-8", "surrogateescape")
    if cut:
        text += (f"\\ [the diff goes on past {DIFF_CAP_BYTES:,} bytes and is cut here; "
                 "`agent2rl-tui run cat` shows any file of the revision whole]")
    return text.removesuffix("\n")


def file_at(run_dir: Path, rev: Revision, path: str) -> bytes:
    repo = GitRepo(Path(run_dir) / "snapshots.git")
    try:
        return repo.run("cat-file", "blob", f"{rev.sha}:{path}", binary=True)
    except SnapshotError as exc:
        raise RevisionNotFound(f"{path} is not in revision {rev.seq}") from exc


def files_at(run_dir: Path, rev: Revision) -> list[str]:
    repo = GitRepo(Path(run_dir) / "snapshots.git")
    out = repo.run("ls-tree", "-r", "-z", "--name-only", rev.sha)
    return [p for p in out.split("\0") if p]


def submission_revisions(run_dir: Path, sub_id: int) -> tuple[Revision | None, Revision]:
    """The revision a submission was made from, and that of the agent submission before it."""
    with RunStore.of_run(run_dir) as store:
        sub = store.submission(sub_id)
        if sub is None:
            raise RevisionNotFound(f"no submission {sub_id}")
        if sub.revision_seq is None:
            raise RevisionNotFound(f"submission {sub_id} has no recorded revision")
        prev = previous_revision_seq(store.submissions(kind="agent"), sub_id)
    new = get_revision(run_dir, sub.revision_seq)
    old = get_revision(run_dir, prev) if prev is not None else None
    return old, new
