"""Run lifecycle with real processes: the deadline, detaching, stopping, a lost supervisor.

The runs are graded by the real grader with a scripted eval worker (grader/scripted_worker.py):
what is tested here happens around evaluations, and a model's would only cost time."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.runs import cli, processes_with, read_report, scripted_env, wait_for

from agent2rl_tui.record.store import ACTIVE_STATUSES, RunStore
from agent2rl_tui.review.index import summarize
from agent2rl_tui.run.containment import probe as containment_probe
from agent2rl_tui.util import procs as procs

pytestmark = pytest.mark.slow

# An agent that ignores SIGTERM, and starts a child that leaves its process group.
STUBBORN = (
    "import os, signal, subprocess, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600.5)'], start_new_session=True)\n"
    "print('stubborn agent up', flush=True)\n"
    "while True: time.sleep(1)\n"
)

SLEEPER = "import time\nprint('sleeping', flush=True)\ntime.sleep(600)\n"

SCRIPTED = scripted_env()
"""``run start``'s environment: every evaluation of the run answered by the scripted worker."""


def run_dir_of(stdout: str) -> Path:
    return Path(re.search(r"run folder: (\S+)", stdout).group(1))


def write_agent(tmp_path: Path, source: str) -> str:
    """The command of an agent kept outside its workspace: --read-only-path lets the contained run read it."""
    script = tmp_path / "agent.py"
    script.write_text(source)
    return f"{sys.executable} {script}"


@pytest.mark.parametrize("contain", ["contained", "--no-contain"])
def test_an_agent_that_ignores_sigterm_is_killed_at_the_deadline(tmp_path: Path, tiny_model: Path, contain: str) -> None:
    command = write_agent(tmp_path, STUBBORN)
    proc = cli("run", "start", "--task", "arith", "--agent", "command", "--command", command,
               "--read-only-path", str(tmp_path / "agent.py"),
               "--model", str(tiny_model), "--budget", "4s", "--grace", "1s",
               *([contain] if contain.startswith("--") else []), root=tmp_path / "runs", env=SCRIPTED, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = run_dir_of(proc.stdout)
    with RunStore.of_run(run_dir) as store:
        run = store.run()
        kinds = [e["kind"] for e in store.events()]
        baseline = store.baseline()
    assert run.config.scripted_worker is not None  # the record says how it was graded
    assert baseline is not None and (baseline.score, baseline.engine) == (10.0, "scripted")
    assert run.status == "finished"
    assert run.end_reason == "deadline"
    assert run.agent_exit_code == -signal.SIGKILL
    assert "agent_killed" in kinds
    # Its setsid child dies with the sandbox's namespace; without one, the supervisor finds it.
    assert ("strays_killed" in kinds) is (contain == "--no-contain")
    report = read_report(run_dir)
    if contain == "--no-contain":  # and a reviewer sees the run was not contained, everywhere
        assert "--no-contain" in proc.stderr and "warning: this run is not contained" in proc.stdout
        assert report["containment"]["contained"] is False and report["containment"]["requested"] is False
        md = (run_dir / "report" / "report.md").read_text()
        assert "containment: **NOT CONTAINED**: started with --no-contain" in md
        assert summarize(run_dir).flags == "not contained · without a valid submission"  # it never submitted
        assert "not contained" in cli("runs", root=tmp_path / "runs").stdout
        assert not (run_dir / "agent-home").exists()
    else:
        assert report["containment"]["contained"] is (containment_probe() is None)
    # It outlived SIGTERM by the grace period, then SIGKILL ended it (no wait for anything else).
    assert run.agent_ended_at >= run.deadline + 1
    assert run.agent_ended_at < run.deadline + 60
    assert processes_with("time.sleep(600.5)") == []  # the child that left the group (setsid) is gone too
    assert "stubborn agent up" in (run_dir / "logs" / "agent.log").read_text()
    assert read_report(run_dir)["end_reason"] == "deadline"


def test_a_detached_run_survives_the_process_that_started_it(tmp_path: Path, tiny_model: Path) -> None:
    # A foreground `run start` in its own session, killed outright (a closed terminal, a
    # dropped ssh session): the supervisor must go on and close the run properly.
    command = write_agent(tmp_path, "import time\nprint('working', flush=True)\ntime.sleep(3)\n")
    starter = subprocess.Popen(
        [sys.executable, "-m", "agent2rl_tui.cli", "--root", str(tmp_path / "runs"), "run", "start",
         "--task", "arith", "--agent", "command", "--command", command,
         "--read-only-path", str(tmp_path / "agent.py"), "--model", str(tiny_model),
         "--budget", "60s"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True, env=SCRIPTED,
    )
    first = starter.stdout.readline() + starter.stdout.readline()
    run_dir = run_dir_of(first)
    os.killpg(starter.pid, signal.SIGKILL)
    starter.wait()
    status = wait_for(lambda: (s := summarize(run_dir).status) not in ACTIVE_STATUSES and s,
                      timeout=120, what="the run to end")
    assert status == "finished"
    with RunStore.of_run(run_dir) as store:
        run = store.run()
    assert run.end_reason == "agent_exited" and run.agent_exit_code == 0


def test_detach_returns_at_once_and_stop_ends_the_run(tmp_path: Path, tiny_model: Path) -> None:
    command = write_agent(tmp_path, SLEEPER)
    proc = cli("run", "start", "--task", "arith", "--agent", "command", "--command", command,
               "--read-only-path", str(tmp_path / "agent.py"),
               # a grace long enough for a loaded machine: the sleeper ends at SIGTERM, nothing waits it out
               "--model", str(tiny_model), "--budget", "10m", "--grace", "20s", "--detach",
               root=tmp_path / "runs", env=SCRIPTED, timeout=60)
    assert proc.returncode == 0, proc.stderr
    run_dir = run_dir_of(proc.stdout)
    assert summarize(run_dir).status in ACTIVE_STATUSES  # it returned while the run goes on
    wait_for(lambda: summarize(run_dir).status == "running", timeout=300, what="the agent to start")
    # Its own code running (not only its sandbox starting, which ignores SIGTERM until it has
    # handed over): on a loaded machine a stop sent before that is SIGKILL's, after the grace.
    log = run_dir / "logs" / "agent.log"
    wait_for(lambda: log.exists() and "sleeping" in log.read_text(errors="replace"), timeout=120,
             what="the sleeper to start")
    stop = cli("run", "stop", run_dir.name, "--wait", "60", root=tmp_path / "runs")
    assert stop.returncode == 0
    assert f"{run_dir.name}: stopped" in stop.stdout
    with RunStore.of_run(run_dir) as store:
        run = store.run()
    assert run.status == "stopped" and run.end_reason == "stopped"
    assert run.agent_exit_code == -signal.SIGTERM  # the sleeper obeys SIGTERM
    assert read_report(run_dir)["status"] == "stopped"


def test_a_run_whose_supervisor_dies_is_lost_and_reconciled(tmp_path: Path, tiny_model: Path) -> None:
    command = write_agent(tmp_path, SLEEPER)
    proc = cli("run", "start", "--task", "arith", "--agent", "command", "--command", command,
               "--read-only-path", str(tmp_path / "agent.py"),
               "--model", str(tiny_model), "--budget", "10m", "--detach", root=tmp_path / "runs", env=SCRIPTED, timeout=60)
    run_dir = run_dir_of(proc.stdout)
    wait_for(lambda: summarize(run_dir).status == "running", timeout=300, what="the agent to start")
    with RunStore.of_run(run_dir) as store:
        run = store.run()
    os.kill(run.supervisor_pid, signal.SIGKILL)
    wait_for(lambda: not procs.pid_alive(run.supervisor_pid), timeout=10, what="the supervisor to die")
    stop = cli("run", "stop", run_dir.name, root=tmp_path / "runs")
    assert f"{run_dir.name}: lost" in stop.stdout
    assert summarize(run_dir).status == "lost"
    wait_for(lambda: not procs.group_alive(run.agent_pid), timeout=10, what="the orphaned agent to end")
    assert not procs.group_alive(run.grader_pid)
    assert read_report(run_dir)["status"] == "lost"


# An agent with a child in its group, both asleep: what a kill -9 of the supervisor leaves behind.
FAMILY = (
    "import subprocess, sys, time\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600.25)'])\n"
    "print('family up', flush=True)\n"
    "time.sleep(600)\n"
)


@pytest.mark.parametrize("contain", ["contained", "--no-contain"])
def test_a_supervisor_killed_hard_takes_every_process_of_its_run_and_the_record_says_why(
        tmp_path: Path, tiny_model: Path, contain: str) -> None:
    """Issue 41 (1): a coin run (the train-environment service) of a metered agent (the meter),
    graded by the grader and its eval worker; ``kill -9`` of its supervisor and nobody closes
    the record: within seconds no process of the run is left, contained or not, and run.db
    reads ``lost`` with when and why, written by the run's guard."""
    if contain == "contained" and containment_probe() is not None:
        pytest.skip(f"containment unavailable: {containment_probe()}")
    program = tmp_path / "agent.py"
    program.write_text(FAMILY)
    profiles = tmp_path / "agents.toml"
    profiles.write_text(f"""[agents.family]
command = ["{sys.executable}", "{program}"]
stream_format = "text"
required_env = [["ANTHROPIC_API_KEY"]]
env_pass = ["ANTHROPIC_API_KEY"]
read_only_paths = ["{tmp_path}"]
gateway = "anthropic"
""")
    proc = cli("run", "start", "--task", "coin", "--agent", "family", "--profiles", str(profiles), "--model",
               str(tiny_model), "--budget", "10m", "--detach", "--driver-url", "http://127.0.0.1:9/",
               *([contain] if contain.startswith("--") else []), root=tmp_path / "runs",
               env={**SCRIPTED, "ANTHROPIC_API_KEY": "sk-family"}, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = run_dir_of(proc.stdout)
    wait_for(lambda: (run_dir / "logs" / "agent.log").exists() and "family up" in (run_dir / "logs" / "agent.log")
             .read_text(), timeout=300, what="the agent and its child")
    with RunStore.of_run(run_dir) as store:
        run = store.run()
    family = procs.descendants(run.supervisor_pid)  # grader, eval worker, meter, service, agent, guard
    commands = " ".join(" ".join(psutil_cmdline(p)) for p in family)
    for part in ("agent2rl_tui.grader.server", "agent2rl_tui.llm.meter", "agent2rl_tui.trainenv",
                 "agent2rl_tui.run.guard", "time.sleep(600.25)"):
        assert part in commands, (part, commands)
    os.kill(run.supervisor_pid, signal.SIGKILL)
    try:
        wait_for(lambda: not [p for p in family if procs.pid_alive(p)], timeout=60,
                 what="every process of the run to end by itself")
    finally:  # a failure leaves nothing running either
        for pid in family:
            if procs.pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
    with RunStore.of_run(run_dir) as store:
        closed = store.run()
    assert closed.status == "lost"  # stored, not only how a reader sees a silent run
    assert f"the supervisor (pid {run.supervisor_pid}) died at" in closed.error
    assert "the run's guard ended what it had started" in closed.error, closed.error
    assert read_report(run_dir)["status"] == "lost"


def psutil_cmdline(pid: int) -> list[str]:
    import psutil

    try:
        return psutil.Process(pid).cmdline()
    except psutil.Error:
        return []


# An agent that makes a model, waits for the test to kill the grader, then submits.
SUBMIT_AFTER_GO = (
    "import json, os, pathlib, shutil, time, urllib.request\n"
    "base = next(pathlib.Path('models').iterdir())\n"
    "shutil.copytree(base, 'output/v1')\n"
    "for p in pathlib.Path('output/v1').rglob('*'): p.chmod(0o644)\n"
    "print('ready', flush=True)\n"
    "while not pathlib.Path('go').exists(): time.sleep(0.1)\n"
    "req = urllib.request.Request(os.environ['GRADING_SERVER_URL'] + '/submit',\n"
    "    data=json.dumps({'model_path': 'output/v1'}).encode(), headers={'Content-Type': 'application/json'})\n"
    "print(urllib.request.urlopen(req, timeout=120).read().decode(), flush=True)\n"
)


def test_a_grader_that_dies_is_restarted_on_the_same_url(tmp_path: Path, tiny_model: Path) -> None:
    command = write_agent(tmp_path, SUBMIT_AFTER_GO)
    proc = cli("run", "start", "--task", "arith", "--agent", "command", "--command", command,
               "--read-only-path", str(tmp_path / "agent.py"),
               "--model", str(tiny_model), "--budget", "5m", "--detach", root=tmp_path / "runs", env=SCRIPTED, timeout=60)
    run = run_dir_of(proc.stdout)

    def agent_ready() -> int | None:
        with RunStore.of_run(run) as store:
            row = store.run()
        log = run / "logs" / "agent.log"
        return row.grader_pid if log.exists() and "ready" in log.read_text() else None

    grader_pid = wait_for(agent_ready, timeout=300, what="the agent to be ready")
    os.kill(grader_pid, signal.SIGKILL)
    wait_for(lambda: RunStore.of_run(run).run().grader_pid != grader_pid, timeout=30,
             what="a new grader")
    (run / "workspace" / "go").write_text("")
    wait_for(lambda: summarize(run).status not in ACTIVE_STATUSES, timeout=180, what="the run to end")
    report = read_report(run)
    assert report["status"] == "finished"
    assert [s["status"] for s in report["submissions"]] == ["scored"]
    assert "grader_restarted" in [w["kind"] for w in report["warnings"]]
    assert '"status":"scored"' in (run / "logs" / "agent.log").read_text()  # the agent's answer


def test_reaping_orphans_leaves_our_own_childrens_exit_codes_alone() -> None:
    own = subprocess.Popen([sys.executable, "-c", "raise SystemExit(7)"])  # like the watcher's git
    other = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], start_new_session=True)
    def zombies() -> bool:
        table = procs.process_table()
        return all(table.get(p, ("",))[0] == procs.ZOMBIE for p in (own.pid, other.pid))

    wait_for(zombies, timeout=10, what="both children to exit")
    procs.reap_zombie_children(keep=set())
    assert own.wait(timeout=5) == 7  # not reaped behind its Popen's back (that would read as 0)
    assert other.pid not in procs.process_table()  # another session's zombie (an orphan's) is reaped
    other.returncode = 3  # reaped above; tell Popen so it does not wait again


ORPHAN = """
import subprocess, sys, threading, time
import psutil
from agent2rl_tui.util import procs

assert procs.become_subreaper()
def spawn():  # from a thread of ours, as the watcher starts its git: listed under that thread
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
box = []
started = threading.Thread(target=lambda: box.append(spawn()))
started.start()
started.join()
# a child that starts a grandchild in a session of its own and exits: the grandchild is re-parented to us
out = subprocess.run([sys.executable, "-c", "import subprocess, sys; print(subprocess.Popen([sys.executable, "
                      "'-c', 'import time; time.sleep(0.3)'], start_new_session=True).pid)"],
                     capture_output=True, text=True, check=True)
orphan = int(out.stdout)
for _ in range(600):
    try:
        if psutil.Process(orphan).status() == procs.ZOMBIE:
            break
    except psutil.NoSuchProcess:
        raise SystemExit("the orphan was reaped by someone else")
    time.sleep(0.05)
listed = {p.pid for p in procs._children()}
procs.reap_zombie_children(keep=set())
print(orphan in listed, box[0].pid in listed, psutil.pid_exists(orphan), box[0].poll())
box[0].kill()
"""


def test_an_orphan_re_parented_to_the_supervisor_is_found_and_reaped() -> None:
    """The supervisor finds its children through each thread's /proc children list (not by reading every
    process on the machine): an orphan of the agent, re-parented to it as subreaper, is found and reaped,
    and a child one of its threads started is found and left running."""
    out = subprocess.run([sys.executable, "-c", ORPHAN], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "False", "None"]



SUBMITTER = """
import json, os, pathlib, shutil, time, urllib.request
shutil.copytree(os.environ["MODEL_PATH"], "output/v1")

def submit(wait):
    req = urllib.request.Request(os.environ["GRADING_SERVER_URL"] + "/submit" + ("" if wait else "?wait=0"),
                                 data=json.dumps({"model_path": "output/v1"}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())

print("first", submit(True)["status"], flush=True)
while not pathlib.Path("go").exists():
    time.sleep(0.1)
for _ in range(3):
    submit(False)
print("submitted", flush=True)
time.sleep(600)
"""


def test_evaluations_that_never_finish_cannot_hold_a_run_past_a_second_stop(tmp_path: Path, tiny_model: Path) -> None:
    """The grader's eval workers frozen (as by weights that never finish loading): a second stop
    cuts the wait for them, what was not scored is failed as run_ended, what was scored stays
    scored, and --keep-submissions keeps the grader's copy of what it scored."""
    import psutil

    command = write_agent(tmp_path, SUBMITTER)
    proc = cli("run", "start", "--task", "arith", "--agent", "command", "--command", command,
               "--read-only-path", str(tmp_path / "agent.py"), "--keep-submissions",
               "--model", str(tiny_model), "--budget", "10m", "--grace", "5s", "--detach",
               root=tmp_path / "runs", env=SCRIPTED, timeout=60)
    assert proc.returncode == 0, proc.stderr
    run_dir = run_dir_of(proc.stdout)
    log, supervisor_log = run_dir / "logs" / "agent.log", run_dir / "logs" / "supervisor.log"
    wait_for(lambda: log.exists() and "first scored" in log.read_text(), timeout=240, what="the first score")
    with RunStore.of_run(run_dir) as store:
        pid, grader_pid = store.run().supervisor_pid, store.run().grader_pid
    frozen = psutil.Process(grader_pid).children(recursive=True)
    assert frozen, "the grader has its eval worker"
    for p in frozen:
        p.suspend()
    (run_dir / "workspace" / "go").touch()
    wait_for(lambda: "submitted" in log.read_text(), timeout=300, what="three more submissions")
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: "waiting for 3 submission(s)" in supervisor_log.read_text(), timeout=300, what="the drain")
    os.kill(pid, signal.SIGTERM)  # the second stop: no more waiting
    wait_for(lambda: summarize(run_dir).status not in ACTIVE_STATUSES, timeout=300, what="the run to end")
    with RunStore.of_run(run_dir) as store:
        subs = {s.id: s for s in store.submissions(kind="agent")}
        run = store.run()
    assert run.status == "stopped"
    assert subs[1].status == "scored"
    assert [(subs[i].status, subs[i].error_code, subs[i].score) for i in (2, 3, 4)] == [("failed", "run_ended", None)] * 3
    assert (run_dir / "intake" / "1" / "model.safetensors").is_file()  # kept: --keep-submissions
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in frozen)  # none left behind
    report = read_report(run_dir)
    assert [s["status"] for s in report["submissions"]] == ["scored", "failed", "failed", "failed"]


def test_a_run_started_beside_another_says_so_and_both_records_note_the_overlap(tmp_path: Path,
                                                                                  tiny_model: Path) -> None:
    """Issue 41 (5): two runs on one box share its cores: the second says so when it starts, and
    both records (and so both reports) note the overlap, naming the other run and what is shared."""
    command = write_agent(tmp_path, SLEEPER)
    runs = []
    for root in (tmp_path / "first-root", tmp_path / "second-root"):  # two roots: found all the same
        proc = cli("run", "start", "--task", "arith", "--agent", "command", "--command", command,
                   "--read-only-path", str(tmp_path / "agent.py"), "--model", str(tiny_model), "--budget", "10m",
                   "--grace", "2s", "--detach", root=root, env=SCRIPTED, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        runs.append((run_dir_of(proc.stdout), proc.stderr))
        wait_for(lambda: summarize(runs[-1][0]).status == "running", timeout=300, what="the run to start")
    (first, first_err), (second, second_err) = runs
    assert first.name not in first_err
    assert f"warning: run {first.name} is active on this machine too; the two share the CPU cores" in second_err

    def overlap_of(run: Path) -> list[dict]:
        with RunStore.of_run(run) as store:
            return [e for e in store.events() if e["kind"] == "overlap"]

    def notes(run: Path, other: Path) -> bool:  # runs of other tests may overlap as well, and be noted first
        return any(other.name in e["message"] for e in overlap_of(run))

    wait_for(lambda: notes(second, first) and notes(first, second), timeout=60, what="both records to note it")
    for run in (second, first):
        assert cli("run", "stop", str(run), timeout=120).returncode == 0
    for run, other in ((first, second), (second, first)):
        wait_for(lambda run=run: summarize(run).status not in ACTIVE_STATUSES, timeout=120, what="the run to end")
        warnings = read_report(run)["warnings"]
        assert any(w["kind"] == "overlap" and other.name in w["message"] for w in warnings), warnings


# An agent that submits one checkpoint and leaves another it never submitted.
ONE_AND_A_SPARE = (
    "import json, os, pathlib, shutil, urllib.request\n"
    "base = next(pathlib.Path('models').iterdir())\n"
    "for name in ('v1', 'spare'):\n"
    "    shutil.copytree(base, f'output/{name}', copy_function=shutil.copyfile)\n"
    "req = urllib.request.Request(os.environ['GRADING_SERVER_URL'] + '/submit',\n"
    "    data=json.dumps({'model_path': 'output/v1'}).encode(), headers={'Content-Type': 'application/json'})\n"
    "print(urllib.request.urlopen(req, timeout=120).read().decode(), flush=True)\n"
)


def test_a_checkpoint_left_behind_is_graded_after_the_run_and_reported_apart(tmp_path: Path,
                                                                             tiny_model: Path) -> None:
    """Issue 41 (2): `run grade RUN PATH` grades a checkpoint of an ended run with the run's own
    grader; it is recorded and reported as graded after the run, never among its submissions nor
    its best."""
    command = write_agent(tmp_path, ONE_AND_A_SPARE)
    proc = cli("run", "start", "--task", "arith", "--agent", "command", "--command", command,
               "--read-only-path", str(tmp_path / "agent.py"), "--model", str(tiny_model), "--budget", "5m",
               "--grace", "2s", root=tmp_path / "runs", env=SCRIPTED, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = run_dir_of(proc.stdout)
    before = read_report(run_dir)
    assert [s["submission_id"] for s in before["submissions"]] == [1] and "graded_after" not in before

    graded = cli("run", "grade", run_dir.name, "output/spare", root=tmp_path / "runs", timeout=300)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert "output/spare: scored, score 50.00" in graded.stdout and "graded after the run" in graded.stdout
    with RunStore.of_run(run_dir) as store:
        after = store.submissions(kind="after")
        agent = store.submissions(kind="agent")
        run = store.run()
    assert [(s.id, s.status, s.model_path) for s in after] == [(2, "scored", "output/spare")]
    assert [s.id for s in agent] == [1] and run.status == "finished"  # the run's own record unchanged
    report = read_report(run_dir)
    assert [s["submission_id"] for s in report["submissions"]] == [1] and report["best"]["submission_id"] == 1
    assert [(s["submission_id"], s["score"]) for s in report["graded_after"]] == [(2, 50.0)]
    assert "## Graded after the run (1)" in (run_dir / "report" / "report.md").read_text()
    html = cli("report", str(run_dir), "--html", timeout=120)
    assert html.returncode == 0 and "Graded after the run (1)" in (run_dir / "report" / "report.html").read_text()

    outside = cli("run", "grade", run_dir.name, "/etc", root=tmp_path / "runs", timeout=300)
    assert outside.returncode == 1 and "was refused" in outside.stderr, outside.stdout + outside.stderr
