"""The suite's files start longest first (``support.order``), and the list cannot rot silently."""

from __future__ import annotations

import subprocess
import sys

from support.order import LONGEST_FIRST
from support.paths import REPO


def test_every_file_on_the_list_exists_once() -> None:
    files = [p.name for p in (REPO / "tests").rglob("test_*.py")]
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    assert [name for name in LONGEST_FIRST if files.count(name) != 1] == []


def test_files_are_collected_longest_first_whatever_order_they_are_given_in() -> None:
    given = ["tests/unit/test_numbers.py", "tests/integration/test_eval_items.py", "tests/system/test_types.py"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *given],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    order = list(dict.fromkeys(line.split("::")[0] for line in proc.stdout.splitlines() if "::" in line))
    assert order == ["tests/system/test_types.py", "tests/integration/test_eval_items.py", "tests/unit/test_numbers.py"]


def test_every_suite_command_of_the_makefile_keeps_that_order_and_writes_bytecode() -> None:
    """``make test``, ``test-fast`` and ``test-unit`` (as ``make -n`` prints them): the order kept, and
    bytecode caches written whatever the shell's PYTHONDONTWRITEBYTECODE says."""
    for target in ("test", "test-fast", "test-unit"):
        proc = subprocess.run(["make", "-n", target], cwd=REPO, capture_output=True, text=True, timeout=60)
        suite = [line for line in proc.stdout.splitlines() if "-m pytest" in line]
        assert len(suite) == 1, proc.stdout + proc.stderr
        assert "--no-loadscope-reorder" in suite[0] and suite[0].startswith("PYTHONDONTWRITEBYTECODE= "), suite


HEAVY = ("torch", "transformers", "vllm", "trl", "anthropic", "openai", "google.genai", "inspect_ai")
"""Packages of seconds to import: none is imported by collecting the suite (``support.lazy``)."""

COLLECT_AND_LIST_HEAVY = """
import sys, pytest
code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "tests"])
print("HEAVY:", [name for name in sys.argv[1:] if name in sys.modules], "EXIT:", int(code))
"""


def test_collecting_the_suite_imports_no_heavy_package() -> None:
    """Every xdist worker collects every file: a heavy import at a file's top is paid by each of them
    (the providers' SDKs, inspect_ai and torch made collection 8.5 s of CPU a worker; 1.8 s without)."""
    proc = subprocess.run([sys.executable, "-c", COLLECT_AND_LIST_HEAVY, *HEAVY], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert "HEAVY: [] EXIT: 0" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
