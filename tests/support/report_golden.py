"""The runs whose report.json, report.md and report.html are kept in tests/fixtures/report_v1/
(the golden files, written by the report before it was typed): built through the project's own
store, with fixed times, so the report of each is the same on every machine and in every session.

- ``example``: a run shaped as the example agent's (SFT, then GRPO), two scored submissions with
  their paired significance, iterations, a clean contamination check, containment, a narrative,
  the agent CLI's sessions, vitals with a GPU and a warning; its code and output are fixed text
  here (not the example agent's scripts), so the files change only when the report does;
- ``history``: rejected, failed, a copy of the base model, ties; our stricter reading and a
  judge's rates beside the scores, metered usage with caps, warnings, a contamination hit, no
  code revisions;
- ``failed``: a run that failed before anything (no baseline, no submission).

``python tests/support/report_golden.py`` writes the fixture folder again (only ever from a report
that is known to be right: the test compares the report against these files).
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path

from agent2rl_tui.record.contamination import ContaminationResult, Hit, write_contamination
from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.review.narrative import Narrative, NarrativeCall, NarrativeEntry, write_narrative_file
from support.paths import FIXTURES
from support.synthetic import T0, add_agent_output, add_llm_calls, add_revisions, make_run

GOLDEN = FIXTURES / "report_v1"
RUNS = ("example", "history", "failed")
GENERATED_AT = re.compile(r'^  "generated_at": "[^"]*"', re.M)


PAGE_GENERATED = re.compile(r"report generated \S+\.")


def normalised(report_json: str) -> str:
    """report.json's text with its one time of writing (``generated_at``) fixed."""
    return GENERATED_AT.sub('  "generated_at": "2026-01-01T00:00:00Z"', report_json)


def normalised_page(page: str) -> str:
    """report.html's text with the report's time of writing fixed."""
    return PAGE_GENERATED.sub("report generated 2026-01-01T00:00:00Z.", page)


def _fix_event_times(run: Path, t0: float) -> None:
    """Events are stamped with the time they were written: give them fixed times instead."""
    with RunStore.of_run(run) as store:
        store.conn.execute("UPDATE events SET at = ? + id", (t0,))


SFT_PY = """\"\"\"SFT on the train split.\"\"\"
import argparse

from trl import SFTConfig, SFTTrainer

BATCH_SIZE = 8


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()
    config = SFTConfig(
        output_dir="output/v1",
        max_steps=args.steps,
        learning_rate=2e-3,
        per_device_train_batch_size=BATCH_SIZE,
        lr_scheduler_type="constant",
    )
    trainer = SFTTrainer(model="models/tiny-llama", args=config, train_dataset=rows())
    trainer.train()
"""
GRPO_PY = """\"\"\"GRPO from the SFT model, exact-match reward.\"\"\"
import argparse

from reward import exact_match
from trl import GRPOConfig, GRPOTrainer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args()
    config = GRPOConfig(
        output_dir="output/v2",
        max_steps=args.steps,
        learning_rate=5e-4,
        per_device_train_batch_size=16,
        num_generations=8,
        beta=0.0,
    )
    trainer = GRPOTrainer(model="output/v1", reward_funcs=[exact_match], args=config, train_dataset=rows())
    trainer.train()
"""
REWARD_PY = ("def exact_match(completions, answer, **kw):\n"
             "    return [float(c.strip() == a) for c, a in zip(completions, answer)]\n")


def _attempt(n: int, kind: str, script: str, score: float) -> str:
    return (f"\n## Attempt {n}\n- **Status**: success (exit code 0)\n- **Score**: {score}\n- **Training type**: {kind}\n"
            f"- **What was done**: {kind} with code/{script}, then submitted it\n")


def _agent_output(t0: float, scores: tuple[float, float]) -> list[tuple[float, str, bool]]:
    """The example agent's kind of output: what it runs, the trainers' loss lines, each submission."""
    say = "[example-agent] "
    out: list[tuple[float, str, bool]] = [(t0 + 0.5, say + "task arith: 300 training rows", False)]
    for n, (name, script, start) in enumerate((("SFT", "sft.py", t0 + 1.0), ("GRPO", "grpo.py", t0 + 33.0)), start=1):
        src = "models/tiny-llama" if n == 1 else "output/v1"
        out += [(start, say + f"running python code/{script} --model {src} --steps 100 --out output/v{n}", False),
                (start + 4.0, "UserWarning: 'pin_memory' argument is set as true but no accelerator is found", True)]
        out += [(start + 6.0 + 3.0 * k, repr({"loss": f"{1.2 / (k + 1):.4g}", "epoch": f"{k + 1}"}), False)
                for k in range(5)]
        out += [(start + 21.0, repr({"train_runtime": "15.0", "train_loss": "0.5"}), False),
                (t0 + 30.0 * n + 2.5, say + f"submission v{n}: score {scores[n - 1]}", False)]
    return out


def example_run(root: Path) -> Path:
    """A run shaped as the example agent's (SFT, then GRPO from it), from fixed text only: nothing
    here changes when the example agent's scripts or the task's files do."""
    scores = (44.0, 69.0)
    run = make_run(root, "20261122T233320-arith-example", scores=scores, baseline=3.0, n_items=100)
    revisions = [
        {"description.md": "# arith\nAdd two numbers.\n"},
        {"code/NOTES.md": "# Plan\n- SFT, then GRPO\n", "code/sft.py": SFT_PY},
        {"code/grpo.py": GRPO_PY, "code/reward.py": REWARD_PY, "summary.md": "# Run summary\n"
         + _attempt(1, "SFT", "sft.py", scores[0])},
        {"code/NOTES.md": "# Plan\n- SFT, then GRPO\n- done\n", "summary.md": "# Run summary\n"
         + _attempt(1, "SFT", "sft.py", scores[0]) + _attempt(2, "GRPO", "grpo.py", scores[1])},
    ]
    add_revisions(run, revisions, at=[T0, T0 + 1.0, T0 + 33.0, T0 + 63.0])
    for files in revisions:  # the workspace as the agent left it (the report reads its summary.md)
        for path, content in files.items():
            (run / "workspace" / path).parent.mkdir(parents=True, exist_ok=True)
            (run / "workspace" / path).write_text(content, encoding="utf-8")
    add_agent_output(run, _agent_output(T0, scores))
    write_contamination(run, ContaminationResult(eval_items=100, checkable_items=40, revisions_scanned=4, files_scanned=6,
                                                 bytes_scanned=3000, skipped={"binary": 1}, seconds=0.5, task="arith"))
    with RunStore.of_run(run) as store:
        store.event("supervisor", "containment", "agent contained by bubblewrap (/usr/bin/bwrap)",
                    {"contained": True, "reason": "bubblewrap (/usr/bin/bwrap)", "requested": True})
    sessions = run / "agent-home" / ".codex" / "sessions"
    sessions.mkdir(parents=True)
    (sessions / "rollout-1.jsonl").write_text('{"type": "session"}\n' * 40, encoding="utf-8")
    with RunStore.of_run(run) as store:
        store.event("supervisor", "agent_home", "agent home ready", {"sessions": ["~/.codex/sessions"]})
        store.event("vitals", "disk_low", "disk nearly full: 1.2 GiB free under the run folder")
        for i in range(3):
            store.add_sample(T0 + 10.0 * i, cpu_pct=20.0 + 10 * i, mem_used=(4 + i) << 30, mem_total=64 << 30,
                             disk_free=(100 - i) << 30, disk_total=500 << 30, agent_procs=3 + i,
                             agent_rss=(1 + i) << 30, gpus=[{"index": 0, "util_pct": 40.0 + 20 * i,
                                                             "mem_used": (10 + i) << 30, "mem_total": 80 << 30}],
                             gpu_note=None)
    _fix_event_times(run, T0)
    write_narrative_file(run, Narrative(
        model="summarizer-1", base_url="http://127.0.0.1:9/v1", written_at=T0 + 500,
        entries={1: NarrativeEntry(1, text="Trained SFT on the train split; the score rose well past the baseline.",
                                   submission_id=1, key="k1"),
                 2: NarrativeEntry(2, error="the summarizer answered 500", submission_id=2, key="k2")},
        calls=[NarrativeCall(1, "k1", "summarizer-1", T0 + 400, 900, 60, None),
               NarrativeCall(2, "k2", "summarizer-1", T0 + 410, error="HTTP 500")]))
    return run


STRICT = {"score": 20.0, "n_correct": 2, "n_differ": 1, "differ": [3], "rule": "the last number on the last line"}
JUDGE = {"model": "judge-1", "mode": "pairwise"}


def _rates(win: float) -> dict[str, object]:
    return {"metric": "length_controlled_winrate", "win_rate": win, "length_controlled_winrate": win - 2.5,
            "n_total": 10, "n_failed": 1, "n_cached": 4}


def history_run(root: Path) -> Path:
    run = root / "20261122T233320-arith-history"
    run.mkdir(parents=True)
    with RunStore(run / "run.db", create=True) as store:
        store.create_run(RunRecord(id=run.name, task="arith", agent="command", base_model="m",
                         base_model_source="/m", budget_s=100.0, grace_s=5.0, status="finished",
                         created_at=T0 - 10, budget_start=T0, deadline=T0 + 100, agent_ended_at=T0 + 80,
                         ended_at=T0 + 85, end_reason="agent_exited", agent_exit_code=0))
        settings = {"prompt_profile": "opencompass", "strict": STRICT, "judge": JUDGE, "winrate": _rates(40.0)}
        store.add_submission(kind="baseline", status="scored", score=10.0, weights_hash="BASE",
                             settings_json=json.dumps(settings))
        history = [  # (status, score, hash, received offset, error)
            ("rejected", None, None, 5, "no such folder: output/v0"),
            ("scored", 10.0, "BASE", 10, None),  # a copy of the base model
            ("failed", None, None, 20, "cannot load output/v2: config.json missing"),
            ("scored", 30.0, "A", 30, None),
            ("scored", 25.0, "B", 40, None),
            ("scored", 30.0, "C", 50, None),  # ties the best; the earlier one counts
        ]
        for n, (status, score, digest, at, error) in enumerate(history, start=1):
            sid = store.add_submission(kind="agent", status=status, score=score, weights_hash=digest,
                                       model_path=f"output/v{n}", error=error, settings_json=json.dumps(
                                           {**settings, "winrate": _rates(40.0 + n)}) if score is not None else None)
            store.update_submission(sid, received_at=T0 + at, started_at=T0 + at + 1, finished_at=T0 + at + 3.25)
        store.event("supervisor", "meter", "metered", {"metered": True, "upstream": "http://127.0.0.1:9/v1",
                                                       "caps": {"max_tokens": 100000, "max_cost_usd": 2.5}})
        store.event("supervisor", "grader_restarted", "grader exited with code -9; restarted (pid 42)")
        store.event("supervisor", "agent_start", "agent started (pid 7)")  # routine: not a warning
    add_llm_calls(run, [(T0 + 1, 1200, 300), (T0 + 2, 800, 150)])
    _fix_event_times(run, T0)
    write_contamination(run, ContaminationResult(
        eval_items=20, checkable_items=20, revisions_scanned=3, files_scanned=3, bytes_scanned=4096,
        hits=[Hit("code/leak.py", [2, 3], True, ["7", "9"])], items=["7", "9"], contaminated=True, seconds=0.5))
    return run


def failed_run(root: Path) -> Path:
    run = root / "20261122T233320-arith-failed"
    run.mkdir(parents=True)
    with RunStore(run / "run.db", create=True) as store:
        store.create_run(RunRecord(id=run.name, task="arith", agent="command", base_model="m",
                         base_model_source="/m", budget_s=100.0, grace_s=5.0, status="failed", created_at=T0,
                         error="the grader did not start: port in use"))
    return run


BUILDERS = {"example": example_run, "history": history_run, "failed": failed_run}


def build(root: Path, name: str) -> Path:
    return BUILDERS[name](root)


def write_golden(folder: Path) -> None:
    """Each run's report.json (normalised), report.md and report.html (normalised) into ``folder``,
    as today's report writes them."""
    from agent2rl_tui.review.html_report import render_html
    from agent2rl_tui.review.report import write_report

    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in RUNS:
            run = build(Path(tmp), name)
            write_report(run)
            out = run / "report"
            (folder / f"{name}.report.json").write_text(normalised((out / "report.json").read_text(encoding="utf-8")),
                                                        encoding="utf-8")
            (folder / f"{name}.report.md").write_text((out / "report.md").read_text(encoding="utf-8"), encoding="utf-8")
            (folder / f"{name}.report.html").write_text(normalised_page(render_html(run)), encoding="utf-8")


if __name__ == "__main__":
    write_golden(Path(sys.argv[1]) if len(sys.argv) > 1 else GOLDEN)
