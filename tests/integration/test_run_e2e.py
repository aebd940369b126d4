"""A whole run through the real CLI: supervisor, grader, eval workers, example agent, report."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.runs import PINNED_EVAL_SEED, cli, read_report

from agent2rl_tui.record.evalset import run_eval_items
from agent2rl_tui.record.revisions import diff, file_at, files_at, get_revision, list_revisions, submission_revisions
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.tasks.registry import load_task

pytestmark = pytest.mark.slow


def test_the_run_finishes_and_prints_its_result(example_run: tuple[Path, str]) -> None:
    run_dir, out = example_run
    assert f"run {run_dir.name}: finished" in out
    assert re.search(r"baseline: \d+\.\d\d", out)
    assert re.search(r"submission 1: scored +score \d+\.\d\d", out)
    assert re.search(r"submission 2: scored +score \d+\.\d\d", out)
    assert re.search(r"improvement: \d+\.\d\d", out)


def test_scores_are_recorded_and_the_agent_beats_the_baseline(example_run: tuple[Path, str]) -> None:
    run_dir, _ = example_run
    with RunStore.of_run(run_dir) as store:
        run = store.run()
        baseline = store.baseline()
        subs = store.submissions(kind="agent")
    assert run.status == "finished"
    assert run.end_reason == "agent_exited"
    assert run.agent_exit_code == 0
    assert run.driver == "scripted"
    assert baseline.status == "scored" and baseline.score < 10.0
    assert [s.status for s in subs] == ["scored", "scored"]
    assert [s.model_path.rsplit("/", 1)[-1] for s in subs] == ["v1", "v2"]
    sft, grpo = subs
    assert sft.score >= baseline.score + 20.0  # SFT alone lifts the tiny model well clear of it
    assert grpo.score > sft.score  # and GRPO from the SFT checkpoint adds to it
    for s in [baseline, *subs]:
        lines = (run_dir / "evals" / str(s.id) / "results.jsonl").read_text().splitlines()
        assert len(lines) == 100
        assert sum(json.loads(line)["correct"] for line in lines) == s.n_correct
        assert s.score == pytest.approx(100.0 * s.n_correct / 100)


def test_the_report_matches_the_record(example_run: tuple[Path, str]) -> None:
    run_dir, _ = example_run
    report = read_report(run_dir)
    with RunStore.of_run(run_dir) as store:
        baseline = store.baseline()
        subs = store.submissions(kind="agent")
    assert report["baseline"]["score"] == baseline.score
    assert report["best"]["score"] == max(s.score for s in subs)
    assert report["improvement"] == pytest.approx(report["best"]["score"] - baseline.score)
    m = report["metrics"]
    assert m["n_submissions"] == 2 and m["valid_submission_rate"] == 1.0
    assert m["first_valid_idx"] == 1
    assert 0 < m["first_valid_delay"] <= m["time_to_best"] < 1200
    assert m["time_to_first_improvement"] == m["first_valid_delay"]
    assert 0 < m["time_used_ratio"] < 1
    assert m["last_submit_gap"] >= 0
    assert m["base_copy_count"] == 0
    assert (run_dir / "report" / "report.md").read_text().startswith(f"# Run {run_dir.name}")


def test_the_example_agent_trains_and_improves_contained(example_run: tuple[Path, str]) -> None:
    """Containment is on by default and costs the example agent nothing (scores: the test above)."""
    from agent2rl_tui.run.containment import probe

    run_dir, _ = example_run
    report = read_report(run_dir)
    assert report["containment"]["contained"] is (probe() is None), report["containment"]
    assert report["contamination"]["contaminated"] is False
    # The vitals sampler still sees the agent's processes inside the sandbox (its pid namespace).
    assert report["vitals"]["samples"] > 0 and report["vitals"]["agent_procs_max"] >= 2


def test_the_eval_split_never_enters_the_workspace(example_run: tuple[Path, str]) -> None:
    run_dir, _ = example_run
    task = load_task("arith")
    # The run's own draw (its eval seed is in run.db, given here with --eval-seed), not the task's default one.
    shown = cli("run", "show", str(run_dir), "--eval-seed")
    assert shown.stdout.strip() == str(PINNED_EVAL_SEED)
    assert run_eval_items(run_dir, task) == task.eval_items(PINNED_EVAL_SEED)
    eval_questions = {item["question"] for item in run_eval_items(run_dir, task)}
    assert eval_questions != {item["question"] for item in task.load_split("eval")}
    train_rows = [json.loads(line) for line in (run_dir / "workspace" / "data" / "train.jsonl").open()]
    assert len(train_rows) == 300
    assert not eval_questions & {r["question"] for r in train_rows}
    needles = [json.dumps(q).encode() for q in eval_questions]  # e.g. b'"7+12="'
    for path in (run_dir / "workspace").rglob("*"):
        if path.is_file() and path.stat().st_size < 50_000_000:
            blob = path.read_bytes()
            hits = [n for n in needles if n in blob]
            assert not hits, f"{path} holds eval questions {hits[:3]}"
    # ...while the grader's side of the folder does hold them.
    graded = (run_dir / "evals" / "1" / "results.jsonl").read_text()
    assert sum(q in graded for q in eval_questions) == len(eval_questions)


def test_the_workspace_has_what_the_agent_needs(example_run: tuple[Path, str]) -> None:
    run_dir, _ = example_run
    ws = run_dir / "workspace"
    for name in ("code", "output", "data", "models/tiny-llama", "description.md", "instructions.md",
                 "run_meta.json"):
        assert (ws / name).exists(), name
    instructions = (ws / "instructions.md").read_text()
    for needle in ("GRADING_SERVER_URL", "/submit", "merge_and_unload", "OUTPUT_DIR", "20m00s"):
        assert needle in instructions
    meta = json.loads((ws / "run_meta.json").read_text())
    assert meta["timeout_s"] == 1200 and meta["end_time"] == pytest.approx(meta["start_time"] + 1200)
    assert not (ws / "models" / "tiny-llama" / "config.json").stat().st_mode & 0o222  # read-only
    assert "v2 (GRPO)" in (ws / "code" / "NOTES.md").read_text()


def test_each_submission_is_made_from_the_code_that_trained_it(example_run: tuple[Path, str]) -> None:
    """The agent writes its training code into code/ and runs it, so its stages are revisions."""
    run_dir, _ = example_run
    ws = run_dir / "workspace"
    with RunStore.of_run(run_dir) as store:
        sft, grpo = store.submissions(kind="agent")
    assert sft.revision_seq is not None and grpo.revision_seq is not None
    assert grpo.revision_seq > sft.revision_seq
    first, second = get_revision(run_dir, sft.revision_seq), get_revision(run_dir, grpo.revision_seq)
    assert first.sha != second.sha
    assert [r.seq for r in list_revisions(run_dir)][-1] >= second.seq
    # Submission 1 was made from the SFT script alone; submission 2 adds GRPO and its reward.
    files1, files2 = set(files_at(run_dir, first)), set(files_at(run_dir, second))
    assert {"code/sft.py", "code/NOTES.md"} <= files1
    assert not {"code/grpo.py", "code/reward.py"} & files1
    assert {"code/sft.py", "code/grpo.py", "code/reward.py", "code/NOTES.md"} <= files2
    assert not any(p.startswith(("output/", "data/", "models/")) for p in files1 | files2)
    assert file_at(run_dir, first, "code/sft.py") == file_at(run_dir, second, "code/sft.py")
    assert file_at(run_dir, second, "code/grpo.py") == (ws / "code" / "grpo.py").read_bytes()
    # The diff around submission 2 is the new stage's code, since submission 1's revision.
    old, new = submission_revisions(run_dir, grpo.id)
    assert (old.seq if old else None, new.seq) == (first.seq, second.seq)
    patch = diff(run_dir, old, new)
    assert "+++ b/code/grpo.py" in patch and "+++ b/code/reward.py" in patch
    assert "+++ b/code/sft.py" not in patch
    assert "+def exact_match_reward(" in patch and "GRPOTrainer" in patch
    # ...and the CLI shows the same.
    shown = cli("run", "diff", run_dir.name, "--submission", str(grpo.id), root=run_dir.parent)
    assert shown.returncode == 0, shown.stderr
    assert "+++ b/code/grpo.py" in shown.stdout and f"revision {first.seq} -> {second.seq}" in shown.stderr
    listing = cli("run", "revisions", run_dir.name, root=run_dir.parent)
    assert listing.returncode == 0, listing.stderr
    assert f"<- submission {sft.id}" in listing.stdout and f"<- submission {grpo.id}" in listing.stdout
    assert "code/sft.py" in listing.stdout and "code/grpo.py" in listing.stdout


def test_the_agent_runs_its_own_code_and_logs_it(example_run: tuple[Path, str]) -> None:
    run_dir, _ = example_run
    log = (run_dir / "logs" / "agent.log").read_text()
    assert "[example-agent] running python code/sft.py" in log
    assert "[example-agent] running python code/grpo.py" in log
    assert "SFT: 1000 steps on 300 rows" in log and "GRPO: 400 steps on 300 rows" in log  # the scripts' own lines
    # It generates with transformers: TRL, told so (code/lean_imports.py), never imports the installed vLLM.
    assert importlib.util.find_spec("vllm") is not None  # vLLM is installed here (the full lock)
    assert "code/lean_imports.py" in log and "vLLM" not in log  # TRL warns of vLLM's version when it imports it


def test_the_agents_stages_import_trl_without_vllm_scikit_learn_or_scipy(tmp_path: Path) -> None:
    """All three are installed here; lean_imports, imported first, keeps TRL's and transformers'
    optional imports of them out of every training stage (about 5 CPU-s a stage). If a library
    stops importing one of them, its line in lean_imports can go."""
    from agent2rl_tui.agents.example.agent import write_code

    [module] = write_code(tmp_path, "lean_imports.py")  # as a stage finds it in the workspace's code/
    stage = ("import sys; sys.path.insert(0, sys.argv[1]); import lean_imports; "
             "from trl import GRPOConfig, GRPOTrainer, SFTConfig, SFTTrainer; "
             "print(*(name in sys.modules for name in ('vllm', 'sklearn', 'scipy')))")
    proc = subprocess.run([sys.executable, "-c", stage, str(module.parent)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["False", "False", "False"], proc.stdout
    assert importlib.util.find_spec("vllm") and importlib.util.find_spec("sklearn") and importlib.util.find_spec("scipy")


def test_every_agent_line_is_logged_with_a_utc_stamp(example_run: tuple[Path, str]) -> None:
    run_dir, _ = example_run
    lines = (run_dir / "logs" / "agent.log").read_text().splitlines()
    assert any("[example-agent] submission v2:" in line for line in lines)
    stamp = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ")
    assert lines and all(stamp.match(line) for line in lines)


def test_runs_and_show_list_the_run(example_run: tuple[Path, str]) -> None:
    run_dir, _ = example_run
    listing = cli("runs", "--json", root=run_dir.parent)
    rows = [json.loads(line) for line in listing.stdout.splitlines()]
    assert [r["id"] for r in rows] == [run_dir.name]
    assert rows[0]["status"] == "finished" and rows[0]["n_submissions"] == 2
    shown = cli("run", "show", run_dir.name[-20:], root=run_dir.parent)
    assert shown.returncode == 0
    assert "[finished]" in shown.stdout and "baseline" in shown.stdout
