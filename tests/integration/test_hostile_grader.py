"""The grader against a hostile agent, through the real CLI, contained (issue classes 1, 2, 4, 6).

The agent (tests/fixtures/hostile_submitter.py) submits models that try to be scored on
something other than what they are, to read an eval prompt through the grader's answers, and
requests the grader must neither read whole nor choke on; meanwhile another user of the
machine, who read the grader's URL off a command line, tries to submit and to read. Every
refusal must be in the record, and nothing of an evaluation in what the agent got.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import FIXTURES
from support.runs import cli, processes_with, wait_for

from agent2rl_tui.record.store import ACTIVE_STATUSES, RunStore
from agent2rl_tui.review.index import summarize
from agent2rl_tui.run import containment

pytestmark = pytest.mark.slow
SUBMITTER = FIXTURES / "hostile_submitter.py"
AGENT = 'printf "%s" "$PROBE_SCRIPT" > code/submitter.py && "$PROBE_PY" code/submitter.py'
as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def attacks(log: str) -> dict[str, tuple[int, str, str]]:
    """NAME -> (HTTP status, submission status, error code) from the agent's log."""
    found = re.findall(r" attack (\S+): (\d+) (\S+) (\S+)$", log, re.MULTILINE)
    return {name: (int(code), status, error) for name, code, status, error in found}


def leaked_url() -> str:
    """The grader URL another user reads off the agent's process list (``ps``)."""
    (pid,) = processes_with("leaked-url-holder")
    return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[4].decode()


def eval_questions(run_dir: Path) -> list[str]:
    """The user turns of the baseline's eval prompts (what a leak would carry)."""
    rows = [json.loads(line) for line in (run_dir / "evals" / "0" / "results.jsonl").read_text().splitlines()]
    return [re.search(r"user\n(.*?)<\|im_end\|>", r["prompt"], re.DOTALL).group(1) for r in rows]


@pytest.mark.skipif(containment.probe() is not None, reason=f"containment unavailable: {containment.probe()}")
def test_a_hostile_agent_cannot_forge_a_score_or_read_an_evaluation(tiny_model: Path, tmp_path: Path) -> None:
    root = tmp_path / "runs"
    proc = cli("run", "start", "--task", "arith", "--agent", "command", "--command", AGENT, "--model",
               str(tiny_model), "--budget", "10m", "--grace", "2s", "--eval-memory", "1.5", "--detach",
               "--env", f"PROBE_SCRIPT={SUBMITTER.read_text()}", "--env", f"PROBE_PY={sys.executable}",
               root=root, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = Path(re.search(r"run folder: (\S+)", proc.stdout).group(1))
    log_path = run_dir / "logs" / "agent.log"
    try:
        wait_for(lambda: log_path.exists() and "leaked URL: on the command line" in log_path.read_text(),
                 timeout=480, what="the agent to leak its URL")
        url = leaked_url()
    except AssertionError as exc:  # say where it stood
        logs = {name: (run_dir / "logs" / name).read_text()[-3000:] for name in ("agent.log", "grader.log")
                if (run_dir / "logs" / name).exists()}
        raise AssertionError(f"{exc}\n{json.dumps(logs, indent=1)}") from None

    # Another user of the machine, with the whole URL, can neither submit nor read.
    if os.getuid() == 0 and shutil.which("setpriv"):
        for args in (["-X", "POST", "-H", "Content-Type: application/json", "-d", '{"model_path": "output/busy"}',
                      url + "/submit"], [url + "/submissions"], [url + "/health"]):
            out = subprocess.run([*as_nobody, "curl", "-s", "-w", "\n%{http_code}", *args], capture_output=True,
                                 text=True, timeout=60)
            body, status = out.stdout.rsplit("\n", 1)
            assert status == "403" and json.loads(body)["error"] == "not_your_run", out
    (run_dir / "workspace" / "code" / "go-on").write_text("")
    wait_for(lambda: summarize(run_dir).status not in ACTIVE_STATUSES, timeout=600, what="the run to end")

    log = log_path.read_text()
    assert "submitter done 18" in log, log[-3000:]
    got = attacks(log)
    assert got["leak"][:2] == got["solve"][:2] == (200, "scored")  # their templates were never used
    assert got["fifo"] == (422, "-", "not_a_regular_file")
    assert got["outside"] == (422, "-", "symlink")
    assert got["decoy"][:2] == (200, "scored")
    assert got["beams"][:2] == (200, "scored")
    assert got["missing"] == (422, "-", "missing_weights")
    assert got["swap-result"][:2] == (200, "scored")
    assert got["nested"] == (400, "-", "invalid_json")
    assert got["long-path"] == (400, "-", "invalid_path")
    assert got["big-body"] == (413, "-", "too_large")
    assert got["gpu-field"] == (400, "-", "unknown_field")
    assert got["greedy"] == (200, "failed", "out_of_memory")
    assert got["deep"] == (422, "-", "missing_weights")
    beams = json.loads(re.search(r"answer beams: (.*)$", log, re.MULTILINE).group(1))
    assert "generation_config.json: num_beams" in beams["ignored_settings"]
    solve = json.loads(re.search(r"answer solve: (.*)$", log, re.MULTILINE).group(1))
    assert any("chat template differs" in note for note in solve["ignored_settings"])

    # Nothing of an evaluation reached the agent: not the leaking template's text, not an eval prompt.
    assert "LEAK" not in log
    assert not [q for q in eval_questions(run_dir) if q in log]

    with RunStore.of_run(run_dir) as store:
        subs = {s.id: s for s in store.submissions()}
        events = [e["kind"] for e in store.events()]
    by_path = {s.model_path: s for s in subs.values() if s.kind == "agent" and s.model_path}
    base = subs[0]
    # Each refusal and failure is a row of the record, its code beside its full text. The templates'
    # submissions were asked the base model's prompts, word for word.
    prompts = {i: [json.loads(r)["prompt"] for r in (run_dir / "evals" / str(i) / "results.jsonl").read_text().splitlines()]
               for i in (0, by_path["output/solve"].id)}
    assert prompts[0] == prompts[by_path["output/solve"].id]
    assert by_path["output/fifo"].status == "rejected" and by_path["output/fifo"].error_code == "not_a_regular_file"
    assert by_path["output/missing"].error_code == "missing_weights"
    assert by_path["output/greedy"].error_code == "out_of_memory"
    assert sum(1 for s in subs.values() if s.error_code in ("invalid_json", "invalid_path", "too_large", "unknown_field")) == 4
    # Scored on what was submitted, hashed as loaded: the swapped folder as taken (the base model's weights),
    # the decoy as the zeros the engine read, the beams' outputs as the task's greedy decoding makes them.
    assert by_path["output/swap"].weights_hash == base.weights_hash
    assert by_path["output/decoy"].weights_hash != base.weights_hash
    assert by_path["output/beams"].score == base.score
    report = json.loads((run_dir / "report" / "report.json").read_text())
    copies = {s["model_path"]: s["is_base_copy"] for s in report["submissions"] if s.get("model_path")}
    assert copies["output/decoy"] is False and copies["output/swap"] is True
    # The grader's copies are gone once scored; the other user's tries are on the record.
    assert not [p for p in (run_dir / "intake").iterdir()]
    if os.getuid() == 0 and shutil.which("setpriv"):
        assert events.count("foreign_request") == 3
