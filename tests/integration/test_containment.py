"""Containment through the real CLI: a hostile agent in a real run, and a run without it.

The hostile agent (tests/fixtures/escape_probe.py) tries every read and write outside its
workspace that would let it see the eval split or change the record; then it copies three
GSM8K test items into its own train file, as an agent that downloaded the test split would.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import uuid
from pathlib import Path

import pytest
from support.paths import FIXTURES, REPO, SHARED_DATA
from support.runs import cli, processes_with

from agent2rl_tui.record.root import ROOTS_FILE_ENV, remember_root
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.review.index import summarize
from agent2rl_tui.run import containment
from agent2rl_tui.run.profiles import ProfileError, load_profiles
from agent2rl_tui.tasks.registry import read_jsonl

pytestmark = pytest.mark.slow
PROBE = FIXTURES / "escape_probe.py"
UNAVAILABLE = containment.probe()
needs_bwrap = pytest.mark.skipif(UNAVAILABLE is not None, reason=f"containment unavailable: {UNAVAILABLE}")

HOSTILE_AGENT = r"""
set -u
printf '%s' "$PROBE_SCRIPT" > code/probe.py
"$PROBE_PY" code/probe.py
cp -r "models/$BASE_MODEL" output/v1
"$PROBE_PY" -c '
import json, os, urllib.request
req = urllib.request.Request(os.environ["GRADING_SERVER_URL"] + "/submit", method="POST",
                             data=json.dumps({"model_path": "output/v1"}).encode(),
                             headers={"Content-Type": "application/json"})
print("submitted:", json.load(urllib.request.urlopen(req, timeout=600))["status"], flush=True)
'
printf '%s' "$PROBE_STOLEN" > code/extra_train.jsonl
printf '%s' "$PROBE_STOLEN" > "$HOME/stash.jsonl"
setsid sleep 7531 &
echo "hostile agent done"
"""


def run_dir_of(stdout: str) -> Path:
    return Path(re.search(r"run folder: (\S+)", stdout).group(1))


def snapshot_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.usefixtures("scripted_grading")  # what is tested happens around the evaluations: graded without torch
@needs_bwrap
def test_a_contained_agent_cannot_reach_the_eval_split_or_the_record(
        prepared_data: Path, tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        request: pytest.FixtureRequest) -> None:
    runs = tmp_path / "runs"
    other = runs / "20200101T000000Z-gsm8k-other"  # a sibling run with its eval answers
    (other / "evals" / "0").mkdir(parents=True)
    (other / "evals" / "0" / "results.jsonl").write_text('{"gold": "42"}\n')
    # A run under another root this machine made runs under: nowhere near this run's folder, and
    # outside /tmp and $HOME (the sandbox has its own of those anyway): under the checkout's build/.
    monkeypatch.setenv(ROOTS_FILE_ENV, str(tmp_path / "state" / "roots"))
    elsewhere = REPO / "build" / f"roots-{uuid.uuid4().hex}" / "runs"
    request.addfinalizer(lambda: shutil.rmtree(elsewhere.parent, ignore_errors=True))
    far = elsewhere / "20200101T000000Z-gsm8k-far"
    (far / "evals" / "0").mkdir(parents=True)
    (far / "evals" / "0" / "results.jsonl").write_text('{"gold": "43"}\n')
    remember_root(elsewhere)
    cache_before = snapshot_of(prepared_data)
    package = Path(containment.__file__).resolve().parents[1]
    home_file = Path.home() / f".agent2rl-probe-{uuid.uuid4().hex}"
    eval_rows = read_jsonl(prepared_data / "gsm8k" / "eval.jsonl")
    stolen = [eval_rows[i] for i in (100, 200, 300)]
    stolen_text = "".join(json.dumps({"prompt": "  ".join(r["question"].upper().split()), "answer": r["answer"]}) + "\n"
                          for r in stolen)
    env = {"PROBE_SCRIPT": PROBE.read_text(), "PROBE_PY": sys.executable, "PROBE_PACKAGE": str(package),
           "PROBE_CACHE": str(prepared_data), "PROBE_OTHER_RUN": str(other / "evals" / "0" / "results.jsonl"),
           "PROBE_OTHER_ROOT_RUN": str(far / "evals" / "0" / "results.jsonl"),
           "PROBE_HOME_FILE": str(home_file), "PROBE_STOLEN": stolen_text,
           "PROBE_SOURCE": str(SHARED_DATA / "gsm8k")}  # where the data cache was prepared from
    proc = cli("run", "start", "--task", "gsm8k", "--agent", "command", "--command", HOSTILE_AGENT,
               "--model", str(tiny_model), "--budget", "5m", "--grace", "2s", "--eval-limit", "3",
               *[a for k, v in env.items() for a in ("--env", f"{k}={v}")], root=runs, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NOT CONTAINED" not in proc.stdout + proc.stderr
    run = run_dir_of(proc.stdout)
    log = (run / "logs" / "agent.log").read_text()

    # Every attempt was refused, and the probe ran to its end.
    attempts = [line.split(" ", 1)[1] for line in log.splitlines() if " refused " in line or " ESCAPED " in line]
    assert len(attempts) == 18, log
    assert all(a.startswith("refused") for a in attempts), "\n".join(a for a in attempts if "ESCAPED" in a)
    assert "probe done 18" in log and "hostile agent done" in log

    # The grader was reachable, and scored a submission from a workspace path.
    assert "submitted: scored" in log
    with RunStore.of_run(run) as store:
        subs = store.submissions(kind="agent")
        tables = {r[0] for r in store.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        events = {e["kind"]: json.loads(e["data_json"] or "{}") for e in store.events()}
    assert [(s.status, s.model_path) for s in subs] == [("scored", "output/v1")]

    # The record holds only what the supervisor and the grader wrote.
    assert "agent_was_here" not in tables
    assert not (run / "snapshots.git" / "agent-file").exists()
    assert "written by the agent" not in (run / "logs" / "supervisor.log").read_text()
    assert not (package / "grader" / "agent_was_here.py").exists()
    assert snapshot_of(prepared_data) == cache_before
    assert (run / "workspace" / "data" / "train.jsonl").read_text().count("\n") == 7473
    # $HOME writes land in the run's own home, never the user's.
    assert not home_file.exists()
    assert (run / containment.AGENT_HOME / home_file.name).read_text() == "the agent's home\n"
    assert not (run / containment.AGENT_TMP).exists()

    # The process that left the group with setsid did not outlive the run.
    assert processes_with("sleep 7531") == []

    # Containment is on the record.
    assert events["containment"]["contained"] is True
    assert str(run) in events["containment"]["hidden"] and str(prepared_data) in events["containment"]["hidden"]
    report = json.loads((run / "report" / "report.json").read_text())
    assert report["containment"]["contained"] is True
    assert report["agent_exit_code"] == 0  # the agent's own status, through the sandbox
    assert "containment: **contained**" in (run / "report" / "report.md").read_text()

    # The stolen test items are flagged, with their ids, the file and the revision.
    found = report["contamination"]
    ids = sorted(str(r.get("id", eval_rows.index(r))) for r in stolen)
    assert found["contaminated"] is True and found["items"] == ids
    in_code, in_home = found["hits"]  # a stash in the agent's own $HOME is found too
    assert in_code["path"] == "code/extra_train.jsonl" and in_code["in_final_workspace"] and in_code["items"] == ids
    assert in_code["revisions"], "the file was captured by at least one revision"
    assert in_home["path"] == "~/stash.jsonl" and in_home["items"] == ids
    md = (run / "report" / "report.md").read_text()
    assert "CONTAMINATED?" in md and f"| `code/extra_train.jsonl` | {', '.join(map(str, in_code['revisions']))} | yes |" in md
    assert events["contamination"]["contaminated"] is True
    assert summarize(run).flags == "contaminated?"


def test_a_run_made_before_containment_reads_as_not_contained(tmp_path: Path) -> None:
    """Old run folders (no containment event) are shown as what they were: not contained."""
    from support.synthetic import make_run

    from agent2rl_tui.review.report import build_report

    run = make_run(tmp_path, "old")

    assert build_report(run).containment.contained is False
    assert "not contained" in summarize(run).flags


@needs_bwrap
def test_the_sandbox_hides_the_run_and_keeps_the_tools(tmp_path: Path) -> None:
    """The sandbox on its own: the workspace writable, the record hidden, Python and the PATH kept."""
    run = tmp_path / "runs" / "r"
    ws = run / "workspace"
    (ws / "data").mkdir(parents=True)
    (ws / "models").mkdir()
    (run / "evals").mkdir()
    (run / "evals" / "gold.txt").write_text("42")
    source = tmp_path / "HumanEval.jsonl"  # a package's data file the cache was prepared from
    source.write_text('{"canonical_solution": "return 42"}\n')
    env = dict(os.environ, PATH=f"{Path.home()}{os.pathsep}{os.environ['PATH']}")  # the home itself on PATH
    made = containment.build(run_dir=run, workspace=ws, runs_root=tmp_path / "runs", data_cache=tmp_path / "cache",
                             env=env, writable_paths=("~/.agent2rl-never-there",), sources=(source,))
    in_home = Path.home() / f".agent2rl-visible-{uuid.uuid4().hex}"  # the user's home stays out of sight
    assert made.contained and made.reason.startswith("bubblewrap")
    import subprocess

    script = ("import os, sys, agent2rl_tui; open('made-inside', 'w').write('ok');"
              "print(os.path.exists('../evals/gold.txt'), len([p for p in os.listdir('/proc') if p.isdigit()]),"
              f" os.access('/usr', os.W_OK), os.environ['TMPDIR'], len(open({str(source)!r}).read()),"
              f" os.path.exists({str(in_home)!r}))")
    in_home.write_text("mine")
    try:
        out = subprocess.run(made.wrap([sys.executable, "-c", script]), cwd=ws, env=env, capture_output=True,
                             text=True, timeout=60)
    finally:
        in_home.unlink()
    assert out.returncode == 0, out.stderr
    seen, n_procs, usr_writable, tmpdir, source_size, home_seen = out.stdout.split()
    assert (seen, usr_writable, tmpdir, source_size, home_seen) == ("False", "False", "/tmp", "0", "False")
    assert int(n_procs) <= 3  # bubblewrap's init and this process
    assert (ws / "made-inside").read_text() == "ok"
    assert not Path.home().joinpath(".agent2rl-never-there").exists()


def test_profiles_take_extra_paths_and_refuse_bad_ones(tmp_path: Path) -> None:
    good = tmp_path / "agents.toml"
    good.write_text('[agents.mine]\nextends = "claude-code"\nread_only_paths = ["~/datasets"]\n'
                    'writable_paths = ["~/.claude", "~/.cache/uv"]\n')
    mine = load_profiles(good)["mine"]
    assert mine.read_only_paths == ("~/datasets",) and mine.writable_paths == ("~/.claude", "~/.cache/uv")
    assert load_profiles(good)["claude-code"].writable_paths == ()  # the run's own home: no user folder
    bad = tmp_path / "bad.toml"
    bad.write_text('[agents.mine]\nextends = "codex"\nwritable_paths = "~/.codex"\n')
    with pytest.raises(ProfileError, match="writable_paths must be a list of strings"):
        load_profiles(bad)


def test_without_bubblewrap_the_reason_says_what_to_do(tmp_path: Path) -> None:
    why = containment.probe(str(tmp_path / "no-bwrap-here"))
    assert why is not None and "--no-contain" in why and "bubblewrap" in why
    made = containment.build(run_dir=tmp_path, workspace=tmp_path, runs_root=tmp_path, data_cache=tmp_path,
                             env={}, bwrap=str(tmp_path / "no-bwrap-here"))
    assert not made.contained and made.wrap(["echo", "hi"]) == ["echo", "hi"]
