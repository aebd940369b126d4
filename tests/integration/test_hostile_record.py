"""The record against a hostile agent (issue 25, class 4): it never stalls and never blows up.

What the agent leaves in its workspace and prints is hostile data. Everything here is real:
FIFOs, sockets, unreadable files, git in snapshots.git, SQLite, the agent's pipes, and one
contained run through the CLI. The readers that could block run in a child process with a
time limit (tests/fixtures/record_child.py), so a reader that hangs fails its test instead
of hanging the suite; as root the child runs without capabilities, as the supervisor of a
normal user does, so a file with mode 000 is unreadable to it.
"""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.paths import FIXTURES
from support.runs import cli, processes_with, wait_for

from agent2rl_tui.record.capture import GIT_REFUSES, UNREADABLE
from agent2rl_tui.record.contamination import build_index, revision_blobs, scan_run
from agent2rl_tui.record.revisions import (
    DIFF_CAP_BYTES,
    END_FLOOR_S,
    Snapshotter,
    diff,
    file_at,
    files_at,
    get_revision,
    list_revisions,
)
from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.record.transcripts import TEXT_LIMIT, TranscriptRecorder
from agent2rl_tui.review.diffs import parse_diff
from agent2rl_tui.run import containment
from agent2rl_tui.run.agent_output import LINE_BYTES, AgentOutput
from agent2rl_tui.run.streams import FORMATS, make_normalizer
from agent2rl_tui.run.watcher import RevisionWatcher

CHILD = FIXTURES / "record_child.py"
AGENT = FIXTURES / "hostile_record_agent.sh"
FIFO = "not a regular file (fifo)"
SOCKET = "not a regular file (socket)"
DEVICE = "not a regular file (device)"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    (run / "workspace" / "code").mkdir(parents=True)
    (run / "workspace" / "output").mkdir()
    (run / "logs").mkdir()
    with RunStore(run / "run.db", create=True) as store:
        store.create_run(RunRecord(id="r", task="arith", agent="command", base_model="m", base_model_source="/m",
                         budget_s=60, grace_s=1, status="running", created_at=0.0))
    return run


def code(run_dir: Path) -> Path:
    return run_dir / "workspace" / "code"


def child(*args: str, timeout: float = 60) -> dict:
    """Run the child reader (without capabilities when we are root); its JSON answer."""
    argv = [sys.executable, str(CHILD), *args]
    if os.geteuid() == 0:
        argv = ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--", *argv]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=True)
    return json.loads(out.stdout)


def snapshot(run_dir: Path, count: int = 1, *extra: str, timeout: float = 60) -> list[dict]:
    return child("snapshot", str(run_dir), str(count), *extra, timeout=timeout)["snapshots"]


def git_fsck(run_dir: Path) -> None:
    subprocess.run(["git", f"--git-dir={run_dir / 'snapshots.git'}", "fsck", "--strict", "--no-dangling"],
                   check=True, capture_output=True)


def odd(name: bytes) -> str:
    """A file name as Python spells it (invalid UTF-8 kept as surrogate escapes)."""
    return os.fsdecode(name)


# -- snapshots -------------------------------------------------------------------------------

def test_a_snapshot_skips_what_it_cannot_read_counts_it_and_captures_the_rest(run_dir: Path) -> None:
    c = code(run_dir)
    (c / "train.py").write_text("lr = 1e-3\n")
    os.mkfifo(c / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(c / "sock"))
    made_device = True
    try:
        os.mknod(c / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        made_device = False
    (c / "secret.py").write_text("hidden = 1\n")
    (c / "secret.py").chmod(0)
    (c / "locked").mkdir()
    (c / "locked" / "inside.py").write_text("x = 1\n")
    (c / "locked").chmod(0)
    os.symlink("loop_b", c / "loop_a")
    os.symlink("loop_a", c / "loop_b")
    os.symlink("/etc/passwd", c / "outside")
    bad = odd(b"bad\xff\xfe.py")
    (c / bad).write_text("invalid utf-8 name\n")
    (c / "two\nlines.py").write_text("newline name\n")
    (c / ".GIT").write_text("git refuses this name\n")
    try:
        first = snapshot(run_dir, timeout=30)[0]
        assert first["new"] and first["seconds"] < 10
        rev = list_revisions(run_dir)[-1]
        assert set(files_at(run_dir, rev)) == {
            "code/train.py", "code/loop_a", "code/loop_b", "code/outside", f"code/{bad}", "code/two\nlines.py"}
        assert file_at(run_dir, rev, "code/outside") == b"/etc/passwd"  # a link, never followed
        assert file_at(run_dir, rev, "code/loop_a") == b"loop_b"
        assert file_at(run_dir, rev, f"code/{bad}") == b"invalid utf-8 name\n"
        assert rev.ignored[FIFO] == 1 and rev.ignored[SOCKET] == 1 and rev.ignored[GIT_REFUSES] == 1
        assert rev.ignored.get(DEVICE) == (1 if made_device else None)
        assert rev.ignored[UNREADABLE] == 2  # the file and the folder with mode 000
        git_fsck(run_dir)

        # Later snapshots still work, and record only what changed.
        (c / "train.py").write_text("lr = 3e-4\n")
        second = snapshot(run_dir, timeout=30)[0]
        assert second["new"] and second["seq"] == rev.seq + 1
        assert [(p["status"], p["path"]) for p in list_revisions(run_dir)[-1].paths] == [("M", "code/train.py")]
    finally:
        sock.close()
        (c / "locked").chmod(0o755)
        (c / "secret.py").chmod(0o644)
    third = snapshot(run_dir, timeout=30)[0]  # readable again: captured
    assert third["new"] and {"code/secret.py", "code/locked/inside.py"} <= set(files_at(run_dir, list_revisions(run_dir)[-1]))


def test_a_folder_that_becomes_unreadable_is_kept_as_it_was_not_deleted(run_dir: Path) -> None:
    c = code(run_dir)
    (c / "lib").mkdir()
    (c / "lib" / "util.py").write_text("def f(): pass\n")
    (c / "train.py").write_text("import lib\n")
    snapshot(run_dir)
    (c / "lib").chmod(0)
    try:
        (c / "train.py").write_text("import lib  # v2\n")
        taken = snapshot(run_dir)[0]
    finally:
        (c / "lib").chmod(0o755)
    rev = list_revisions(run_dir)[-1]
    assert taken["new"] and rev.ignored[UNREADABLE] == 1
    assert [p["path"] for p in rev.paths] == ["code/train.py"]  # lib/util.py is not shown deleted
    assert file_at(run_dir, rev, "code/lib/util.py") == b"def f(): pass\n"


def test_a_file_swapped_for_a_fifo_during_snapshots_never_hangs_them(run_dir: Path) -> None:
    """The swap races the walk and the commit: whenever it lands, no snapshot waits or fails."""
    c, scratch = code(run_dir), run_dir / "workspace" / "output"
    stop = threading.Event()
    swaps = [0]

    def swapper() -> None:
        while not stop.is_set():
            os.mkfifo(scratch / "fifo.tmp")
            os.replace(scratch / "fifo.tmp", c / "flip.py")
            (scratch / "file.tmp").write_text(f"flip = {swaps[0]}\n")
            os.replace(scratch / "file.tmp", c / "flip.py")
            swaps[0] += 1

    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    try:
        taken = snapshot(run_dir, 25, timeout=90)
    finally:
        stop.set()
        thread.join()
    assert swaps[0] > 100
    assert all(t["new"] for t in taken) and max(t["seconds"] for t in taken) < 5
    assert len(list_revisions(run_dir)) == 25
    (c / "flip.py").write_text("flip = 'final'\n")
    assert snapshot(run_dir)[0]["new"]
    assert file_at(run_dir, list_revisions(run_dir)[-1], "code/flip.py") == b"flip = 'final'\n"
    git_fsck(run_dir)


def test_a_file_growing_while_read_is_read_no_further_than_the_cap(run_dir: Path) -> None:
    c = code(run_dir)
    (c / "train.py").write_text("x = 1\n")
    stop = threading.Event()

    def grow() -> None:
        with open(c / "grow.log", "ab") as fh:
            while not stop.is_set() and fh.tell() < 200 * 2**20:
                fh.write(b"step\n" * 10_000)
                fh.flush()

    thread = threading.Thread(target=grow, daemon=True)
    thread.start()
    try:
        taken = snapshot(run_dir, 5, timeout=60)
    finally:
        stop.set()
        thread.join()
    assert all(t["new"] and t["seconds"] < 5 for t in taken)
    rev = list_revisions(run_dir)[-1]
    assert rev.ignored.get("over 1,000,000 bytes") == 1 and "code/grow.log" not in files_at(run_dir, rev)


def test_millions_of_files_cost_a_bounded_walk_and_nothing_is_lost(run_dir: Path) -> None:
    """The walk looks at ``max_entries`` entries at most (here 500 instead of 50,000), and a
    snapshot cut short drops nothing it did not reach."""
    c = code(run_dir)
    (c / "a_train.py").write_text("v = 1\n")
    many = c / "many"
    many.mkdir()
    for i in range(2000):
        (many / f"f{i:04d}.txt").write_text(f"{i}\n")
    first = snapshot(run_dir, 1, "500")[0]
    rev = list_revisions(run_dir)[-1]
    assert first["new"] and rev.ignored["not looked at: over 500 entries"] == 1
    kept = files_at(run_dir, rev)
    assert "code/a_train.py" in kept and 400 < len(kept) <= 500

    # Cut short again: the edit and the new file are recorded, the files it did not reach stay.
    (c / "a_train.py").write_text("v = 2\n")
    (c / "z_new.py").write_text("new\n")
    snapshot(run_dir, 1, "500")
    rev = list_revisions(run_dir)[-1]
    assert [(p["status"], p["path"]) for p in rev.paths] == [("M", "code/a_train.py"), ("A", "code/z_new.py")]
    assert len(files_at(run_dir, rev)) == len(kept) + 1

    # Back under the cap: a whole walk, deletions recorded.
    for f in list(many.iterdir())[:1900]:
        f.unlink()
    snapshot(run_dir, 1, "500")
    rev = list_revisions(run_dir)[-1]
    assert "not looked at: over 500 entries" not in rev.ignored
    assert set(files_at(run_dir, rev)) == {"code/a_train.py", "code/z_new.py"} | {
        f"code/many/{f.name}" for f in many.iterdir()}


def test_a_snapshot_out_of_time_drops_nothing_and_the_run_end_bounds_it(run_dir: Path) -> None:
    c = code(run_dir)
    (c / "a.py").write_text("a = 1\n")
    (c / "b.py").write_text("b = 1\n")
    snap = Snapshotter(run_dir)
    first, _ = snap.snapshot("start")
    (c / "a.py").write_text("a = 2\n")
    started = time.monotonic()
    same, new = Snapshotter(run_dir).snapshot("watch", time_limit_s=0)  # nothing reached in no time
    assert time.monotonic() - started < 2 and not new and same.seq == first.seq
    assert files_at(run_dir, same) == ["code/a.py", "code/b.py"]
    # Long past the run's deadline and grace, a snapshot still gets its floor, and no more.
    with RunStore.of_run(run_dir) as store:
        store.update_run(deadline=time.time() - 3600, grace_s=1)
    started = time.monotonic()
    rev, new = snap.snapshot("final")
    assert new and time.monotonic() - started < END_FLOOR_S
    assert file_at(run_dir, rev, "code/a.py") == b"a = 2\n"


def test_stopping_the_watcher_stops_a_snapshot_in_progress(run_dir: Path) -> None:
    c = code(run_dir)
    os.mkfifo(c / "pipe")
    for d in range(30):
        (c / f"d{d:02d}").mkdir()
        for i in range(1000):
            (c / f"d{d:02d}" / f"f{i:04d}.py").write_text(f"x = {d * 1000 + i}\n")
    snap = Snapshotter(run_dir)
    watcher = RevisionWatcher(snap, periodic_s=0.05)  # a snapshot at once: 30,000 files to read
    watcher.start()
    objects = run_dir / "snapshots.git" / "objects"
    wait_for(lambda: objects.is_dir() and any(p.name not in ("info", "pack") for p in objects.iterdir()),
             timeout=30, interval=0.005, what="the watcher's snapshot to start writing")
    started = time.monotonic()
    watcher.stop()
    assert time.monotonic() - started < 2.0
    assert not watcher.thread.is_alive() and watcher.snapshots_taken == 0  # stopped, nothing committed
    # Never waits behind the stopped one; time enough to read all 30,000 files on a busy machine.
    rev, new = snap.snapshot("final", time_limit_s=600)
    assert new and len(files_at(run_dir, rev)) == 30_000 and rev.ignored[FIFO] == 1


def test_a_huge_diff_is_cut_with_a_note(run_dir: Path) -> None:
    c = code(run_dir)
    snap = Snapshotter(run_dir)
    snap.snapshot("start")
    for i in range(12):  # 12 files of 900 kB: a diff of over 10 MB
        (c / f"dump{i:02d}.txt").write_text(f"line {i}\n" * 100_000)
    rev, _ = snap.snapshot("watch")
    text = diff(run_dir, get_revision(run_dir, 1), rev)
    assert len(text.encode()) < DIFF_CAP_BYTES + 1000
    lines, files = parse_diff(text)
    assert lines[-1].kind == "nonewline" and "cut here" in lines[-1].text
    assert 5 < len(files) < 12 and all(f.added > 0 for f in files[:-1])
    whole = cli("run", "cat", run_dir.name, str(rev.seq), "code/dump11.txt", root=run_dir.parent)
    assert whole.returncode == 0 and whole.stdout == "line 11\n" * 100_000


# -- the agent's output ----------------------------------------------------------------------

def drain(run_dir: Path, fmt: str, program: str) -> AgentOutput:
    proc = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    output = AgentOutput(run_dir, fmt)
    output.attach(proc.stdout, proc.stderr)
    proc.wait(timeout=60)
    output.close()
    return output


def steps(run_dir: Path) -> list[dict]:
    with RunStore.of_run(run_dir) as store:
        return [dict(r) for r in store.conn.execute("SELECT kind, role, text, size FROM steps ORDER BY seq")]


def test_long_lines_are_logged_whole_and_capped_in_the_transcript(run_dir: Path) -> None:
    big = 3 * 2**20 + 5
    drain(run_dir, "claude-stream-json", (
        "import sys\n"
        "print('before', flush=True)\n"
        f"sys.stdout.write('Q' * {big} + '\\n')\n"
        f"sys.stdout.write('E' * {LINE_BYTES} + '\\n')\n"  # exactly the longest line handled whole
        "sys.stdout.write('after\\n')\n"
        f"sys.stderr.write('R' * {big})\n"  # no newline at all: ended by the end of the stream
    ))
    lines = (run_dir / "logs" / "agent.log").read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 6  # the two streams' lines, each whole, in either order
    err = [line.split(b" ", 2)[2] for line in lines[:-1] if line.split(b" ", 2)[1] == b"[stderr]"]
    out = [line.split(b" ", 1)[1] for line in lines[:-1] if line.split(b" ", 2)[1] != b"[stderr]"]
    assert out == [b"before", b"Q" * big, b"E" * LINE_BYTES, b"after"] and err == [b"R" * big]
    assert (run_dir / "logs" / "agent.jsonl").read_bytes() == (
        b"before\n" + b"Q" * big + b"\n" + b"E" * LINE_BYTES + b"\nafter\n")
    every = steps(run_dir)
    got = [s for s in every if s["role"] is None]
    assert [s["kind"] for s in got] == ["raw"] * 4
    assert got[1]["text"].endswith(f"[... a line of {big:,} bytes, cut here to its first 2,000; kept whole in "
                                   "logs/agent.log and logs/agent.jsonl]")
    assert got[1]["text"].startswith("Q" * 2000) and len(got[1]["text"]) < TEXT_LIMIT
    assert got[2]["size"] == LINE_BYTES and "[..." not in got[2]["text"]
    [stderr] = [s for s in every if s["role"] == "stderr"]
    assert stderr["kind"] == "raw" and stderr["text"].startswith("R" * 2000)
    assert stderr["text"].endswith(f"a line of {big:,} bytes, cut here to its first 2,000; kept whole in logs/agent.log]")


def test_deeply_nested_json_lines_never_stop_a_transcript(run_dir: Path) -> None:
    deep = 100_000
    lines = [
        "[" * deep + "]" * deep,
        '{"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "t1", "name": "Bash", '
        '"input": ' + '{"a": ' * deep + "1" + "}" * deep + "}]}}",
        '{"x": ' + '{"a": ' * 900 + "1" + "}" * 900 + "}",  # deep, but under Python's recursion limit
        '{"type": "result", "result": "done", "total_cost_usd": 0.5}',
    ]
    for fmt in FORMATS:
        store_dir = run_dir.parent / f"t-{fmt}"
        (store_dir / "logs").mkdir(parents=True)
        with RunStore(store_dir / "run.db", create=True) as store:
            store.create_run(RunRecord(id=fmt, task="arith", agent="command", base_model="m", base_model_source="/m",
                             budget_s=60, grace_s=1, status="running", created_at=0.0))
        recorder = TranscriptRecorder(store_dir, make_normalizer(fmt))
        started = time.monotonic()
        for i, line in enumerate(lines):
            recorder.stdout_line(line, float(i))
        recorder.close()
        got = steps(store_dir)
        assert time.monotonic() - started < 10
        assert len(got) >= 3, fmt  # every line kept in some form; the stream went on
        assert all(len(s["text"]) <= TEXT_LIMIT for s in got)


def test_an_openhands_event_that_never_closes_is_given_up_not_held() -> None:
    normalizer = make_normalizer("openhands-json")
    normalizer.feed("--JSON Event--", 0.0)
    normalizer.feed("{", 0.0)
    given_up = []
    for i in range(20_000):  # 20 MB of lines that could continue the JSON, never closing it
        given_up += normalizer.feed('"' + "x" * 1000 + '",', float(i))
        if given_up:
            break
    assert given_up and given_up[0].kind == "raw" and given_up[0].text.startswith("--JSON Event--")
    assert i < 10_000  # given up at 8 MiB, not held to the end
    later = normalizer.feed("Conversation ID: abc", 1.0)
    assert [s.kind for s in later] == ["system"]


# -- the contamination scan of the final workspace ---------------------------------------------

QUESTION = ("a farmer has seventeen purple goats and trades each of them for three copper kettles at the "
            "autumn market of the old town")


def test_the_contamination_scan_skips_what_it_cannot_read_and_counts_it(run_dir: Path, tmp_path: Path) -> None:
    evals = tmp_path / "eval.json"
    evals.write_text(json.dumps([{"id": "e1", "question": QUESTION, "answer": "51 kettles"}]))
    train = tmp_path / "train.json"
    train.write_text(json.dumps([{"id": "t1", "question": "what is two plus two", "answer": "4"}]))
    c, out = code(run_dir), run_dir / "workspace" / "output"
    (out / "stolen.txt").write_text(QUESTION.upper() + "\n")
    os.mkfifo(out / "pipe")
    os.mkfifo(c / "pipe.txt")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(c / "sock"))
    (c / "secret.txt").write_text(QUESTION)
    (c / "secret.txt").chmod(0)
    (c / "locked").mkdir()
    (c / "locked").chmod(0)
    os.symlink("loop_b", c / "loop_a")
    os.symlink("loop_a", c / "loop_b")
    home = run_dir / "agent-home"
    home.mkdir()
    os.mkfifo(home / ".bash_history")
    try:
        result = child("scan", str(run_dir), str(evals), str(train), timeout=60)
    finally:
        sock.close()
        (c / "locked").chmod(0o755)
        (c / "secret.txt").chmod(0o644)
    assert result["elapsed"] < 10
    skipped = result["skipped"]
    assert skipped["special"] == 4 and skipped["links"] == 2 and skipped["unreadable"] == 2
    assert skipped["errors"] == 0 and skipped["not_walked"] == 0
    assert [(h["path"], h["items"]) for h in result["hits"]] == [("output/stolen.txt", ["e1"])]

    many = out / "many"
    many.mkdir()
    for i in range(300):
        (many / f"f{i:03d}.txt").write_text("nothing to see\n")
    bounded = child("scan", str(run_dir), str(evals), str(train), "100")
    assert bounded["skipped"]["not_walked"] == 1 and bounded["files_scanned"] <= 100


def test_the_contamination_check_of_many_revisions_grows_with_their_changes(run_dir: Path) -> None:
    """A file kept over many revisions is named with each of them, and what the check holds grows
    with the changes the snapshots stored, not with revisions times files."""
    c = code(run_dir)
    (c / "stolen.txt").write_text(QUESTION + "\n")
    for i in range(200):
        (c / f"lib{i:03d}.py").write_text(f"x = {i}\n")
    snap = Snapshotter(run_dir)
    for i in range(60):
        (c / "train.py").write_text(f"step = {i}\n")
        snap.snapshot("watch")
    (c / "stolen.txt").unlink()
    snap.snapshot("watch")
    revs = revision_blobs(run_dir)
    assert revs.revisions == 61
    assert sum(len(v) for v in revs.where.values()) < 300  # 202 files, 60 edits; 61 x 202 pairs before
    index = build_index([{"id": "e1", "question": QUESTION}], [{"question": "what is two plus two"}])
    result = scan_run(run_dir, index)
    assert [(h.path, h.revisions, h.in_final_workspace) for h in result.hits] == [
        ("code/stolen.txt", list(range(1, 61)), False)]


# -- a whole run -------------------------------------------------------------------------------

UNAVAILABLE = containment.probe()
LINE = 256 * 2**20
"""Big enough that the reader it replaces (a line held whole, several times over) would have
gone past a gigabyte; small enough to be printed well before the deadline."""
PEAK_BOUND = 320 * 2**20
"""A supervisor whose agent printed nothing peaks at about 150 MiB (Python, SQLite, numpy, the
grader client, the contamination index). Reading holds one piece of at most 1 MiB per stream
and the transcript about 8 MiB of pending lines at most, so about twice the baseline is ample;
one copy of the line alone would pass it, and the reader it replaces held several."""


@pytest.mark.usefixtures("scripted_grading")  # what is tested happens around the evaluations: graded without torch
@pytest.mark.slow
@pytest.mark.skipif(UNAVAILABLE is not None, reason=f"containment unavailable: {UNAVAILABLE}")
def test_a_hostile_agent_neither_stalls_nor_blows_up_the_record(tmp_path: Path, tiny_model: Path) -> None:
    budget, grace = 10, 2
    proc = cli("run", "start", "--task", "arith", "--agent", "command", "--command", f"bash {AGENT}",
               "--read-only-path", str(AGENT), "--model", str(tiny_model), "--budget", f"{budget}s",
               "--grace", f"{grace}s", "--env", f"HOSTILE_LINE_BYTES={LINE}", root=tmp_path / "runs", timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = Path(re.search(r"run folder: (\S+)", proc.stdout).group(1))
    with RunStore.of_run(run) as store:
        row = store.run()
        events = {e["kind"]: e for e in store.events()}
        got = [dict(r) for r in store.conn.execute("SELECT kind, role, text FROM steps ORDER BY seq")]

    # It ignored SIGTERM; the run still ended by its deadline plus grace, and a small margin
    # (the final snapshot, the contamination check, stopping the grader, the report).
    assert row.status == "finished" and row.end_reason == "deadline" and "agent_killed" in events
    assert row.ended_at < row.deadline + grace + 20
    assert processes_with(str(AGENT)) == []

    # The FIFO was left out and counted, and revisions after it were recorded, to the end.
    revs = list_revisions(run)
    after = [r for r in revs if r.ignored.get(FIFO)]
    steps_seen = {file_at(run, r, "code/train.py") for r in after if "code/train.py" in files_at(run, r)}
    assert len(after) >= 3 and len(steps_seen) >= 3, [(r.seq, r.trigger, r.ignored) for r in revs]
    final = (run / "workspace" / "code" / "train.py").read_bytes()  # the last edit, to the kill
    assert file_at(run, revs[-1], "code/train.py") == final and revs[-1].ignored[FIFO] == 1
    assert "snapshot_failed" not in events

    # Each huge line is in agent.log whole (one line each), and capped in the transcript.
    sizes = {}
    with open(run / "logs" / "agent.log", "rb") as fh:
        for line in fh:  # two lines of 256 MiB: read line by line, never the file at once
            if len(line) > LINE:
                stream = "stderr" if b" [stderr] " in line[:40] else "stdout"
                sizes[stream] = len(line.rstrip(b"\n").split(b" ", 2 if stream == "stderr" else 1)[-1])
    assert sizes == {"stdout": LINE, "stderr": LINE}
    capped = [s for s in got if f"a line of {LINE:,} bytes" in s["text"]]
    assert [(s["kind"], s["role"]) for s in capped] == [("message", None), ("raw", "stderr")]
    assert all("kept whole in logs/agent.log" in s["text"] and len(s["text"]) < TEXT_LIMIT for s in capped)
    assert "huge lines printed" in [s["text"] for s in got]

    # The supervisor's memory stayed its own.
    peak = json.loads(events["peak_memory"]["data_json"])["vm_hwm_bytes"]
    assert 0 < peak < PEAK_BOUND, f"supervisor peak {peak / 2**20:.0f} MiB"

    # The contamination check ran, and skipped the FIFO.
    assert "contamination" in events
    scan = json.loads((run / "report" / "contamination.json").read_text())
    assert scan["skipped"]["special"] == 1 and scan["skipped"]["errors"] == 0
