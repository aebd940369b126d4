"""The order the suite's files start in: the longest first, so that pytest-xdist's workers end
together instead of one running a long file alone at the end.

``--dist loadfile`` hands each worker whole files in the order it is given them, but only with
``--no-loadscope-reorder`` (the Makefile passes it): by default xdist puts the files with the most
tests first, which started the Slurm file 39th of 91, the plain install 76th and mypy 84th.
The list comes from ``--durations`` of loaded fresh-clone runs; a file not on it follows, those
with more tests first (xdist's own rule), and the unit tier's files last of all: most run in the
worker's own process for a second or two, so the workers end within a few seconds of each other.
Before, the small integration files ended the suite, each waiting on its subprocesses, and one
worker often ran alone for the last half minute. Six unit files wait more than they compute (a meter
or scripted driver serving its clients, the TUI's pilot, vitals' sampling: 55 s of their 90 on one
idle core); they are listed one by one among the mid-suite files, where the other workers' CPU work
fills their waits, and not met at the end, where they left a core idle for 20 s.
"""

from __future__ import annotations

from collections import Counter

import pytest

LONGEST_FIRST = (
    "test_campaign_slurm_real.py",  # about five minutes of Slurm jobs, bounded by Slurm's own timers
    "test_plain_install.py",  # pip installs a venv of its own
    "test_bench.py",  # every benchmark's quick run
    "test_gsm8k_run.py",  # a whole run of the example agent on GSM8K, 90 s of budget
    "test_alfworld.py",
    "test_trainenv.py",  # the first of the files that read the shared example run
    "test_agent_clis.py",
    "test_level3_runs.py",  # the coin demo: a whole run of the example agent on a text game
    "test_episodes.py",
    "test_iterations.py",
    "test_agents_check.py",
    "test_vllm.py",
    "test_experiment.py",
    "test_campaign.py",  # an 8-run campaign of whole runs, graded by a scripted worker
    "test_tui.py",
    "test_types.py",  # mypy
    "test_prompt_profiles.py",
    "test_eval_items.py",
    # Then the files of a few tests that each take ten seconds or more: left to xdist's rule (the
    # most tests first), a file of one such test started last and ran alone at the end.
    "test_hostile_record.py",
    "test_meter.py",  # unit files that wait on their servers and subprocesses: spread out here,
    # among whole files that use the CPU, rather than met at the end with nothing to fill their waits
    "test_doctor.py",
    "test_sandbox.py",
    "test_scripted_driver.py",
    "test_alpacaeval.py",
    "test_lifecycle.py",
    "test_tui_episodes.py",
    "test_deepsearchqa.py",
    "test_progress.py",
    "test_ui_widgets.py",
    "test_grader_api.py",
    "test_locks.py",
    "test_vitals.py",
    "test_secrets.py",
    "test_intake.py",
    "test_meter_hostile.py",
    "test_claims.py",
    "test_webshop.py",
    "test_hostile_grader.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    tests_in = Counter(item.path for item in items)
    items.sort(key=lambda item: (rank.get(item.path.name, len(rank)), item.path.parent.name == "unit",
                                 -tests_in[item.path]))  # stable within a file
