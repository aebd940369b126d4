"""Benchmark: the revision watcher's latency and cost (figures printed, nothing asserted).

First, one snapshot's own cost (median ms, in this process) on a workspace of 20 and of
1,020 files: the first snapshot of a Snapshotter, one with nothing changed, one with one file
edited. Then the watcher runs in its own process, as it does in the supervisor, so its CPU
time (and that of the git processes it starts) can be read from /proc. This process makes
the changes:
1. steady edits, one save per second: save-to-revision latency p50/p95;
2. a 1,000-file folder created and then deleted in code/ (captured) and in output/ (not):
   revisions made and watcher CPU seconds;
3. 30 s idle: watcher CPU seconds.

Run: ``python bench/revisions.py`` (about two minutes).
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agent2rl_tui.record.revisions import Snapshotter
from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.store import RunStore

CLK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process and of its reaped children (git), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime + cutime + cstime) / CLK


def revisions(run_dir: Path) -> list[tuple[int, float]]:
    with RunStore.of_run(run_dir) as store:
        return [(r["seq"], r["at"]) for r in store.conn.execute("SELECT seq, at FROM revisions ORDER BY seq")]


def settle(run_dir: Path, quiet: float = 3.0) -> None:
    last = len(revisions(run_dir))
    t = time.monotonic()
    while time.monotonic() - t < quiet:
        time.sleep(0.2)
        n = len(revisions(run_dir))
        if n != last:
            last, t = n, time.monotonic()


def watch_forever(run_dir: Path) -> None:
    from agent2rl_tui.run.watcher import RevisionWatcher

    watcher = RevisionWatcher(Snapshotter(run_dir))
    watcher.start()
    signal.signal(signal.SIGTERM, lambda *a: (watcher.stop(), sys.exit(0)))
    while True:
        time.sleep(3600)


def snapshot_cost(run_dir: Path) -> None:
    code = run_dir / "workspace" / "code"
    for n in (20, 1000):
        for i in range(n):
            (code / f"cost_{i:04d}.py").write_text("".join(f"x_{j} = {j}\n" for j in range(200)))
        snap = Snapshotter(run_dir)
        t = time.perf_counter()
        snap.snapshot("start")
        first = (time.perf_counter() - t) * 1000
        time.sleep(1.5)  # older than a timestamp tick: what a snapshot read is remembered
        same, edited = [], []
        for i in range(10):
            t = time.perf_counter()
            snap.snapshot("watch")
            same.append((time.perf_counter() - t) * 1000)
            (code / "cost_0000.py").write_text(f"v = {i}\n")
            t = time.perf_counter()
            snap.snapshot("watch")
            edited.append((time.perf_counter() - t) * 1000)
        print(f"snapshot of {n:,} files: first {first:.0f} ms, unchanged "
              f"{statistics.median(same):.0f} ms, one file edited {statistics.median(edited):.0f} ms")
    for f in code.glob("cost_*.py"):
        f.unlink()


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-rev-"))
    run_dir = tmp / "run"
    code = run_dir / "workspace" / "code"
    code.mkdir(parents=True)
    (run_dir / "workspace" / "output").mkdir()
    with RunStore(run_dir / "run.db", create=True) as store:
        store.create_run(RunRecord(id="bench", task="arith", agent="command", base_model="m", base_model_source="/m",
                         budget_s=3600, grace_s=1, status="running", created_at=time.time()))
    snapshot_cost(run_dir)
    for i in range(20):
        (code / f"module_{i}.py").write_text("".join(f"x_{j} = {j}\n" for j in range(200)))
    Snapshotter(run_dir).snapshot("start")
    proc = subprocess.Popen([sys.executable, __file__, "--watch", str(run_dir)])
    time.sleep(3.0)  # imports, inotify set-up
    try:
        lat = []
        target = code / "train.py"
        for i in range(30):
            n = len(revisions(run_dir))
            t_save = time.time()
            target.write_text(f"step = {i}\n" + "# padding\n" * 50)
            while len(revisions(run_dir)) == n:
                time.sleep(0.005)
            lat.append(revisions(run_dir)[-1][1] - t_save)
            time.sleep(1.0 - min(1.0, time.time() - t_save))
        lat.sort()
        p95 = lat[int(0.95 * (len(lat) - 1))]
        print(f"save -> revision, 1 save/s, n={len(lat)}: p50 {statistics.median(lat)*1000:.0f} ms, "
              f"p95 {p95*1000:.0f} ms, max {lat[-1]*1000:.0f} ms")

        for where in (code / "thousand", run_dir / "workspace" / "output" / "thousand"):
            settle(run_dir)
            n0, c0 = len(revisions(run_dir)), cpu_seconds(proc.pid)
            t = time.perf_counter()
            where.mkdir()
            for i in range(1000):
                (where / f"f{i:04d}.txt").write_text(f"file {i}\n")
            settle(run_dir)
            n1 = len(revisions(run_dir))
            shutil.rmtree(where)
            settle(run_dir)
            n2, c2 = len(revisions(run_dir)), cpu_seconds(proc.pid)
            rel = where.relative_to(run_dir / "workspace")
            print(f"1,000 files created then deleted in {rel}/: {n1 - n0} revision(s) on create, {n2 - n1} on "
                  f"delete; watcher CPU {c2 - c0:.2f} s (wall {time.perf_counter() - t:.1f} s incl. settling)")

        settle(run_dir)
        c0 = cpu_seconds(proc.pid)
        time.sleep(30)
        print(f"idle 30 s: watcher CPU {cpu_seconds(proc.pid) - c0:.3f} s "
              f"({(cpu_seconds(proc.pid) - c0) / 30 * 100:.2f}% of a core)")
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--watch":
        watch_forever(Path(sys.argv[2]))
    else:
        main()
