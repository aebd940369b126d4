"""Containment: the agent's whole process tree runs in a bubblewrap sandbox.

A score means something only if the agent could not read the eval split and could not change
the record. Left alone, an agent can walk up from its workspace and read ``../evals`` (every
eval prompt with its gold answer), the data cache's eval split, other runs, the grader's
command line in /proc, or write ``../run.db`` and the grader's own code. Inside the sandbox
(docs/containment.md has the why of each line):

- ``/`` is read-only: the system, Python, the venv and agent2rl-tui itself (the grader's code
  cannot be edited);
- ``$HOME`` is a fresh folder of the run's own (``agent-home/``, read-write), into which only
  the paths the agent's tools need come back: the profile's ``writable_paths`` (``~/.claude``,
  ``~/.codex``: logins and sessions) and ``read_only_paths``, and the install prefixes of the
  ``PATH`` entries under the real home (``~/.local/bin`` → ``~/.local``);
- the run folder, the runs root, sibling runs and the data cache are empty tmpfs; the workspace
  is bound back read-write, its ``data/`` and ``models/`` read-only;
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
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import agent2rl_tui
from agent2rl_tui.record.contamination import AGENT_HOME  # the agent's $HOME: the check scans it too

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


def _path_prefixes(path_var: str, home: Path) -> list[Path]:
    """The install prefixes of PATH entries the new $HOME and /tmp would hide (bin/ → its parent)."""
    out: list[Path] = []
    for entry in path_var.split(os.pathsep):
        if not entry:
            continue
        p = Path(entry)
        if p in (home, Path("/tmp")):  # the whole home or /tmp on PATH: not an install prefix
            continue
        if _under(p, home) or _under(p, Path("/tmp")):
            prefix = p.parent if p.name == "bin" and p.parent != home else p
            if prefix not in out:
                out.append(prefix)
    return out


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
    bwrap: str | None = None,
) -> Containment:
    """The sandbox for one run's agent, or a not-contained record saying why not.

    ``sources``: files or folders the task's data was prepared from (they hold the eval split):
    hidden like the data cache (a file is covered by an empty one).
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
    read_only = [*python_dirs, *_path_prefixes(env.get("PATH", ""), real_home),
                 *(_expand(p, real_home) for p in read_only_paths)]
    writable = [_expand(p, real_home) for p in writable_paths]
    keep = [*python_dirs, real_home, *(p for p in read_only + writable if p.exists())]
    hidden = _hidden_dirs(run_dir, runs_root, data_cache, *(s for s in sources if s.is_dir()), keep=keep)
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
             "--unshare-pid", "--unshare-ipc", "--cap-drop", "ALL", "--"]
    if keeps_status:
        args += ["env", "--default-signal=TERM"]
    return Containment(
        True, f"bubblewrap ({bwrap})",
        hidden=[str(p) for p in [*hidden, *hidden_files]],
        writable=[str(workspace), f"{real_home} (the run's {AGENT_HOME}/)", f"/tmp (the run's {AGENT_TMP}/)",
                  *(str(p) for p in writable if p.exists())],
        read_only=["/", *(str(workspace / s) for s in ("data", "models")),
                   *(str(p) for p in read_only if p.exists() and _under(p, real_home))],
        prefix=args,
    )


def not_contained(reason: str, *, requested: bool) -> Containment:
    return Containment(False, reason, requested=requested)
