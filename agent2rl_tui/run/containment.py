"""Containment: the agent's whole process tree runs in a bubblewrap sandbox.

A score means something only if the agent could not read the eval split and could not change
the record. Left alone, an agent can walk up from its workspace and read ``../evals`` (every
eval prompt with its gold answer), the data cache's eval split, other runs, the grader's
command line in /proc, or write ``../run.db`` and the grader's own code. Inside the sandbox
(docs/containment.md has the why of each line):

- ``/`` is read-only: the system, Python, the venv and agent2rl-tui itself (the grader's code
  cannot be edited);
- ``$HOME`` is a folder of the run's own (``agent-home/``, read-write, kept with the run),
  into which the CLI's configuration and login files are copied before it starts
  (:func:`prepare_home`; never its history or sessions, and the logins are removed when the
  agent ends), and only the paths the agent's tools need come back read-only: what its
  executable needs wherever it is installed (:func:`executable_paths`: the file behind each
  link, its package or install prefix, the interpreter of a script, node for the npm CLIs),
  the ``PATH`` entries under the real home (``~/.local/bin`` → its ``bin`` and ``lib``), the
  profile's ``read_only_paths``, and ``writable_paths`` read-write where a profile asks;
- the run folder, the runs root, sibling runs, every other root runs were made under on this
  machine (``record.root.known_roots``) and the data cache are empty tmpfs; the workspace is
  bound back read-write, its ``data/`` and ``models/`` read-only;
- a private /tmp (the run's ``agent-tmp/``, on disk, emptied when the agent ends), /var/tmp
  and /dev/shm; a minimal /dev with the NVIDIA devices bound in;
- a new pid namespace with its own /proc (the agent sees its own processes only), a new IPC
  namespace, every capability dropped (root inside cannot unmount what hides the record);
- the network is shared: the agent needs its LLM API and ``$GRADING_SERVER_URL``.

Signals: the supervisor's SIGTERM to the agent's process group reaches every process in it.
Bubblewrap itself is started ignoring SIGTERM (``env --ignore-signal``) and the agent's command
with its default restored (``env --default-signal``), so bubblewrap stays to report the agent's
own exit status (a signal N comes back as 128+N: :func:`exit_code` turns it into -N, as for an
uncontained agent). The SIGKILL after the grace period kills bubblewrap and the namespace's
init, which takes every process in the namespace with it, ``setsid`` ones included.

A separate uid is the other route; it needs root to create and switch users, and the files an
agent writes would belong to that user. Bubblewrap needs neither (unprivileged user
namespaces), so it is the default; :func:`probe` says why containment is unavailable where
it is.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import agent2rl_tui
from agent2rl_tui.record.sessions import AGENT_HOME as AGENT_HOME  # the agent's $HOME

BWRAP = "bwrap"
INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: `sudo apt install bubblewrap`; Fedora: "
                "`sudo dnf install bubblewrap`), or start the run with --no-contain")
AGENT_TMP = "agent-tmp"
"""The agent's /tmp: on disk (a tmpfs would hold big temporary files in memory), emptied when
the agent ends."""

NVIDIA_DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/dri")


@dataclass
class Containment:
    """How the agent of one run is (or is not) contained; recorded as an event of the run."""

    contained: bool
    reason: str
    """Why not, when not contained; what contains it, when it is."""
    requested: bool = True
    hidden: list[str] = field(default_factory=list)
    writable: list[str] = field(default_factory=list)
    read_only: list[str] = field(default_factory=list)
    prefix: list[str] = field(default_factory=list)
    """The sandbox command the agent's argv is appended to (empty when not contained)."""

    def wrap(self, argv: list[str]) -> list[str]:
        return [*self.prefix, *argv] if self.contained else list(argv)

    def record(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("prefix")
        return data

    @property
    def label(self) -> str:
        return "contained" if self.contained else "not contained"


def bwrap_path() -> str | None:
    return shutil.which(BWRAP)


def probe(bwrap: str | None = None) -> str | None:
    """None when a sandbox can be made here; else why not, and what to do."""
    bwrap = bwrap or bwrap_path()
    if bwrap is None:
        return f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}"
    try:
        proc = subprocess.run(
            [bwrap, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--unshare-pid",
             "--cap-drop", "ALL", "--", "true"],
            capture_output=True, text=True, timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not be started ({exc}): {INSTALL_HINT}"
    if proc.returncode != 0:
        why = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit code {proc.returncode}"
        return (f"bubblewrap cannot make a sandbox here ({why}); unprivileged user namespaces may be "
                "off (sysctl kernel.unprivileged_userns_clone=1, or an AppArmor profile for bwrap), "
                "or start the run with --no-contain")
    return None


def _env_sets_signals() -> bool:
    """coreutils' env has --ignore-signal/--default-signal (8.31 and newer)."""
    try:
        return subprocess.run(["env", "--ignore-signal=TERM", "--default-signal=TERM", "true"],
                              capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def exit_code(code: int, *, contained: bool) -> int:
    """The agent's exit code as the record keeps it: negative for a signal, contained or not."""
    return -(code - 128) if contained and 128 < code < 128 + 65 else code


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _expand(path: str, home: Path) -> Path:
    return home / path[2:] if path.startswith("~/") else (home if path == "~" else Path(path))


def _outermost(path: Path, name: str) -> Path | None:
    """The outermost folder called ``name`` on ``path`` (``.../node_modules``), or None."""
    parts = path.parts
    return Path(*parts[: parts.index(name) + 1]) if name in parts else None


def _prefix_parts(prefix: Path, home: Path) -> list[Path]:
    """What to bind of an install prefix: all of it, but for ``~``, ``~/.local`` and ``/tmp``,
    which hold other programs' data (``~/.local/share``: sessions), only the programs."""
    if prefix in (home, home / ".local", Path("/tmp")):
        return [prefix / sub for sub in ("bin", "lib", "lib64")]
    return [prefix]


def _too_wide(root: Path, home: Path) -> bool:
    """The home, /tmp or a folder above them: bound, it would cover the run's own home or /tmp."""
    return _under(home, root) or _under(Path("/tmp"), root)


def _install_root(path: Path, home: Path) -> list[Path]:
    """Where the install that ``path`` (a file or a PATH folder) belongs to lives: the outermost
    ``node_modules`` (an npm prefix: every package the CLI may load), a ``bin`` folder's prefix
    (a venv, node's prefix), else the folder itself (or the file's folder). Never the home or
    /tmp themselves: a program lying loose there is bound alone."""
    modules = _outermost(path, "node_modules")
    folder = path if path.is_dir() else path.parent
    if modules is not None:
        roots = [modules]
    elif folder.name == "bin" and folder.parent != Path("/"):
        roots = _prefix_parts(folder.parent, home)
    else:
        roots = [folder]
    return [path if _too_wide(root, home) else root for root in roots if not _too_wide(path, home)]


def _hidden_by_sandbox(path: Path, home: Path) -> bool:
    """Under the home or /tmp, which the sandbox replaces (the rest of / is bound read-only)."""
    return _under(path, home) or _under(path, Path("/tmp"))


def _path_prefixes(path_var: str, home: Path) -> list[Path]:
    """What the PATH entries the new $HOME and /tmp would hide need: each entry's install root
    (``node_modules/.bin`` → the whole ``node_modules``; ``~/.local/bin`` → its ``bin`` and
    ``lib``; a venv's ``bin`` → the venv)."""
    out: list[Path] = []
    for entry in path_var.split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue
        p = Path(entry)
        if p in (home, Path("/tmp")):  # the whole home or /tmp on PATH: not an install prefix
            continue
        if _hidden_by_sandbox(p, home):
            for root in _install_root(p, home) if p.name in ("bin", ".bin") else [p]:
                if root not in out:
                    out.append(root)
    return out


def _shebang(path: Path) -> list[str]:
    """The interpreter line of a script (``#!/usr/bin/env node`` → ["/usr/bin/env", "node"])."""
    try:
        with path.open("rb") as fh:
            head = fh.read(256)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    return head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()


def _interpreter(words: list[str]) -> str | None:
    """The program a shebang runs: the interpreter, or what ``env`` is asked to find."""
    if not words:
        return None
    if Path(words[0]).name != "env":
        return words[0]
    return next((w for w in words[1:] if not w.startswith("-") and "=" not in w), None)


def executable_paths(exe: str, path_var: str, home: Path, *, _depth: int = 0) -> list[Path]:
    """What the sandbox must bind read-only for ``exe`` (found on ``path_var``) to start where
    the home and /tmp are replaced: each link on the way to the real file (an npm prefix's
    ``node_modules/.bin/claude`` links into the package), the real file's install (its
    package's ``node_modules``, a venv, a prefix), and the same for the interpreter a script
    names (``#!/usr/bin/env node``: node as PATH finds it; a venv's python and the Python it
    links to). Paths the sandbox shows anyway (outside the home and /tmp) are left out."""
    found = exe if os.sep in exe else shutil.which(exe, path=path_var)
    if not found:
        return []
    path = Path(os.path.abspath(found))
    roots: list[Path] = []
    for _ in range(40):  # each hop of a chain of links
        roots += _install_root(path, home)
        if not path.is_symlink():
            break
        target = Path(os.readlink(path))
        path = target if target.is_absolute() else path.parent.resolve() / target
    real = path.resolve()
    roots += _install_root(real, home)
    program = _interpreter(_shebang(real))
    if program and _depth < 3:
        roots += executable_paths(program, path_var, home, _depth=_depth + 1)
    out: list[Path] = []
    for root in roots:
        if _hidden_by_sandbox(root, home) and root.exists() and root not in out:
            out.append(root)
    return out


# --- the run's own home ------------------------------------------------------------------------

DROPPED_KEYS = {".claude.json": ("projects",)}
"""Keys left out of a copied JSON file: Claude Code keeps each project's history there."""
XDG_DIRS = {"~/.config/": "XDG_CONFIG_HOME", "~/.local/share/": "XDG_DATA_HOME", "~/.local/state/": "XDG_STATE_HOME"}


def home_source(name: str, home: Path, env: dict[str, str], config_dirs: dict[str, str]) -> Path:
    """Where the user's copy of ``name`` (``~/...``) is: under a folder a variable moved it to
    (``CODEX_HOME``, ``XDG_CONFIG_HOME``), else under the home."""
    moved = {**{prefix: var for prefix, var in XDG_DIRS.items()},
             **{prefix.rstrip("/") + "/": var for var, prefix in config_dirs.items()}}
    for prefix, var in sorted(moved.items(), key=lambda kv: -len(kv[0])):
        if name.startswith(prefix) and env.get(var):
            return Path(env[var]).expanduser() / name[len(prefix):]
    return _expand(name, home)


def _merge(into: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    for key, value in settings.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value
    return into


def prepare_home(agent_home: Path, *, home: Path, env: dict[str, str], files: Iterable[str] = (),
                 logins: Iterable[str] = (), config_dirs: dict[str, str] | None = None,
                 settings: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """Copy the CLI's configuration (``files``) and login (``logins``) into the run's own home,
    then merge ``settings`` (a gateway's JSON settings) into theirs; the names written.

    Regular files only (a link is followed to one); a missing file is skipped. Logins are made
    readable by their owner only. Nothing else of the user's home comes in: no history, no
    sessions, no other run's files."""
    agent_home.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    login_names = set(logins)
    for name in [*files, *logins]:
        source = home_source(name, home, env, config_dirs or {})
        target = _expand(name, agent_home)
        try:
            if not source.is_file():
                continue
            data = source.read_bytes()
        except OSError:
            continue
        dropped = DROPPED_KEYS.get(source.name)
        if dropped:
            try:
                obj = json.loads(data)
                data = json.dumps({k: v for k, v in obj.items() if k not in dropped}, indent=2).encode()
            except (ValueError, AttributeError):
                continue  # not the JSON object it should be: better not copied than copied whole
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(0o600 if name in login_names else 0o644)
        written.append(name)
    for name, values in (settings or {}).items():
        target = _expand(name, agent_home)
        try:
            current = json.loads(target.read_text(encoding="utf-8")) if target.is_file() else {}
        except (OSError, ValueError):
            current = {}
        merged = _merge(current if isinstance(current, dict) else {}, values)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(merged, indent=2), encoding="utf-8")
        if name not in written:
            written.append(name)
    return written


def forget_logins(agent_home: Path, logins: Iterable[str]) -> list[str]:
    """Remove the login files from the run's home once the agent has ended (a CLI may have
    refreshed them: whatever is there goes); the names removed."""
    removed = []
    root = agent_home.resolve()
    for name in logins:
        target = _expand(name, agent_home)
        try:
            # The agent may have made a folder on the way a link to somewhere outside its home
            # (``~/.claude`` → the user's real one, as seen from here): never follow it there.
            if not _under(target.parent.resolve(), root):
                continue
            if target.is_symlink() or target.is_file():
                target.unlink()
                removed.append(name)
        except OSError:
            pass
    return removed


def _hidden_dirs(run_dir: Path, runs_root: Path, data_cache: Path, *more: Path, keep: list[Path]) -> list[Path]:
    """The run folder, the folder its siblings share, the default runs root and the data cache.

    A parent that holds something the agent must keep (the venv, agent2rl-tui, $HOME) is not a
    runs folder, so it is left alone.
    """
    candidates = [run_dir, run_dir.parent, runs_root, data_cache, *more]
    out: list[Path] = []
    for d in candidates:
        d = d.resolve()
        if not d.is_dir() or d == Path("/") or any(_under(k, d) for k in keep) or d in out:
            continue
        out.append(d)
    return out


def build(
    *,
    run_dir: Path,
    workspace: Path,
    runs_root: Path,
    data_cache: Path,
    env: dict[str, str],
    writable_paths: tuple[str, ...] = (),
    read_only_paths: tuple[str, ...] = (),
    sources: tuple[Path, ...] = (),
    other_roots: tuple[Path, ...] = (),
    executable: str | None = None,
    bwrap: str | None = None,
) -> Containment:
    """The sandbox for one run's agent, or a not-contained record saying why not.

    ``sources``: files or folders the task's data was prepared from (they hold the eval split):
    hidden like the data cache (a file is covered by an empty one). ``executable``: the agent's
    program, found on the environment's PATH; what it needs is bound read-only
    (:func:`executable_paths`).
    """
    why_not = probe(bwrap)
    if why_not is not None:
        return Containment(False, why_not)
    bwrap = bwrap or bwrap_path()
    assert bwrap is not None
    run_dir, workspace = run_dir.resolve(), workspace.resolve()
    real_home = Path(env.get("HOME") or Path.home()).resolve()
    agent_home, agent_tmp = run_dir / AGENT_HOME, run_dir / AGENT_TMP
    agent_home.mkdir(exist_ok=True)
    agent_tmp.mkdir(exist_ok=True)

    package_dir = Path(agent2rl_tui.__file__).resolve().parent
    python_dirs = [Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), package_dir]
    path_var = env.get("PATH", "")
    read_only = [*python_dirs, *_path_prefixes(path_var, real_home),
                 *(executable_paths(executable, path_var, real_home) if executable else []),
                 *(_expand(p, real_home) for p in read_only_paths)]
    read_only = list(dict.fromkeys(read_only))
    writable = [_expand(p, real_home) for p in writable_paths]
    keep = [*python_dirs, real_home, *(p for p in read_only + writable if p.exists())]
    hidden = _hidden_dirs(run_dir, runs_root, data_cache, *(s for s in sources if s.is_dir()), *other_roots, keep=keep)
    hidden_files = [s.resolve() for s in sources if s.is_file()]

    keeps_status = _env_sets_signals()
    args = ["env", "--ignore-signal=TERM", bwrap] if keeps_status else [bwrap]
    args += ["--ro-bind", "/", "/", "--dev", "/dev"]
    for pattern in NVIDIA_DEVICES:
        for dev in sorted(glob.glob(pattern)):
            args += ["--dev-bind-try", dev, dev]
    args += ["--proc", "/proc", "--bind", str(agent_tmp), "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", "/dev/shm",
             "--bind", str(agent_home), str(real_home)]
    for p in read_only:
        args += ["--ro-bind-try", str(p), str(p)]
    for p in writable:
        args += ["--bind-try", str(p), str(p)]
    for d in hidden:
        args += ["--tmpfs", str(d)]
    if hidden_files:  # an empty file over each (bind mounts are nodev: /dev/null would not read)
        empty = run_dir / "empty-file"
        empty.write_bytes(b"")
        for f in hidden_files:
            args += ["--ro-bind", str(empty), str(f)]
    args += ["--bind", str(workspace), str(workspace)]
    for sub in ("data", "models"):
        if (workspace / sub).is_dir():
            args += ["--ro-bind", str(workspace / sub), str(workspace / sub)]
    args += ["--chdir", str(workspace), "--setenv", "TMPDIR", "/tmp",
             "--unshare-pid", "--unshare-ipc", "--cap-drop", "ALL",
             "--die-with-parent", "--"]  # a supervisor killed with kill -9 takes the whole sandbox along
    if keeps_status:
        args += ["env", "--default-signal=TERM"]
    return Containment(
        True, f"bubblewrap ({bwrap})",
        hidden=[str(p) for p in [*hidden, *hidden_files]],
        writable=[str(workspace), f"{real_home} (the run's {AGENT_HOME}/)", f"/tmp (the run's {AGENT_TMP}/)",
                  *(str(p) for p in writable if p.exists())],
        read_only=["/", *(str(workspace / s) for s in ("data", "models")),
                   *(str(p) for p in read_only if p.exists() and _hidden_by_sandbox(p, real_home))],
        prefix=args,
    )


def not_contained(reason: str, *, requested: bool) -> Containment:
    return Containment(False, reason, requested=requested)


CHECK_S = 120.0
"""How long the pre-flight start check may take (Gemini CLI prints its version in ~2 s idle)."""


class StartCheck(NamedTuple):
    """What ``check_start`` saw: why the program could not start (None: it exited 0), and what it
    printed (stdout, then stderr; at most ``SAID_MAX`` characters)."""

    why: str | None
    said: str


SAID_MAX = 4000
"""Characters of a start check's output kept: a ``--version`` answer is a line or a banner."""


def check_start(argv: list[str], *, env: dict[str, str], contain: bool, runs_root: Path, data_cache: Path,
                writable_paths: tuple[str, ...] = (), read_only_paths: tuple[str, ...] = (),
                timeout: float = CHECK_S) -> StartCheck:
    """Run ``argv`` (an agent CLI's ``--version``) the way a run would start its agent: in a
    sandbox built like the run's (its own empty home, the executable found on ``env``'s PATH
    and bound as a run binds it), from an empty workspace. ``why`` is None when it exits 0; else
    what happened, for the pre-flight's refusal. Without containment it runs plainly."""
    with tempfile.TemporaryDirectory(prefix="agent2rl-check-") as tmp:
        run_dir = Path(tmp) / "run"
        workspace = run_dir / "workspace"
        workspace.mkdir(parents=True)
        made = (build(run_dir=run_dir, workspace=workspace, runs_root=runs_root, data_cache=data_cache, env=env,
                      writable_paths=writable_paths, read_only_paths=read_only_paths, executable=argv[0])
                if contain else not_contained("not contained", requested=False))
        run_env = dict(env)
        if not made.contained:
            run_env["HOME"] = str(run_dir / AGENT_HOME)
            (run_dir / AGENT_HOME).mkdir(exist_ok=True)
        try:
            proc = subprocess.run(made.wrap(argv), cwd=workspace, env=run_env, stdin=subprocess.DEVNULL,
                                  capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return StartCheck(f"it did not exit within {timeout:.0f} s", "")
        except OSError as exc:
            return StartCheck(f"it could not be started: {exc}", "")
        said = ((proc.stdout or b"") + b"\n" + (proc.stderr or b"")).decode("utf-8", "replace").strip()[:SAID_MAX]
        code = exit_code(proc.returncode, contained=made.contained)
        if code == 0:
            return StartCheck(None, said)
        last = (proc.stderr or proc.stdout).decode("utf-8", "replace").strip().splitlines()
        where = "inside the sandbox" if made.contained else "here"
        return StartCheck(f"it exited with code {code} {where}" + (f": {' / '.join(last[-3:])[:500]}" if last else ""),
                          said)
