"""The vitals sampler on this machine: real /proc, real statvfs, NVML where it exists."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from support.runs import wait_for

from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.seen_processes import ProcessLog
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.review.samples import latest_samples, summarize_samples
from agent2rl_tui.run import vitals as vitals
from agent2rl_tui.run.vitals import VitalsSampler


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    with RunStore(tmp_path / "run.db", create=True) as store:
        store.create_run(RunRecord(id="r", task="arith", agent="command", base_model="m", base_model_source="/m",
                         budget_s=60, grace_s=1, status="running", created_at=0.0))
    return tmp_path


def test_a_sample_reads_this_machine(run_dir: Path) -> None:
    sampler = VitalsSampler(run_dir)
    child = subprocess.Popen([sys.executable, "-c", "import time; x = bytearray(50_000_000); time.sleep(30)"],
                             start_new_session=True)
    try:
        time.sleep(1.0)
        sampler.agent_pgid = child.pid
        s = sampler.take()
    finally:
        child.kill()
        child.wait()
    assert 0 < s.mem_used < s.mem_total
    assert 0 < s.disk_free <= s.disk_total
    assert s.cpu_pct is not None and 0.0 <= s.cpu_pct <= 100.0
    assert s.agent_procs == 1 and s.agent_rss > 50_000_000
    if sampler.gpus.count() == 0:
        assert s.gpus == [] and s.gpu_note == "no GPU"
    else:
        assert all(0 <= g.util_pct <= 100 and g.mem_total > 0 for g in s.gpus)


def test_samples_go_to_run_db_and_trouble_becomes_one_event(run_dir: Path, monkeypatch) -> None:
    monkeypatch.setattr(vitals, "DISK_ALERT_BYTES", 1 << 62)  # every disk is "nearly full"
    sampler = VitalsSampler(run_dir, interval_s=0.05)
    sampler.agent_pgid = 2_000_000_000  # no such group: the agent's processes are gone
    sampler.start()
    time.sleep(0.6)
    sampler.stop()
    rows = latest_samples(run_dir, limit=100)
    assert len(rows) >= 5
    with RunStore.of_run(run_dir) as store:
        kinds = [e["kind"] for e in store.events()]
    assert kinds.count("disk_full") == 1  # raised once, not at every sample
    assert kinds.count("agent_group_gone") == 1
    summary = summarize_samples(run_dir)
    assert summary["samples"] == len(rows)
    assert summary["agent_procs_max"] == 0
    assert summary["gpus"] == "no GPU" or isinstance(summary["gpus"], dict)


def test_a_process_shorter_than_a_sample_interval_is_in_the_record(run_dir: Path) -> None:
    """A training process that lives three seconds between two five-second samples is seen by
    the process watch and is in the ``agent_processes`` event written at the end."""
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], process_group=0)
    sampler = VitalsSampler(run_dir)  # the defaults: a sample every 5 s, the watch every second
    try:
        sampler.agent_pgid = holder.pid
        sampler.start()  # the first sample is taken now, before the short process exists
        time.sleep(0.5)
        short = subprocess.run([sys.executable, "-c", "import time; time.sleep(3)", "short-train-step"],
                               process_group=holder.pid, check=True)
        assert short.returncode == 0
    finally:
        sampler.stop()
        holder.kill()
        holder.wait()
    with RunStore.of_run(run_dir) as store:
        seen = store.last_event_data("agent_processes")
        samples = latest_samples(run_dir, limit=100)
    assert len(samples) <= 2  # the samples alone could not have seen it
    assert seen is not None
    assert any("short-train-step" in p["cmd"] for p in seen["processes"]), seen


EXECS = ("import os, sys\nsys.stdin.read()  # until the test closes it\n"
         "os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(30)', 'code/grpo.py'])\n")


def wait_for_last_arg(pid: int, arg: str) -> None:
    wait_for(lambda: psutil.Process(pid).cmdline()[-1:] == [arg], timeout=8, interval=0.02, what=f"{pid} to run {arg}")


def seen_after_exec(samples_before: int) -> list[str]:
    """The command lines the process log keeps for a process sampled ``samples_before`` times as
    ``python -c EXECS agent-copy``, then again after it exec'd ``code/grpo.py``."""
    proc = subprocess.Popen([sys.executable, "-c", EXECS, "agent-copy"], stdin=subprocess.PIPE)
    log = ProcessLog()
    try:
        wait_for_last_arg(proc.pid, "agent-copy")  # its command line is empty until its exec is done
        for n in range(samples_before):
            log.update([psutil.Process(proc.pid)], at=100.0 + n)
        proc.stdin.close()
        wait_for_last_arg(proc.pid, "code/grpo.py")
        log.update([psutil.Process(proc.pid)], at=110.0)
        log.update([psutil.Process(proc.pid)], at=111.0)
    finally:
        proc.kill()
        proc.wait()
    return [p["cmd"].rsplit(" ", 1)[-1] + f" {p['first']}-{p['last']}" for p in log.record()["processes"]]


def test_a_stage_first_seen_as_its_forks_copy_is_named_by_the_program_it_runs() -> None:
    """Seen once as the agent's copy (the moment between fork and exec), then as the stage: one
    process, named by the stage, from when it was first seen."""
    assert seen_after_exec(1) == ["code/grpo.py 100.0-111.0"]


def test_a_process_that_ran_a_program_then_exec_d_another_keeps_both() -> None:
    assert sorted(seen_after_exec(2)) == ["agent-copy 100.0-101.0", "code/grpo.py 110.0-111.0"]
