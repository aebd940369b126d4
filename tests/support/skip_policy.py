"""No silent skips: under CI a skipped test is a failure unless the machine lacks hardware.

A skip hides a breakage: a whole task could stop working while the suite reads green with one
more "s". So under CI (``CI`` set to true, as CI services set it) every skip whose reason is
not on ``HARDWARE_REASONS`` is reported as a failure that says why; outside CI a skip stays a
skip. Tests that need a part of the machine (npm, bubblewrap, root, Slurm, chromium) say in
their skip reason the command that installs it (``missing``), so the failure under CI names
what to do, and a developer's skip says the same.

Loaded by tests/system/conftest.py (``pytest_plugins``); ``pytest -p skip_policy`` loads it alone.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

HARDWARE_REASONS = ("no CUDA GPU",)
"""The reasons a test may skip under CI: hardware a CI machine does not have. A skip reason
must start with one of these (``needs_gpu`` writes it)."""


def under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def missing(part: str, install: str) -> NoReturn:
    """This test needs ``part``, which the machine lacks: a skip that says how to install it
    (a failure under CI, by ``pytest_runtest_makereport``)."""
    pytest.skip(f"{part} is missing: {install}")


def _reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # (path, line, "Skipped: reason")
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _allowed(reason: str) -> bool:
    return any(reason.startswith(hardware) for hardware in HARDWARE_REASONS)


def _fail_unless_allowed(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not (report.skipped and under_ci()):
        return
    if hasattr(report, "wasxfail"):  # an expected failure is not a skip
        return
    reason = _reason(report)
    if _allowed(reason):
        return
    report.outcome = "failed"
    report.longrepr = (f"skipped under CI: {reason}\n(CI=true: a skip is an error unless its reason is hardware "
                       f"the machine lacks, one of {list(HARDWARE_REASONS)}; install what the reason names, "
                       "or make the test run here)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    outcome = yield
    _fail_unless_allowed(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> object:
    outcome = yield
    _fail_unless_allowed(outcome.get_result())


def needs_gpu(what: str = "this test") -> pytest.MarkDecorator:
    """Skip where no CUDA GPU is visible: the one reason a skip is allowed under CI."""
    from agent2rl_tui.util.gpus import visible_gpu_count

    return pytest.mark.skipif(visible_gpu_count() == 0, reason=f"no CUDA GPU: {what} needs one")
