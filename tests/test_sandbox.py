"""The HumanEval sandbox against real escape attempts, and the HumanEval grader on real problems."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from agent2rl_tui.core.tasks import load_task
from agent2rl_tui.grader.evaluators.humaneval import HumanEvalEvaluator, build_program
from agent2rl_tui.grader.sandbox import UID_BASE, Sandbox


@pytest.fixture(scope="module")
def sandbox():
    box = Sandbox(timeout_s=2.0, memory_bytes=512 << 20)
    yield box
    box.close()


def sandbox_procs() -> list[int]:
    """Live (not zombie) processes owned by the sandbox's uids."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if UID_BASE <= os.stat(f"/proc/{entry}").st_uid < UID_BASE + 64:
                    state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state != "Z":
                        out.append(int(entry))
            except (FileNotFoundError, ProcessLookupError):
                pass
    return out


def test_a_passing_and_a_failing_program(sandbox: Sandbox) -> None:
    assert sandbox.run("def check(f):\n    assert f(2) == 4\ncheck(lambda x: x * 2)\n").passed
    bad = sandbox.run("def check(f):\n    assert f(2) == 5\ncheck(lambda x: x * 2)\n")
    assert not bad.passed and bad.status == "failed" and "AssertionError" in bad.detail


@pytest.mark.parametrize("exit_call", ["import sys; sys.exit(0)", "import os; os._exit(0)",
                                       "raise SystemExit(0)"])
def test_exiting_early_cannot_fake_a_pass(sandbox: Sandbox, exit_call: str) -> None:
    program = f"{exit_call}\nassert False\n"
    assert not sandbox.run(program).passed
    guarded = f"if __name__ == '__main__':\n    {exit_call}\nassert False\n"
    assert not sandbox.run(guarded).passed


def test_an_infinite_loop_times_out(sandbox: Sandbox) -> None:
    t = time.monotonic()
    result = sandbox.run("while True:\n    pass\n")
    assert result.status == "timeout" and not result.passed
    assert time.monotonic() - t < 6


def test_a_fork_bomb_is_contained_and_leaves_nothing_behind(sandbox: Sandbox) -> None:
    result = sandbox.run("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n")
    assert not result.passed
    if sandbox.mode == "full":
        deadline = time.monotonic() + 5
        while sandbox_procs() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sandbox_procs() == []


def test_a_huge_allocation_fails_fast(sandbox: Sandbox) -> None:
    t = time.monotonic()
    result = sandbox.run("x = bytearray(10 * 1024 ** 3)\n")
    assert not result.passed and "MemoryError" in result.detail
    assert time.monotonic() - t < 2


def test_an_output_flood_is_capped(sandbox: Sandbox) -> None:
    result = sandbox.run("import sys\nwhile True:\n    sys.stderr.write('x' * 65536)\n")
    assert not result.passed and result.status in ("failed", "timeout")


def test_writing_outside_its_dir_does_not_reach_the_host(sandbox: Sandbox, tmp_path: Path) -> None:
    marker = f"/tmp/agent2rl-escape-{os.getpid()}"
    result = sandbox.run(f"open({marker!r}, 'w').write('escaped')\nopen('{tmp_path}/x', 'w').write('escaped')\n")
    assert not os.path.exists(marker)
    assert not (tmp_path / "x").exists()
    if sandbox.mode == "full":
        assert not result.passed  # the second write is refused: another user's folder


def test_the_network_is_unreachable(sandbox: Sandbox) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted: list[bool] = []
    threading.Thread(target=lambda: accepted.append(bool(server.accept())), daemon=True).start()
    result = sandbox.run(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)\n")
    server.close()
    if sandbox.mode in ("full", "userns"):
        assert not result.passed and not accepted
    else:
        pytest.skip(f"mode {sandbox.mode}: no network namespace on this machine (logged by the grader)")


def test_the_run_folder_and_root_files_are_unreadable(sandbox: Sandbox, tmp_path: Path) -> None:
    if sandbox.mode != "full":
        pytest.skip("only a separate uid keeps root's files out of reach")
    secret = tmp_path / "run"
    secret.mkdir()
    secret.chmod(0o700)  # like a run folder
    (secret / "run.db").write_text("eval answers")
    assert not sandbox.run(f"print(open('{secret}/run.db').read())\n").passed


def test_canonical_solutions_score_100_and_a_broken_one_0(prepared_data: Path) -> None:
    items = load_task("humaneval").load_split("eval")
    assert [i["task_id"] for i in (items[0], items[-1])] == ["HumanEval/82", "HumanEval/163"]
    ev = HumanEvalEvaluator()
    canonical = ev.judge_all(items, [i["prompt"] for i in items], [i["canonical_solution"] for i in items])
    assert ev.score(canonical) == 100.0
    broken = ev.judge_all(items[:10], [i["prompt"] for i in items[:10]], ["    return None\n"] * 10)
    assert ev.score(broken) == 0.0
    # A chat model's fenced answer that rewrites the whole function is graded too.
    item = items[0]
    fenced = f"Here you go:\n```python\ndef {item['entry_point']}" + item["prompt"].split(
        f"def {item['entry_point']}", 1)[1] + item["canonical_solution"] + "```\n"
    assert ev.judge_all([item], [item["prompt"]], [fenced])[0].correct
    assert f"check({item['entry_point']})" in build_program(item, item["prompt"], item["canonical_solution"])
