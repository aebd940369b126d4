"""Benchmark: what the diagnosis costs on a long run (review/iterations.py, review/report.py).

Builds a run folder as a day-long run leaves it: ``SUBMISSIONS`` submissions, each made from
its own revision of a code/ folder of training scripts (TRL and hand-written), and a transcript
of ``STEPS`` steps (trainer log lines, tool calls with their results, a traceback now and then).
Then times ``build_iterations`` (the Iterations pane and report/iterations.jsonl) and
``build_report`` (the whole report, which includes it), each best of 3.

Run: ``python bench/diagnosis.py [STEPS] [SUBMISSIONS] [--quick]`` (default 200000 40; ``--quick``:
4,000 steps and 4 submissions, the same steps in seconds). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from agent2rl_tui.record.revisions import Snapshotter
from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.review.iterations import build_iterations
from agent2rl_tui.review.report import build_report
from agent2rl_tui.run.workspace import make_run_folder

T0 = 1_800_000_000.0
STEPS, SUBMISSIONS = 200_000, 40
QUICK_STEPS, QUICK_SUBMISSIONS = 4_000, 4


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("steps", nargs="?", type=int, help=f"transcript steps (default {STEPS:,}; --quick {QUICK_STEPS:,})")
    parser.add_argument("submissions", nargs="?", type=int,
                        help=f"submissions, one revision each (default {SUBMISSIONS}; --quick {QUICK_SUBMISSIONS})")
    parser.add_argument("--quick", action="store_true", help="a small run: the same steps in seconds")
    return parser.parse_args()


def make_long_run(run: Path, steps: int, submissions: int) -> None:
    make_run_folder(run)
    scripts = resources.files("agent2rl_tui.agents.example.scripts")
    code = run / "workspace" / "code"
    code.mkdir(parents=True, exist_ok=True)
    span = 86_400.0 / submissions
    with RunStore(run / "run.db", create=True) as store:
        store.create_run(RunRecord(id=run.name, task="arith", agent="bench", driver=None, base_model="m", base_model_source="/m",
                         budget_s=86_400.0, grace_s=10.0, status="finished", created_at=T0 - 10, budget_start=T0,
                         deadline=T0 + 86_400, ended_at=T0 + 86_400, agent_ended_at=T0 + 86_400,
                         end_reason="deadline", heartbeat_at=T0 + 86_400, config_json="{}"))
        base = store.add_submission(kind="baseline", status="scored", score=10.0, n_items=100, weights_hash="b")
        store.update_submission(base, received_at=T0 - 5, started_at=T0 - 5, finished_at=T0 - 1)
    snap = Snapshotter(run)
    names = ["sft.py", "grpo.py", "episodes_grpo.py", "episodes_sft.py", "reward.py", "prompts.py"]
    per_step = steps // submissions
    seq = 0
    for n in range(1, submissions + 1):
        for name in names:  # a new revision of the code: every script touched
            text = scripts.joinpath(name).read_text(encoding="utf-8")
            (code / name).write_text(text + f"\n# revision {n}\n", encoding="utf-8")
        snap.snapshot("watch")
        at0 = T0 + (n - 1) * span
        with RunStore.of_run(run) as store:
            rows = []
            for i in range(per_step):
                at = at0 + span * i / per_step
                if i % 50 == 0:
                    rows.append((at, "tool_call", "Bash", f"c{n}-{i}", "",
                                 json.dumps({"command": f"python code/grpo.py --lr 1e-5 --steps {i}"})))
                    rows.append((at + 1, "tool_result", "Bash", f"c{n}-{i}", "exit 0", None))
                elif i % 997 == 0:
                    rows.append((at, "raw", None, None, "Traceback (most recent call last):\n  File \"x.py\", "
                                 "line 1\nValueError: bad batch", None))
                else:
                    rows.append((at, "message", None, None, "{'loss': '0.5', 'grad_norm': '1.0', 'learning_rate': "
                                 "'1e-05', 'reward': '0.25', 'reward_std': '0.1', 'epoch': '0.1'}", None))
            with store.transaction() as conn:
                for at, kind, tool, call_id, text, args in rows:
                    seq += 1
                    conn.execute("INSERT INTO steps (seq, at, kind, tool, call_id, text, args_json) "
                                 "VALUES (?, ?, ?, ?, ?, ?, ?)", (seq, at, kind, tool, call_id, text, args))
            rev = store.conn.execute("SELECT MAX(seq) FROM revisions").fetchone()[0]
            sub = store.add_submission(kind="agent", status="scored", score=10.0 + n, n_items=100,
                                       weights_hash=f"w{n}", revision_seq=rev, model_path=f"output/v{n}")
            store.update_submission(sub, received_at=at0 + span - 1, started_at=at0 + span - 1,
                                    finished_at=at0 + span - 0.5)


def best_of(fn: Callable[[], object], runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    args = parse_args()
    steps = args.steps or (QUICK_STEPS if args.quick else STEPS)
    submissions = args.submissions or (QUICK_SUBMISSIONS if args.quick else SUBMISSIONS)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "long-run"
        t = time.perf_counter()
        make_long_run(run, steps, submissions)
        print(f"built a run of {steps:,} steps, {submissions} submissions and revisions in {time.perf_counter() - t:.1f} s")
        diag = build_iterations(run)
        print(f"route: {diag.route}; {len(diag.iterations)} iterations")
        print(f"build_iterations: {best_of(lambda: build_iterations(run)):.2f} s (best of 3)")
        print(f"build_report:     {best_of(lambda: build_report(run)):.2f} s (best of 3)")


if __name__ == "__main__":
    main()
