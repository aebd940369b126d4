"""Code revisions: real files, a real watchdog watcher, real git, real grader submissions."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.runs import LiveGrader, cli, make_prepared_run, wait_for

from agent2rl_tui.record.capture import walk
from agent2rl_tui.record.revisions import (
    SnapshotError,
    Snapshotter,
    diff,
    file_at,
    files_at,
    get_revision,
    list_revisions,
    submission_revisions,
)
from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.run.watcher import RevisionWatcher


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    (run / "workspace" / "code").mkdir(parents=True)
    with RunStore(run / "run.db", create=True) as store:
        store.create_run(RunRecord(id="r", task="arith", agent="command", base_model="m", base_model_source="/m",
                         budget_s=60, grace_s=1, status="running", created_at=0.0))
    return run


def code(run_dir: Path) -> Path:
    return run_dir / "workspace" / "code"


def test_edits_renames_and_deletes_are_recorded(run_dir: Path) -> None:
    snap = Snapshotter(run_dir)
    (code(run_dir) / "train.py").write_text("lr = 1e-3\n")
    first, new = snap.snapshot("start")
    assert new and first.seq == 1 and first.paths == [
        {"status": "A", "path": "code/train.py", "added": 1, "removed": 0}]
    again, new = snap.snapshot("watch")
    assert not new and again.seq == 1  # nothing changed, no revision
    (code(run_dir) / "train.py").write_text("lr = 3e-4\nsteps = 10\n")
    edit, _ = snap.snapshot("watch")
    assert (edit.added, edit.removed) == (2, 1)
    (code(run_dir) / "train.py").rename(code(run_dir) / "sft.py")
    moved, _ = snap.snapshot("watch")
    assert moved.paths == [{"status": "R", "old_path": "code/train.py", "path": "code/sft.py",
                            "added": 0, "removed": 0}]
    (code(run_dir) / "sft.py").unlink()
    gone, _ = snap.snapshot("watch")
    assert gone.paths[0]["status"] == "D" and files_at(run_dir, gone) == []
    assert [(r.seq, r.trigger) for r in list_revisions(run_dir)] == [
        (1, "start"), (2, "watch"), (3, "watch"), (4, "watch")]
    assert file_at(run_dir, get_revision(run_dir, 2), "code/train.py") == b"lr = 3e-4\nsteps = 10\n"
    assert get_revision(run_dir, edit.sha[:8]).seq == 2
    text = diff(run_dir, get_revision(run_dir, 1), get_revision(run_dir, 2))
    assert "-lr = 1e-3" in text and "+lr = 3e-4" in text and "+steps = 10" in text


def test_a_reverted_revision_stays_in_history(run_dir: Path) -> None:
    snap = Snapshotter(run_dir)
    f = code(run_dir) / "reward.py"
    f.write_text("def reward(x): return 1.0\n")
    a, _ = snap.snapshot("watch")
    f.write_text("def reward(x): return 100.0  # hack\n")
    b, _ = snap.snapshot("watch")
    f.write_text("def reward(x): return 1.0\n")
    c, _ = snap.snapshot("watch")
    assert len({a.sha, b.sha, c.sha}) == 3
    assert b"hack" in file_at(run_dir, b, "code/reward.py")
    assert file_at(run_dir, c, "code/reward.py") == file_at(run_dir, a, "code/reward.py")


def test_capture_rules_leave_out_artifacts_and_count_them(run_dir: Path) -> None:
    ws = run_dir / "workspace"
    (ws / "output" / "v1").mkdir(parents=True)
    (ws / "output" / "v1" / "config.json").write_text("{}")
    (code(run_dir) / "__pycache__").mkdir()
    (code(run_dir) / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    env = code(run_dir) / "myenv"  # a virtualenv by content, whatever its name
    (env / "lib").mkdir(parents=True)
    (env / "pyvenv.cfg").write_text("home = /usr\n")
    (env / "lib" / "mod.py").write_text("x = 1\n")
    (code(run_dir) / "wandb" / "run-1").mkdir(parents=True)
    (code(run_dir) / "big.log").write_text("x" * 2_000_000)
    (code(run_dir) / "blob.dat").write_bytes(b"\x00\x01binary")
    (code(run_dir) / "weights.safetensors").write_bytes(b"{}")
    (code(run_dir) / ".env").write_text("OPENAI_API_KEY=sk-secret\n")
    (code(run_dir) / "keep.py").write_text("print('kept')\n")
    result = walk(ws)
    assert result.files == ["code/keep.py"]
    assert result.ignored == {"output/": 1, "__pycache__/": 1, "virtualenv/": 1, "wandb/": 1,
                              "over 1,000,000 bytes": 1, "binary": 1, "*.safetensors": 1, ".env": 1}
    rev, _ = Snapshotter(run_dir).snapshot("watch")
    assert files_at(run_dir, rev) == ["code/keep.py"]
    assert rev.ignored["virtualenv/"] == 1


def test_a_file_that_becomes_too_big_leaves_the_snapshot(run_dir: Path) -> None:
    snap = Snapshotter(run_dir)
    log = code(run_dir) / "train.log"
    log.write_text("step 1\n")
    assert files_at(run_dir, snap.snapshot("watch")[0]) == ["code/train.log"]
    log.write_text("step\n" * 300_000)
    rev, new = snap.snapshot("watch")
    assert new and files_at(run_dir, rev) == [] and rev.ignored == {"over 1,000,000 bytes": 1}
    # Left out, and still known: its name, size and hash are on the record.
    content = ("step\n" * 300_000).encode()
    assert rev.too_big == [{"path": "code/train.log", "size": len(content), "sha256": hashlib.sha256(content).hexdigest()}]
    assert get_revision(run_dir, rev.seq).too_big == rev.too_big


def test_a_code_file_over_the_cap_is_named_with_its_size_and_hash_and_links_are_not_followed(run_dir: Path) -> None:
    big = code(run_dir) / "solution.py"
    body = ("ANSWERS = " + repr(list(range(200_000))) + "\n").encode()
    big.write_bytes(body)
    (code(run_dir) / "huge.py").write_bytes(b"")
    os.truncate(code(run_dir) / "huge.py", 300 * 1024 * 1024)  # sparse: over what is hashed
    (code(run_dir) / "to-big.py").symlink_to(big)  # a link stays a link
    rev, _ = Snapshotter(run_dir).snapshot("watch")
    assert rev.too_big == [
        {"path": "code/huge.py", "size": 300 * 1024 * 1024, "sha256": None},
        {"path": "code/solution.py", "size": len(body), "sha256": hashlib.sha256(body).hexdigest()},
    ]
    assert "code/to-big.py" in files_at(run_dir, rev)


def test_a_failed_snapshot_raises_and_the_next_one_recovers(run_dir: Path) -> None:
    snap = Snapshotter(run_dir)
    (code(run_dir) / "a.py").write_text("a = 1\n")
    snap.snapshot("start")
    objects = run_dir / "snapshots.git" / "objects"
    shutil.move(objects, run_dir / "objects.bak")
    objects.write_text("not a folder")  # git cannot write objects: like a full or broken disk
    (code(run_dir) / "a.py").write_text("a = 2\n")
    with pytest.raises(SnapshotError):
        snap.snapshot("watch")
    objects.unlink()
    shutil.move(run_dir / "objects.bak", objects)
    (run_dir / "snapshots.git" / "index.lock").write_text("")  # left by a killed git
    rev, new = snap.snapshot("watch")
    assert new and file_at(run_dir, rev, "code/a.py") == b"a = 2\n"
    with RunStore.of_run(run_dir) as store:
        assert "stale_lock" in [e["kind"] for e in store.events()]


def refuse_revision_rows(run_dir: Path, refuse: bool) -> None:
    """Make run.db refuse new revision rows, as a full disk does, after git has committed."""
    with RunStore.of_run(run_dir) as store:
        if refuse:
            store.conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON revisions "
                               "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
        else:
            store.conn.execute("DROP TRIGGER refuse")


def test_a_commit_the_database_refused_is_recorded_by_the_next_snapshot(run_dir: Path) -> None:
    snap = Snapshotter(run_dir)
    (code(run_dir) / "a.py").write_text("a = 1\n")
    snap.snapshot("start")
    refuse_revision_rows(run_dir, True)
    (code(run_dir) / "b.py").write_text("b = 1\n")
    with pytest.raises(SnapshotError, match="disk is full"):
        snap.snapshot("watch")
    refuse_revision_rows(run_dir, False)
    (code(run_dir) / "c.py").write_text("c = 1\n")
    rev, new = snap.snapshot("watch")
    revs = list_revisions(run_dir)
    assert [r.seq for r in revs] == [1, 2, 3] and new and rev.seq == 3
    assert [c["path"] for c in revs[1].paths] == ["code/b.py"]  # b.py's revision is not lost
    assert [c["path"] for c in revs[2].paths] == ["code/c.py"]
    with RunStore.of_run(run_dir) as store:
        assert "recovered" in [e["kind"] for e in store.events()]


# -- the watcher --------------------------------------------------------------------------

@pytest.fixture
def watcher(run_dir: Path):
    snap = Snapshotter(run_dir)
    snap.snapshot("start")
    w = RevisionWatcher(snap, quiet_s=0.3, max_delay_s=1.5)
    w.start()
    yield w
    w.stop()


def revision_count(run_dir: Path) -> int:
    return len(list_revisions(run_dir))


def test_an_edit_becomes_a_revision_by_the_watcher(run_dir: Path, watcher: RevisionWatcher) -> None:
    # How soon (under a second on an idle machine) is measured by bench/revisions.py.
    (code(run_dir) / "train.py").write_text("print('hi')\n")
    wait_for(lambda: revision_count(run_dir) == 2, timeout=60, what="a revision")
    assert list_revisions(run_dir)[-1].trigger == "watch"


def test_the_watcher_outlives_a_database_that_refuses_writes(run_dir: Path, watcher: RevisionWatcher) -> None:
    refuse_revision_rows(run_dir, True)
    (code(run_dir) / "b.py").write_text("b = 1\n")
    wait_for(lambda: watcher.failures > 0, timeout=5, what="a failed snapshot")
    refuse_revision_rows(run_dir, False)
    (code(run_dir) / "c.py").write_text("c = 1\n")
    wait_for(lambda: revision_count(run_dir) == 3, timeout=10, what="the watcher recording again")
    assert watcher.thread is not None and watcher.thread.is_alive()
    paths = {c["path"] for r in list_revisions(run_dir) for c in r.paths}
    assert {"code/b.py", "code/c.py"} <= paths


def test_sed_over_50_files_is_one_revision(run_dir: Path, watcher: RevisionWatcher) -> None:
    files = [code(run_dir) / f"mod{i:02d}.py" for i in range(50)]
    for f in files:
        f.write_text("LR = 1e-3\n")
    wait_for(lambda: revision_count(run_dir) == 2, timeout=5, what="the files' revision")
    time.sleep(1.0)
    before = revision_count(run_dir)
    subprocess.run(["sed", "-i", "s/1e-3/3e-4/", *map(str, files)], check=True)
    wait_for(lambda: revision_count(run_dir) > before, timeout=5, what="the sed revision")
    time.sleep(1.5)
    revs = list_revisions(run_dir)
    assert len(revs) == before + 1
    assert revs[-1].files_changed == 50 and revs[-1].added == 50 and revs[-1].removed == 50


def test_a_thousand_saves_never_lose_the_final_content(run_dir: Path, watcher: RevisionWatcher) -> None:
    target = code(run_dir) / "state.txt"
    t_end = time.monotonic() + 4.0
    i = 0
    while time.monotonic() < t_end or i < 1000:
        target.write_text(f"save {i}\n")
        i += 1
        time.sleep(0.003)
    final = f"save {i - 1}\n".encode()
    wait_for(lambda: file_at(run_dir, list_revisions(run_dir)[-1], "code/state.txt") == final,
             timeout=5, what="the final content")
    n = revision_count(run_dir) - 1
    assert 2 <= n <= 8  # coalesced: a commit every max_delay_s under continuous writes


def test_a_virtualenv_created_in_the_workspace_adds_no_revision(run_dir: Path, watcher: RevisionWatcher) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(code(run_dir) / "trainenv")], check=True)
    (code(run_dir) / ".venv" / "lib").mkdir(parents=True)
    (code(run_dir) / ".venv" / "lib" / "x.py").write_text("x = 1\n")
    time.sleep(2.5)
    assert revision_count(run_dir) == 1
    assert watcher.ignored_events > 0


def test_a_big_file_adds_no_revision(run_dir: Path, watcher: RevisionWatcher) -> None:
    (code(run_dir) / "dump.txt").write_text("x" * 3_000_000)
    time.sleep(2.0)
    assert revision_count(run_dir) == 1


# -- submissions and the run's own snapshots ---------------------------------------------

@pytest.mark.usefixtures("scripted_grading")  # what is tested happens around the evaluations: graded without torch
def test_each_submission_is_linked_to_the_code_it_was_made_from(tmp_path: Path, tiny_model: Path) -> None:
    run = make_prepared_run(tmp_path, tiny_model)
    grader = LiveGrader(run)
    try:
        ws = grader.workspace
        shutil.copytree(ws / "models" / tiny_model.name, ws / "output" / "v1")
        (ws / "code" / "train.py").write_text("STEPS = 100\n")
        first = grader.client.submit("output/v1").json()
        (ws / "code" / "train.py").write_text("STEPS = 500\n")
        second = grader.client.submit("output/v1").json()
    finally:
        grader.close()
    with RunStore.of_run(run) as store:
        s1, s2 = store.submission(first["submission_id"]), store.submission(second["submission_id"])
    assert s1.revision_seq is not None and s2.revision_seq == s1.revision_seq + 1
    assert file_at(run, get_revision(run, s1.revision_seq), "code/train.py") == b"STEPS = 100\n"
    assert get_revision(run, s2.revision_seq).sha == s2.revision_sha
    old, new = submission_revisions(run, s2.id)
    assert (old.seq, new.seq) == (s1.revision_seq, s2.revision_seq)
    assert "+STEPS = 500" in diff(run, old, new)


AGENT = (
    "import pathlib, time\n"
    "p = pathlib.Path('code')\n"
    "(p / 'a.py').write_text('A = 1\\n')\n"
    "time.sleep(1.5)\n"
    "(p / 'a.py').write_text('A = 2\\n')\n"
    "(p / 'last.py').write_text('written just before exit\\n')\n"
)


@pytest.mark.usefixtures("scripted_grading")  # what is tested happens around the evaluations: graded without torch
@pytest.mark.slow
def test_a_run_records_revisions_up_to_its_final_snapshot(tmp_path: Path, tiny_model: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    proc = cli("run", "start", "--task", "arith", "--agent", "command", "--command",
               f"{sys.executable} {script}", "--read-only-path", str(script),
               "--model", str(tiny_model), "--budget", "60s",
               root=tmp_path / "runs", timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = Path(re.search(r"run folder: (\S+)", proc.stdout).group(1))
    revs = list_revisions(run)
    assert revs[0].trigger == "start"
    last = revs[-1]
    assert file_at(run, last, "code/last.py") == b"written just before exit\n"
    assert file_at(run, last, "code/a.py") == b"A = 2\n"
    assert any(b"A = 1" in file_at(run, r, "code/a.py") for r in revs if "code/a.py" in files_at(run, r))
    listing = cli("run", "revisions", run.name, root=run.parent)
    assert listing.returncode == 0 and "start" in listing.stdout and "code/a.py" in listing.stdout
    shown = cli("run", "diff", run.name, str(last.seq), root=run.parent)
    assert shown.returncode == 0 and "diff --git" in shown.stdout
    cat = cli("run", "cat", run.name, str(last.seq), "code/a.py", root=run.parent)
    assert cat.stdout == "A = 2\n"
    report = (run / "report" / "report.json").read_text()
    assert '"count": ' in report and "capture_rules" in report
