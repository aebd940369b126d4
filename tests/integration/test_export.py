"""`agent2rl-tui export RUN --format inspect` (issue 43, 5): a run as an Inspect AI eval log, read
back with inspect_ai's own reader. The agent's tool calls come back as messages and tool events,
each scored submission as an intermediate score, best of budget, baseline and improvement as the
sample's score; what the agent wrote stays inert."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

from support.runs import cli, read_report, wait_for
from support.synthetic import T0, add_transcript, standard_run

from agent2rl_tui.record.store import RunStore


def test_a_runs_transcript_and_scores_read_back_from_its_inspect_log(tmp_path: Path) -> None:
    # inspect_ai here, not at the top: every worker collects this file, ~1.5 s each (support/lazy.py).
    from inspect_ai.event import ScoreEvent, ToolEvent
    from inspect_ai.log import read_eval_log
    from inspect_ai.model import ChatMessageAssistant, ChatMessageTool, ChatMessageUser

    run = standard_run(tmp_path)
    hostile = {"type": "assistant", "message": {"id": "mx", "content": [
        {"type": "text", "text": "clear the screen \x1b[2J\x1b]0;pwned\x07 done"}]}}
    deep: object = "x"
    for _ in range(300):
        deep = {"d": deep}
    user = {"type": "user", "message": {"content": [{"type": "text", "text": "a turn the user wrote"}]}}
    calls = {"type": "assistant", "message": {"id": "my", "content": [
        {"type": "tool_use", "id": "deep", "name": "Bash", "input": deep},
        {"type": "tool_use", "id": "esc", "name": "Bash", "input": {"command": "printf '\x1b[31mred'"}}]}}
    add_transcript(run, [(json.dumps(hostile), T0 + 100), (json.dumps(user), T0 + 101), (json.dumps(calls), T0 + 102)])
    out = tmp_path / "exported" / "run.eval"
    done = cli("export", run.name, "--format", "inspect", "--out", str(out), root=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"inspect: {out}"

    log = read_eval_log(str(out))
    assert log.eval.task == "agent2rl/arith" and log.eval.run_id == run.name and log.status == "success"
    (sample,) = log.samples or []
    calls = [c for m in sample.messages if isinstance(m, ChatMessageAssistant) for c in (m.tool_calls or [])]
    assert len(calls) == 12 and calls[0].id == "t1" and calls[0].function == "Bash"
    by_id = {c.id: c for c in calls}
    assert set(by_id["deep"].arguments) == {"arguments"}  # nested too deep: kept as its text, the export still made
    assert by_id["esc"].arguments == {"command": "printf '\\x1b[31mred'"}  # inert, as the record shows it
    assert any(isinstance(m, ChatMessageUser) and m.text == "a turn the user wrote" for m in sample.messages)
    assert calls[0].arguments == {"command": "python code/train.py --step 1"}
    results = {m.tool_call_id: m.text for m in sample.messages if isinstance(m, ChatMessageTool)}
    assert results["t1"] == "loss 0.3333"
    tools = [e for e in sample.events if isinstance(e, ToolEvent)]
    assert [e.id for e in tools] == [c.id for c in calls] and tools[0].result == "loss 0.3333"
    assert all(e.result for e in tools[:10])  # each of the ten calls paired with its own result
    scored = [e for e in sample.events if isinstance(e, ScoreEvent)]
    with RunStore.of_run(run) as store:
        agent_scores = [s.score for s in store.submissions(kind="agent") if s.score is not None]
        baseline = store.baseline()
    assert len(agent_scores) == 2 and [e.score.value for e in scored] == agent_scores
    assert all(e.intermediate for e in scored)
    value = sample.scores["agent2rl"].value
    assert value["best_score"] == max(agent_scores) and baseline is not None
    assert value["baseline"] == baseline.score and value["improvement"] == max(agent_scores) - baseline.score
    assert log.eval.viewer is not None and log.eval.viewer.trust_content is False  # inspect view: plain text
    texts = [m.text for m in sample.messages]
    assert "\x1b" not in "".join(texts) and "\x07" not in "".join(texts)
    assert any("clear the screen \\x1b[2J" in t for t in texts)


def test_the_example_agents_real_run_exports_its_output_and_best_of_budget(example_run: tuple[Path, str],
                                                                            tmp_path: Path) -> None:
    from inspect_ai.event import InfoEvent, ScoreEvent
    from inspect_ai.log import read_eval_log, resolve_sample_attachments

    run = tmp_path / example_run[0].name
    shutil.copytree(example_run[0], run)
    done = cli("export", str(run), root=tmp_path)
    assert done.returncode == 0, done.stderr
    out = run / "report" / f"{run.name}.eval"
    log = read_eval_log(str(out))
    report = read_report(run)
    (sample,) = [resolve_sample_attachments(s) for s in log.samples or []]  # long texts are kept as attachments
    value = sample.scores["agent2rl"].value
    assert value["baseline"] == report["baseline"]["score"]
    assert value["best_score"] == report["best"]["score"]
    assert value["improvement"] == report["improvement"]
    assert sample.input[0].text.startswith(sample.messages[0].text[:200])  # the agent's prompt is the input
    output = "\n".join([str(e.data) for e in sample.events if isinstance(e, InfoEvent)]
                       + [m.text for m in sample.messages[1:]])
    assert "{'loss'" in output and "'reward'" in output  # the trainers' log lines, as the agent printed them
    scored = [e.score.value for e in sample.events if isinstance(e, ScoreEvent)]
    assert scored == [s["score"] for s in report["submissions"] if s["score"] is not None]
    metrics = log.results.scores[0].metrics if log.results else {}
    assert metrics["best_score"].value == report["best"]["score"]


def test_an_export_to_an_unknown_format_says_what_is_written(tmp_path: Path) -> None:
    run = standard_run(tmp_path)
    done = cli("export", run.name, "--out", str(tmp_path / "run.txt"), root=tmp_path)
    assert done.returncode == 1 and ".eval (its zip format) or .json" in done.stderr
    assert not (tmp_path / "run.txt").exists()


def test_inspect_view_lists_the_exported_run_by_its_task(tmp_path: Path) -> None:
    """The viewer itself (`inspect view`, a real server on 127.0.0.1) reads the log's header."""
    run = standard_run(tmp_path)
    logs = tmp_path / "logs"
    assert cli("export", run.name, "--out", str(logs / "run.eval"), root=tmp_path).returncode == 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    viewer = subprocess.Popen([str(Path(sys.executable).parent / "inspect"), "view", "--log-dir", str(logs),
                               "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def listed() -> dict | None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/logs", timeout=5) as reply:
                    return json.loads(reply.read())
            except OSError:
                return None

        found = wait_for(listed, timeout=120, what="inspect view to answer")
        assert [(f["task"], f["task_id"]) for f in found["files"]] == [("agent2rl/arith", run.name)]
    finally:
        viewer.terminate()
        viewer.wait(timeout=30)
