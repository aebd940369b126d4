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

Run: ``python bench/revisions.py [--quick]`` (about two minutes; ``--quick``: 100 files where the
full run has 1,000, 3 saves, 2 s idle, shorter settling: the same steps in about 20 s).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from agent2rl_tui.record.revisions import Snapshotter
from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.store import RunStore

CLK = os.sysconf("SC_CLK_TCK")
READY = "watching"
"""What the watcher process prints once it watches: the changes start then, not after a guess."""


@dataclass(frozen=True)
class Sizes:
    """How much of each step: the full run's, or --quick's (the same steps, smaller)."""

    many_files: int = 1000
    repeats: int = 10
    saves: int = 30
    folder_files: int = 1000
    idle_s: float = 30.0
    settle_s: float = 3.0
    """No new revision for this long: the watcher has caught up (its quiet period is 0.4 s)."""


QUICK = Sizes(many_files=100, repeats=3, saves=3, folder_files=100, idle_s=2.0, settle_s=1.0)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer files, saves and seconds: the same steps, quickly")
    parser.add_argument("--watch", type=Path, help=argparse.SUPPRESS)  # the watcher process (started by main)
    return parser.parse_args()


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process and of its reaped children (git), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime + cutime + cstime) / CLK


def revisions(run_dir: Path) -> list[tuple[int, float]]:
    with RunStore.of_run(run_dir) as store:
        return [(r["seq"], r["at"]) for r in store.conn.execute("SELECT seq, at FROM revisions ORDER BY seq")]


def settle(run_dir: Path, quiet: float) -> None:
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
    print(READY, flush=True)
    while True:
        time.sleep(3600)


def snapshot_cost(run_dir: Path, sizes: Sizes) -> None:
    code = run_dir / "workspace" / "code"
    for n in (20, sizes.many_files):
        for i in range(n):
            (code / f"cost_{i:04d}.py").write_text("".join(f"x_{j} = {j}\n" for j in range(200)))
        snap = Snapshotter(run_dir)
        t = time.perf_counter()
        snap.snapshot("start")
        first = (time.perf_counter() - t) * 1000
        time.sleep(1.5)  # older than a timestamp tick: what a snapshot read is remembered
        same, edited = [], []
        for i in range(sizes.repeats):
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


def make_run(run_dir: Path) -> None:
    """A run folder with a 20-file code/ and its first revision."""
    code = run_dir / "workspace" / "code"
    code.mkdir(parents=True)
    (run_dir / "workspace" / "output").mkdir()
    with RunStore(run_dir / "run.db", create=True) as store:
        store.create_run(RunRecord(id="bench", task="arith", agent="command", base_model="m", base_model_source="/m",
                         budget_s=3600, grace_s=1, status="running", created_at=time.time()))


def start_watcher(run_dir: Path) -> subprocess.Popen:
    """The watcher in its own process, as the supervisor runs it; returned once it watches."""
    proc = subprocess.Popen([sys.executable, __file__, "--watch", str(run_dir)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != READY:
        proc.kill()
        raise RuntimeError(f"the watcher process did not start (exit {proc.wait()})")
    return proc


def save_latency(run_dir: Path, saves: int) -> None:
    """One save a second; how long until the revision of each is recorded."""
    lat = []
    target = run_dir / "workspace" / "code" / "train.py"
    for i in range(saves):
        n = len(revisions(run_dir))
        t_save = time.time()
        target.write_text(f"step = {i}\n" + "# padding\n" * 50)
        while len(revisions(run_dir)) == n:
            if time.time() - t_save > 60:
                raise RuntimeError("no revision a minute after a save: the watcher is not working")
            time.sleep(0.005)
        lat.append(revisions(run_dir)[-1][1] - t_save)
        time.sleep(1.0 - min(1.0, time.time() - t_save))
    lat.sort()
    p95 = lat[int(0.95 * (len(lat) - 1))]
    print(f"save -> revision, 1 save/s, n={len(lat)}: p50 {statistics.median(lat)*1000:.0f} ms, "
          f"p95 {p95*1000:.0f} ms, max {lat[-1]*1000:.0f} ms")


def folder_churn(run_dir: Path, pid: int, sizes: Sizes) -> None:
    """A folder of many files made then removed, where it is captured (code/) and where not (output/)."""
    ws = run_dir / "workspace"
    for where in (ws / "code" / "many", ws / "output" / "many"):
        settle(run_dir, sizes.settle_s)
        n0, c0 = len(revisions(run_dir)), cpu_seconds(pid)
        t = time.perf_counter()
        where.mkdir()
        for i in range(sizes.folder_files):
            (where / f"f{i:04d}.txt").write_text(f"file {i}\n")
        settle(run_dir, sizes.settle_s)
        n1 = len(revisions(run_dir))
        shutil.rmtree(where)
        settle(run_dir, sizes.settle_s)
        n2, c2 = len(revisions(run_dir)), cpu_seconds(pid)
        rel = where.relative_to(ws)
        print(f"{sizes.folder_files:,} files created then deleted in {rel}/: {n1 - n0} revision(s) on create, "
              f"{n2 - n1} on delete; watcher CPU {c2 - c0:.2f} s (wall {time.perf_counter() - t:.1f} s incl. settling)")


def idle_cost(run_dir: Path, pid: int, sizes: Sizes) -> None:
    settle(run_dir, sizes.settle_s)
    c0 = cpu_seconds(pid)
    time.sleep(sizes.idle_s)
    used = cpu_seconds(pid) - c0
    print(f"idle {sizes.idle_s:.0f} s: watcher CPU {used:.3f} s ({used / sizes.idle_s * 100:.2f}% of a core)")


def main(sizes: Sizes) -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout's TERM still stops the watcher
    tmp = Path(tempfile.mkdtemp(prefix="bench-rev-"))
    run_dir = tmp / "run"
    try:
        make_run(run_dir)
        snapshot_cost(run_dir, sizes)
        for i in range(20):
            (run_dir / "workspace" / "code" / f"module_{i}.py").write_text("".join(f"x_{j} = {j}\n" for j in range(200)))
        Snapshotter(run_dir).snapshot("start")
        proc = start_watcher(run_dir)
        try:
            save_latency(run_dir, sizes.saves)
            folder_churn(run_dir, proc.pid, sizes)
            idle_cost(run_dir, proc.pid, sizes)
        finally:
            proc.terminate()
            proc.wait()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    args = parse_args()
    if args.watch:
        watch_forever(args.watch)
    else:
        main(QUICK if args.quick else Sizes())
