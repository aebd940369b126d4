"""An eval worker that answers from a script instead of a model.

Everything around an evaluation is real: the grader's HTTP routes, its intake copying each
submission, the queue, the record, the worker protocol (a job line in, ``results.jsonl`` and
``summary.json`` written, an answer line out), the eval timeout and the worker's restart. Only
the evaluation is a script's: no torch, no model loaded, no item generated. What the
supervisor does around evaluations (deadlines, stops, detaching, strays, a grader restarted)
can so be tried in a fraction of a second of CPU per run instead of a model's seconds.

A run gets it only from its config (``RunConfig.scripted_worker``, a knob a test or a person
writes, never an option of ``run start``; ``run start`` records it from
``$AGENT2RL_SCRIPTED_WORKER``, which the test suite sets), and every score it gives says so: its
engine is ``scripted`` in the record and the report. The script (``ScriptedWorker``):

- ``scores``: the score of each submission by id (JSON object keys are strings; the baseline
  is ``"0"``); a submission the script does not name scores ``default_score``;
- ``seconds``: how long each evaluation takes (``hang`` names submissions that never finish,
  for the grader's eval timeout and the supervisor's second stop);
- ``fail``: submissions whose evaluation fails (an ``evaluation_failed`` error);
- ``items``: how many result lines each evaluation writes.

Run as ``python -m agent2rl_tui.grader.scripted_worker`` by the grader's worker pool, with the
script in ``$AGENT2RL_SCRIPTED_WORKER``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from agent2rl_tui.record.evaljob import EvalJob, EvalSummary, WorkerSummary
from agent2rl_tui.record.results import ItemRow
from agent2rl_tui.record.runconfig import SCRIPTED_WORKER_ENV
from agent2rl_tui.util.numbers import is_digits

SCRIPT_ENV = SCRIPTED_WORKER_ENV
ENGINE = "scripted"


def _number(value: Any, default: float) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _ids(value: Any) -> frozenset[int]:
    return frozenset(int(v) for v in value if isinstance(v, int) and not isinstance(v, bool)) \
        if isinstance(value, list) else frozenset()


@dataclass(frozen=True)
class ScriptedWorker:
    """What the scripted worker answers (read forgivingly: a bad value reads as its default)."""

    scores: dict[int, float] = field(default_factory=dict)
    default_score: float = 0.0
    seconds: float = 0.0
    hang: frozenset[int] = frozenset()
    fail: frozenset[int] = frozenset()
    items: int = 4

    @classmethod
    def from_json(cls, raw: Any) -> ScriptedWorker:
        raw = raw if isinstance(raw, dict) else {}
        scores = raw.get("scores") if isinstance(raw.get("scores"), dict) else {}
        return cls(scores={int(k): _number(v, 0.0) for k, v in scores.items() if is_digits(str(k))},
                   default_score=_number(raw.get("default_score"), 0.0),
                   seconds=max(0.0, _number(raw.get("seconds"), 0.0)),
                   hang=_ids(raw.get("hang")), fail=_ids(raw.get("fail")),
                   items=max(1, int(_number(raw.get("items"), 4))))

    def score_of(self, submission_id: int) -> float:
        return self.scores.get(submission_id, self.default_score)


def inference_of(job: EvalJob) -> dict[str, Any]:
    """The run's inference settings (its prompt profile, decoding row, ...), recorded as the real worker
    records them: they need no model. Empty where the task cannot be read."""
    from agent2rl_tui.tasks import decoding
    from agent2rl_tui.tasks.registry import TaskError, load_task

    try:
        return decoding.run_settings(load_task(job.task_folder), job.prompt_profile, job.decoding_row).to_dict()
    except (TaskError, OSError, ValueError):
        return {}


def answer(job: EvalJob, script: ScriptedWorker) -> WorkerSummary:
    """The job's summary by the script, its result lines written to the job's folder."""
    sub_id = job.submission_id
    if sub_id in script.hang:
        while True:  # the grader's eval timeout kills this worker, group and all
            time.sleep(3600)
    time.sleep(script.seconds)
    if sub_id in script.fail:
        return WorkerSummary(ok=False, submission_id=sub_id, error_code="evaluation_failed",
                             error="the script fails this evaluation")
    score = script.score_of(sub_id)
    correct = round(script.items * score / 100)
    out_dir = Path(job.out_dir)
    with (out_dir / "results.jsonl").open("w", encoding="utf-8") as fh:
        for i in range(script.items):
            row = ItemRow(index=i, prompt=f"scripted item {i}", output="", extracted=None, gold="",
                          correct=i < correct)
            fh.write(row.to_line() + "\n")
    made = EvalSummary.made_with(evaluator=ENGINE, engine_choice=ENGINE, engine_load=ENGINE, inference=inference_of(job),
                                 engine_settings={"engine": ENGINE}, details={})
    from agent2rl_tui.tasks.modelfiles import weights_hash  # the real hash: a copy of the base model is told apart

    try:
        digest: str | None = weights_hash(Path(job.model_path), job.weight_files)
    except (OSError, ValueError):
        digest = None
    return WorkerSummary(ok=True, submission_id=sub_id, score=score, n_items=script.items, n_correct=correct,
                         weights_hash=digest, engine=ENGINE, settings=made, timings={"worker_start": 0.0})


def serve(jobs: TextIO, answers: TextIO, script: ScriptedWorker) -> None:
    """Answer jobs until stdin closes (the protocol of ``grader.worker``)."""
    from agent2rl_tui.grader.worker import write_json_atomic

    for line in jobs:
        if not line.strip():
            continue
        job = EvalJob.from_json(line)
        Path(job.out_dir).mkdir(parents=True, exist_ok=True)
        summary = answer(job, script)
        write_json_atomic(Path(job.out_dir) / "summary.json", summary.to_json())
        answers.write(json.dumps({"done": job.submission_id, "ok": summary.ok}) + "\n")


def main() -> int:
    from agent2rl_tui.grader.worker import protocol_channel
    from agent2rl_tui.util.procs import die_with_parent

    die_with_parent()
    answers = protocol_channel()
    try:
        script = ScriptedWorker.from_json(json.loads(os.environ.get(SCRIPT_ENV) or "{}"))
    except ValueError:
        script = ScriptedWorker()
    serve(sys.stdin, answers, script)
    return 0


if __name__ == "__main__":
    sys.exit(main())
