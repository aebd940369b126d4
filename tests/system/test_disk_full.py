"""A run on a disk its agent fills (issue 41, class 2): the disk named, nothing lost.

The run root is a real 8 MB tmpfs, mounted in a mount namespace of the test's own (``unshare
-m`` as root, else ``unshare -Urm`` in a user namespace), so the grader, the supervisor, the
guard and the agent all meet a real ENOSPC. The agent submits once, then fills the disk, prints
200 lines, copies a checkpoint whose grader copy cannot be taken, and submits it.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from support.skip_policy import missing

AGENT = r"""
import json, os, pathlib, shutil, time, urllib.error, urllib.request
def submit(path):
    req = urllib.request.Request(os.environ["GRADING_SERVER_URL"] + "/submit",
                                 data=json.dumps({"model_path": path}).encode(), headers={"Content-Type": "application/json"})
    try:
        print("answer", urllib.request.urlopen(req, timeout=120).read().decode(), flush=True)
    except urllib.error.HTTPError as exc:
        print("refused", exc.code, exc.read().decode(), flush=True)
base = next(pathlib.Path("models").iterdir())
shutil.copytree(base, "output/v1")
submit("output/v1")
shutil.copytree(base, "output/v2")  # a checkpoint the agent keeps
try:
    with open("output/filler.bin", "wb") as fh:
        while True:
            fh.write(b"x" * 65536)
            fh.flush()
except OSError as exc:
    print("filled:", exc.strerror, flush=True)
for i in range(200):
    print("line", i, "x" * 200, flush=True)
submit("output/v2")
print("agent done", flush=True)
"""

SCRIPT = """
set -e
mount -t tmpfs -o size=8m tmpfs "$ROOT"
"$PY" -m agent2rl_tui.cli --root "$ROOT" run start --task arith --agent command --command "$PY $AGENT_FILE" \
  --read-only-path "$HERE" --model "$MODEL" --budget 1m --grace 2s --no-contain > "$HERE/start.out" 2>&1 || true
cp -r "$ROOT"/2* "$HERE/copy"
"$PY" -m agent2rl_tui.cli --root "$ROOT" run stop "$(basename "$ROOT"/2*)" > "$HERE/stop.out" 2>&1 || true
"""


def namespace() -> list[str]:
    """A way to mount a tmpfs in a namespace of our own, or a skip that says how to get one."""
    for argv in (["unshare", "-m"], ["unshare", "-Urm"]):
        if shutil.which("unshare") and subprocess.run([*argv, "mount", "-t", "tmpfs", "tmpfs", "/mnt"],
                                                      capture_output=True).returncode == 0:
            return argv
    missing("a mount namespace (unshare -m as root, or unshare -Urm)",
            "run the suite as root, or allow user namespaces: sysctl -w kernel.unprivileged_userns_clone=1")


def test_an_agent_that_fills_the_disk_loses_nothing_and_the_disk_is_named(tmp_path: Path, tiny_model: Path) -> None:
    argv = namespace()
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "agent.py").write_text(AGENT)
    env = {**os.environ, "ROOT": str(root), "PY": sys.executable, "AGENT_FILE": str(tmp_path / "agent.py"),
           "HERE": str(tmp_path), "MODEL": str(tiny_model), "HF_HUB_OFFLINE": "1",
           "AGENT2RL_SCRIPTED_WORKER": json.dumps({"scores": {"0": 10.0}, "default_score": 50.0})}
    subprocess.run([*argv, "bash", "-c", SCRIPT], env=env, timeout=600, check=True)
    run = tmp_path / "copy"
    started = (tmp_path / "start.out").read_text()
    assert "run folder:" in started, started

    agent_log = (run / "logs" / "agent.log").read_text()
    assert "filled: No space left on device" in agent_log
    assert sum(f"line {i} " in agent_log for i in range(200)) == 200  # every line the agent printed
    assert "agent done" in agent_log
    refused = next(line for line in agent_log.splitlines() if "refused" in line)
    assert "refused 507" in refused and "disk_full" in refused and f"the disk under {root} is full" in refused

    supervisor_log = (run / "logs" / "supervisor.log").read_text()
    assert "Traceback" not in supervisor_log, supervisor_log[-3000:]
    assert supervisor_log.count("transcript steps wait in memory") == 1  # said once, not at every retry
    assert supervisor_log.count("the heartbeat cannot be written") <= 1

    with sqlite3.connect(run / "run.db") as db:
        subs = db.execute("SELECT id, status, error_code FROM submissions ORDER BY id").fetchall()
        status, error = db.execute("SELECT status, error FROM run").fetchone()
        steps = db.execute("SELECT COUNT(*) FROM steps WHERE text LIKE 'line %'").fetchone()[0]
    assert subs == [(0, "scored", None), (1, "scored", None), (2, "rejected", "disk_full")]  # the refusal recorded
    assert steps == 200  # the transcript too, once there was room
    assert status in ("finished", "failed") and (status == "finished" or f"the disk under {root}" in error), error
    assert (run / "workspace" / "output" / "v2" / "config.json").exists()  # the agent's checkpoint kept
    assert json.loads((run / "report" / "report.json").read_text())["status"] == status
    stop = (tmp_path / "stop.out").read_text()
    assert "Traceback" not in stop and f": {status}" in stop, stop
