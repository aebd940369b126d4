"""Live scoring progress (issue 43, 2): the real grader and eval worker score a GSM8K baseline with the
tiny model (every answer runs to 512 tokens: seconds per batch of items), and while they do, the
worker's progress file, the Runs list's summary and a foreground `run start`'s lines say how far it is.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from support.runs import cli

from agent2rl_tui.record.progress import read_progress
from agent2rl_tui.record.store import RunStore, SubStatus
from agent2rl_tui.review.index import summarize

ITEMS = 17
"""Two batches of the reference profile's 16: the first's end is seen before the whole is scored."""


def test_the_baseline_says_how_far_it_has_got_while_it_is_scored(prepared_data: Path, tiny_model: Path,
                                                                 tmp_path: Path) -> None:
    proc = cli("run", "start", "--task", "gsm8k", "--agent", "command", "--command", "true", "--model",
               str(tiny_model), "--budget", "1m", "--eval-limit", str(ITEMS), "--engine", "transformers", "--detach",
               root=tmp_path / "runs", timeout=120)  # the reference profile generates 16 items at a time
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = Path(re.search(r"run folder: (\S+)", proc.stdout).group(1))
    seen: list[tuple[str, int, str | None]] = []  # (phase, done, what the Runs list said) while evaluating
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        with RunStore.of_run(run) as store:
            base = store.baseline()
        if base is not None and base.status not in (SubStatus.QUEUED, SubStatus.EVALUATING):
            break
        found = read_progress(run, 0)
        if found is not None and base is not None and base.status == SubStatus.EVALUATING:
            seen.append((found.phase, found.done, summarize(run).scoring))
        time.sleep(0.05)
    assert base is not None and base.status == SubStatus.SCORED, base
    assert seen, "no progress was seen while the baseline was scored"
    assert read_progress(run, 0).total == ITEMS
    dones = [done for _, done, _ in seen]
    assert dones == sorted(dones) and any(0 < d < ITEMS for d in dones), seen  # counted as batches finished
    assert {phase for phase, _, _ in seen} >= {"generate"}
    assert any(said == f"{d}/{ITEMS}" for _, d, said in seen if said and "/" in said), seen  # the Runs list's cell
    # The grader said so the moment it started the evaluation, before its worker had started.
    assert seen[0][0] in ("start", "load", "generate") and read_progress(run, 0).done == ITEMS
    assert seen[0][0] == "start", seen[:3]
    deadline = time.monotonic() + 300
    while summarize(run).status not in ("finished", "failed") and time.monotonic() < deadline:
        time.sleep(0.5)
    log = (run / "logs" / "supervisor.log").read_text()
    assert re.search(r"scoring the baseline: (loading the model|generating)", log), log[-2000:]
