"""The eval worker: a process of its own that evaluates submissions one after another.

The grader starts a worker ahead of need; it pays its heavy imports (torch, transformers)
while idle, then reads jobs as JSON lines on stdin. For each it evaluates, writes
``evals/<n>/results.jsonl`` (one line per item) and ``evals/<n>/summary.json``, and answers
with one JSON line on its protocol channel (the stdout it was started with; everything
printed goes to its log instead). Between jobs it keeps its engine warm (``engines.keeper``):
a vLLM engine stays up and the next checkpoint of the same architecture is swapped in place.
A worker that crashes or runs past its timeout is killed, group and all, and leaves no
summary: the grader records that submission as failed and starts a fresh worker.

Run as ``python -m agent2rl_tui.grader.worker``.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from agent2rl_tui.grader.engines.keeper import EngineKeeper
    from agent2rl_tui.record.evaljob import EvalJob, WorkerSummary
    from agent2rl_tui.tasks.registry import InferenceSettings


PREIMPORT_VLLM = "AGENT2RL_PREIMPORT_VLLM"
"""Set to 1 by the grader when the run's engine will be vLLM, so a waiting worker imports it."""


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
    tmp.replace(path)


PHASE_FAILURES = {"load": "model_load_failed", "render": "chat_template_error", "generate": "generation_failed",
                  "score": "scoring_failed", "play": "episode_failed"}
"""What a failure in each phase of an evaluation is called when nothing more precise is known."""



def prompt_texts(engine: Any, settings: InferenceSettings, asked: list[Any]) -> list[str]:
    """The text each prompt is generated from: a plain prompt as it is, chat turns through the
    model's template; a model without one gets the user turns alone under a profile that says so
    (``plain_without_template``, the reference's AlpacaEval), else every turn's text by line."""
    bare = settings.plain_without_template and not getattr(getattr(engine, "tokenizer", None), "chat_template", None)
    return [p if isinstance(p, str) else
            "\n".join(m["content"] for m in p if m["role"] == "user") if bare else
            engine.render(p, require_template=settings.require_chat_template, enable_thinking=settings.enable_thinking)
            for p in asked]

def evaluate(job: EvalJob, keeper: EngineKeeper, worker_start: float) -> WorkerSummary:
    """Run one evaluation job and return its summary (also written to summary.json); an
    ``EvalFailure`` (its code for the agent, its full text for the record) when it fails."""
    from agent2rl_tui.grader.engines import EngineError
    from agent2rl_tui.grader.failures import EvalFailure

    phase = ["load"]
    try:
        return _evaluate(job, keeper, worker_start, phase)
    except EvalFailure:
        raise
    except EngineError as exc:
        raise EvalFailure(exc.code, str(exc)) from exc
    except MemoryError as exc:
        raise EvalFailure("out_of_memory", f"MemoryError while {phase[0]}ing") from exc
    except Exception as exc:  # noqa: BLE001 - named by the phase it failed in
        raise EvalFailure(PHASE_FAILURES[phase[0]], f"{type(exc).__name__}: {exc}") from exc


def _evaluate(job: EvalJob, keeper: EngineKeeper, worker_start: float, phase: list[str]) -> WorkerSummary:
    from agent2rl_tui.grader.evaluators import evaluator_for
    from agent2rl_tui.grader.evaluators.humaneval import HumanEvalEvaluator
    from agent2rl_tui.grader.failures import EvalFailure
    from agent2rl_tui.record.evaljob import EvalSummary, WorkerSummary
    from agent2rl_tui.record.progress import ProgressWriter
    from agent2rl_tui.tasks import decoding
    from agent2rl_tui.tasks.modelfiles import weights_hash
    from agent2rl_tui.tasks.registry import TaskError, load_task

    out_dir = Path(job.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model_path = Path(job.model_path)
    task = load_task(job.task_folder)
    # The base model's row of the reference's model table, decided when the run was made, where
    # the profile uses the table: every submission is decoded by the base model's row.
    try:
        settings = decoding.run_settings(task, job.prompt_profile, job.decoding_row)
    except TaskError as exc:
        raise EvalFailure("grader_error", str(exc)) from exc
    engine_cfg = task.engine_for(settings, job.engine)
    engine_cfg = decoding.row_engine(engine_cfg, settings.decoding_row, job.engine)
    interactive = task.level == 3
    evaluator = None if interactive else evaluator_for(task, settings, judge=job.judge)
    if isinstance(evaluator, HumanEvalEvaluator):  # its sandbox hides the run folder (evals/<n>/ is in it)
        evaluator.run_dir = out_dir.resolve().parent.parent
    items = task.eval_items(job.eval_seed)  # the run's own draw, from its record
    if job.limit:
        items = items[: job.limit]
    played: dict[str, Any] = {}
    details: dict[str, Any] = {}
    timings = {"worker_start": worker_start}
    progress = ProgressWriter(out_dir, len(items))  # evals/<n>/progress.json: seen within a second of the start

    with ThreadPoolExecutor(max_workers=1) as pool:
        # Exactly the weights the engine loads (the grader's copy holds nothing else).
        hashing = pool.submit(weights_hash, model_path, job.weight_files)
        t0 = time.perf_counter()
        engine, loaded = keeper.load(engine_cfg, model_path)
        print(f"engine {engine.name} ({loaded.why}): {loaded.how} in {loaded.seconds:.2f} s", file=sys.stderr,
              flush=True)
        t1 = time.perf_counter()
        if evaluator is None:  # Level 3: generation and judging are one loop over the games
            from agent2rl_tui.grader.evaluators.episodes import play_task

            phase[0] = "play"
            progress.phase("play")
            results, played = play_task(task, engine, items, settings, judge=job.judge,
                                        search=job.search, store=job.store, ended=progress.advance)
            score = float(played["score"])
            t2 = t3 = time.perf_counter()
        else:
            phase[0] = "render"
            asked = [evaluator.prompt(item) for item in items]
            prompts = prompt_texts(engine, settings, asked)
            phase[0] = "generate"
            progress.phase("generate")
            outputs = engine.generate(prompts, settings, progress.advance)
            t2 = time.perf_counter()
            phase[0] = "score"
            progress.phase("score")
            results = evaluator.judge_all(items, prompts, outputs)
            score = evaluator.score(results)
            details = evaluator.details(results)
            t3 = time.perf_counter()
        phase[0] = "load"
        digest = hashing.result()
    timings.update(load=t1 - t0, generate=t2 - t1, score=t3 - t2, **loaded.timings)

    with (out_dir / "results.jsonl").open("w", encoding="utf-8") as fh:
        for r in results:
            fh.write(r.to_line() + "\n")
    made = EvalSummary.made_with(evaluator=task.evaluator, engine_choice=loaded.why, engine_load=loaded.how,
                                 inference=settings.to_dict(),
                                 engine_settings={**engine_cfg.to_dict(), **loaded.effective}, details=details,
                                 env=task.env_table if played else None, episodes=played or None)
    return WorkerSummary(ok=True, submission_id=job.submission_id, score=score, n_items=len(results),
                         n_correct=sum(r.correct for r in results), weights_hash=digest, engine=engine.name,
                         settings=made, timings=timings)


def protocol_channel() -> TextIO:
    """The stdout we were started with, for answers only; fd 1 then goes to the log (stderr),
    so nothing a library prints can be mistaken for an answer."""
    channel = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1, encoding="utf-8", closefd=False)
    return channel


def serve(jobs: TextIO, answers: TextIO, started: float, ready: float) -> None:
    """Evaluate jobs until stdin closes, keeping the engine warm between them."""
    from agent2rl_tui.grader.engines.keeper import EngineKeeper
    from agent2rl_tui.record.evaljob import EvalJob, WorkerSummary

    keeper = EngineKeeper()
    worker_start = ready - started  # paid by the first job only; later ones find a warm worker
    try:
        for line in jobs:
            if not line.strip():
                continue
            received = time.time()
            job = EvalJob.from_json(line)  # the grader's own line: one it cannot have written ends the worker
            out_dir = Path(job.out_dir)
            out_dir.mkdir(parents=True, exist_ok=True)
            try:
                summary = evaluate(job, keeper, worker_start)
                summary.timings["job_to_summary"] = time.time() - received
            except Exception as exc:  # noqa: BLE001 - any failure becomes a recorded error
                traceback.print_exc()
                keeper.close()  # an engine in an unknown state is not reused
                summary = WorkerSummary(ok=False, submission_id=job.submission_id,
                                        error_code=getattr(exc, "code", "evaluation_failed"),
                                        error=getattr(exc, "message", f"{type(exc).__name__}: {exc}"))
            write_json_atomic(out_dir / "summary.json", summary.to_json())
            answers.write(json.dumps({"done": job.submission_id, "ok": summary.ok}) + "\n")
            worker_start = 0.0
            keeper.idle()  # after the answer: freeing GPU memory does not delay the agent
    finally:
        keeper.close()


def skip_unused_optional_imports() -> None:
    """Tell transformers that scikit-learn and scipy are absent, before it loads its model code.

    Where they are installed, transformers imports both for parts no grading uses: its generation
    code imports ``sklearn.metrics`` (and with it scipy's statistics) for assisted decoding's
    confidence threshold, and its object-detection losses import ``scipy.optimize``. Together
    that is about 1.3 CPU-s of every worker's start. Grading never decodes with an assistant
    model nor loads a detection model, and scikit-learn is installed for AlpacaEval's
    length-controlled win rate, which imports it itself where it is used. Only these two checks
    in ``transformers.utils`` are answered: of transformers' other modules, only detection,
    segmentation and pose models, FNet, Pop2Piano and the GLUE metrics ask them, none a causal LM.
    """
    import transformers.utils

    for check in ("is_sklearn_available", "is_scipy_available"):
        if hasattr(transformers.utils, check):
            setattr(transformers.utils, check, lambda: False)


def main() -> int:
    from agent2rl_tui.util.procs import die_with_parent

    started = time.time()
    die_with_parent()  # the grader's death, however it comes, ends its workers
    answers = protocol_channel()
    # Pay the heavy imports before the job arrives: this is what "warm" means here. The
    # model classes and generation code are most of it (~1.5 s of the ~3 s on a CPU box).
    skip_unused_optional_imports()
    import torch  # noqa: F401
    from transformers import (  # noqa: F401
        AutoModelForCausalLM,
        AutoTokenizer,
        GenerationMixin,
        modeling_utils,  # noqa: F401
    )
    from transformers.models.llama import modeling_llama  # noqa: F401

    from agent2rl_tui.grader import evaluators  # noqa: F401
    from agent2rl_tui.grader.engines import hf, keeper  # noqa: F401

    if os.environ.get(PREIMPORT_VLLM) == "1":  # the run grades on vLLM: its import is ~5 s more
        import vllm  # noqa: F401

    serve(sys.stdin, answers, started, time.time())
    return 0


if __name__ == "__main__":
    code = main()
    # Skip interpreter teardown: with torch loaded it takes about a second, and the grader
    # waits for this process to exit. Everything we wrote is closed already.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
