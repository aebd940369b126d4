"""What a code revision captures: the agent's work, not its models, data or caches.

The rules live here and only here; the watcher, the snapshotter, the report and the TUI all
read them. A path is left out for a named reason, and the left-out paths are counted per
reason, so nothing disappears from the record silently.
"""

from __future__ import annotations

import fnmatch
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

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


@dataclass(frozen=True)
class CaptureRules:
    top_level_ignored: tuple[str, ...] = TOP_LEVEL_IGNORED
    ignored_dir_names: tuple[str, ...] = IGNORED_DIR_NAMES
    ignored_dir_globs: tuple[str, ...] = IGNORED_DIR_GLOBS
    ignored_file_globs: tuple[str, ...] = IGNORED_FILE_GLOBS
    size_cap_bytes: int = SIZE_CAP_BYTES

    def describe(self) -> list[str]:
        """The rules in words, for the TUI and the report."""
        return [
            "captured: every other file under workspace/ (code, scripts, configs, notes)",
            f"not captured: the top-level folders {', '.join(f'{d}/' for d in self.top_level_ignored)}",
            f"not captured: folders named {', '.join(self.ignored_dir_names)} or matching "
            f"{', '.join(self.ignored_dir_globs)}, and any virtualenv or conda env (pyvenv.cfg, conda-meta/)",
            f"not captured: files matching {', '.join(self.ignored_file_globs)}",
            f"not captured: files over {self.size_cap_bytes:,} bytes, and binary files (a NUL byte in the first "
            f"{BINARY_SNIFF_BYTES} bytes)",
        ]

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
        name = parts[-1]
        for pattern in self.ignored_file_globs:
            if fnmatch.fnmatch(name, pattern):
                return pattern
        return None

    def file_reason(self, rel: str, abs_path: str, size: int) -> str | None:
        name = rel.rsplit("/", 1)[-1]
        for pattern in self.ignored_file_globs:
            if fnmatch.fnmatch(name, pattern):
                return pattern
        if size > self.size_cap_bytes:
            return f"over {self.size_cap_bytes:,} bytes"
        try:
            with open(abs_path, "rb") as fh:
                if b"\0" in fh.read(BINARY_SNIFF_BYTES):
                    return "binary"
        except OSError:
            return "unreadable"
        return None


DEFAULT_RULES = CaptureRules()


@dataclass
class WalkResult:
    files: list[str] = field(default_factory=list)  # workspace-relative, '/'-separated, sorted
    ignored: Counter[str] = field(default_factory=Counter)  # reason -> count of paths left out
    examples: dict[str, list[str]] = field(default_factory=dict)  # reason -> a few paths

    def leave_out(self, reason: str, rel: str) -> None:
        self.ignored[reason] += 1
        ex = self.examples.setdefault(reason, [])
        if len(ex) < 3:
            ex.append(rel)


def walk(root: Path, rules: CaptureRules = DEFAULT_RULES) -> WalkResult:
    """The files a snapshot of ``root`` captures, and what it leaves out (counted by reason).

    Ignored folders are not descended into, so a virtualenv or a checkpoint folder costs
    one entry, not a walk.
    """
    out = WalkResult()
    root_s = str(root)
    for dirpath, dirnames, filenames in os.walk(root_s):
        rel_dir = os.path.relpath(dirpath, root_s)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
        kept = []
        for d in dirnames:
            rel = f"{rel_dir}/{d}" if rel_dir else d
            full = os.path.join(dirpath, d)
            if os.path.islink(full):
                out.files.append(rel)  # a link is captured as a link, never followed
                continue
            reason = rules.dir_reason(rel, full)
            if reason:
                out.leave_out(reason, rel + "/")
            else:
                kept.append(d)
        dirnames[:] = kept
        for f in filenames:
            rel = f"{rel_dir}/{f}" if rel_dir else f
            full = os.path.join(dirpath, f)
            try:
                st = os.lstat(full)
            except OSError:
                continue  # vanished while we looked
            if os.path.islink(full):
                out.files.append(rel)
                continue
            reason = rules.file_reason(rel, full, st.st_size)
            if reason:
                out.leave_out(reason, rel)
            else:
                out.files.append(rel)
    out.files.sort()
    return out
