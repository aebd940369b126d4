"""The example agent's loop: write training code into code/, run it, submit, iterate once.

Stage one copies ``scripts/sft.py`` (and ``prompts.py``: training prompts in the grader's
form, from the workspace's ``data/grading.py``) into ``<workspace>/code/``, runs it as a subprocess
(its output goes straight to this process's stdout, hence to the run's agent log), and
submits output/v1. Stage two then adds ``code/grpo.py`` and ``code/reward.py``, runs GRPO
from v1 and submits output/v2, so the revision each submission was made from differs in
code/. Notes go to code/NOTES.md, as an agent would keep them.

Environment: the benchmark's (WORKSPACE, MODEL_PATH, DATA_PATH, OUTPUT_DIR, TASK,
GRADING_SERVER_URL) plus optional EXAMPLE_SFT_STEPS, EXAMPLE_GRPO_STEPS (0: SFT only),
EXAMPLE_MAX_COMPLETION (GRPO's completion length, 8 for arith; GSM8K needs hundreds),
EXAMPLE_SEED, and for interactive tasks EXAMPLE_GAMES (train games to use, 0: all) and
EXAMPLE_GENERATIONS (episodes per game in a GRPO group).

An interactive task whose games the run serves (WebShop, DeepSearchQA: ``data/play.py`` is a
client of ``$TRAIN_ENV_URL``) takes it with ``service_sft.py`` (SFT on scripted demonstrations
the service rewarded) -> v1 and ``service_grpo.py`` (GRPO, rollouts through the service) -> v2.
Another interactive task (its play kit ``data/play.py`` + ``data/env.json`` in the workspace)
takes the paper's route instead: ``episodes_sft.py`` (SFT on the gold paths of the train
games, in the grader's transcript format) -> v1, then ``episodes_grpo.py`` (GRPO whose
rollouts play the game online) -> v2. A judge-graded task (Level 2: ``level`` 2 in
``data/grading.json``) has no exact answer to reward, so the agent stops after SFT on the
train responses -> v1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

from agent2rl_tui.agents.example.grader_api import GraderAPI, GraderAPIError

SCRIPTS_PACKAGE = "agent2rl_tui.agents.example.scripts"
FIRST_OF_TWO = 0.45
"""The share of the budget left an SFT stage takes when a GRPO stage follows it (which takes 0.8
of what is left then): both submit before the deadline, the grading of the second included."""


def say(msg: str) -> None:
    print(f"[example-agent] {msg}", flush=True)


def note(workspace: Path, text: str) -> None:
    code = workspace / "code"
    code.mkdir(exist_ok=True)
    with (code / "NOTES.md").open("a", encoding="utf-8") as fh:
        fh.write(text.rstrip() + "\n")


def write_code(workspace: Path, *names: str) -> list[Path]:
    """Write the named training scripts into code/ (the agent 'writing its code')."""
    code = workspace / "code"
    code.mkdir(exist_ok=True)
    written = []
    for name in names:
        path = code / name
        path.write_text(resources.files(SCRIPTS_PACKAGE).joinpath(name).read_text(encoding="utf-8"),
                        encoding="utf-8")
        written.append(path)
    say(f"wrote {', '.join(str(p.relative_to(workspace)) for p in written)}")
    return written


def run_code(workspace: Path, script: str, *args: str) -> int:
    """``python -u code/<script> args...`` in the workspace, its output streamed to ours."""
    cmd = [sys.executable, "-u", f"code/{script}", *args]
    say("running " + " ".join(["python", *cmd[2:]]))
    return subprocess.run(cmd, cwd=workspace, check=False).returncode


def count_rows(path: Path) -> int:
    with path.open(encoding="utf-8") as fh:
        return sum(1 for line in fh if line.strip())


def submit(api: GraderAPI, model_dir: Path) -> dict[str, Any]:
    """POST /submit and wait for the score; a refusal's answer is returned as is."""
    try:
        return api.submit(str(model_dir))
    except GraderAPIError as exc:
        return {"error": "unreachable", "detail": str(exc)}


def main() -> int:
    try:
        workspace = Path(os.environ.get("WORKSPACE", ".")).resolve()
        model_path = Path(os.environ["MODEL_PATH"])
        data_path = Path(os.environ["DATA_PATH"])
        output_dir = Path(os.environ["OUTPUT_DIR"])
        url = os.environ["GRADING_SERVER_URL"]
    except KeyError as exc:
        say(f"missing environment variable {exc}; run me through agent2rl-tui")
        return 2
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    sft_steps = int(os.environ.get("EXAMPLE_SFT_STEPS", "1000"))
    grpo_steps = int(os.environ.get("EXAMPLE_GRPO_STEPS", "400"))
    max_completion = int(os.environ.get("EXAMPLE_MAX_COMPLETION", "8"))
    seed = int(os.environ.get("EXAMPLE_SEED", "0"))
    api = GraderAPI(url)
    train = data_path / "train.jsonl"
    n_rows = count_rows(train)
    say(f"task {os.environ.get('TASK')}: {n_rows} training rows, base model {model_path.name}")
    try:
        remaining = api.time().get("remaining")
        say(f"budget left: {remaining:.0f} s" if isinstance(remaining, (int, float)) else "budget left: unknown")
    except GraderAPIError as exc:
        say(f"could not read the budget ({exc}); going on")
    if (data_path / "env.json").exists() and not (data_path / "play.py").exists():
        say("this interactive task ships no data/play.py to replay its episodes with; the example agent "
            "has no route for it and stops (the baseline stands)")
        note(workspace, "# No plan: no data/play.py for this task\n")
        return 0
    if (data_path / "env.json").exists() and served_task(data_path):  # games behind $TRAIN_ENV_URL
        return service_route(workspace, api, model_path, data_path, output_dir, sft_steps, grpo_steps, seed)
    if (data_path / "env.json").exists():  # an interactive task: its play kit is in data/
        return interactive_route(workspace, api, model_path, data_path, output_dir, sft_steps, grpo_steps, seed)
    if judge_graded(data_path):  # no exact answer to reward: SFT on the good responses, then stop
        note(workspace, f"# Plan (judge-graded task)\n- SFT {sft_steps} steps on {n_rows} instruction/response "
                        "rows -> output/v1 (no exact-match reward to run GRPO with)\n")
        done = stage(workspace, api, "SFT", "sft.py", output_dir / "v1", "--model", str(model_path), "--data",
                     str(train), "--steps", str(sft_steps), "--seed", str(seed), helpers=("prompts.py",))
        return 0 if done is not None else 1
    note(workspace, f"# Plan\n- SFT {sft_steps} steps on {n_rows} rows -> output/v1\n"
                    f"- GRPO {grpo_steps} steps, exact-match reward, from v1 -> output/v2\n")

    v1 = output_dir / "v1"
    if stage(workspace, api, "SFT", "sft.py", v1, "--model", str(model_path), "--data", str(train),
             "--steps", str(sft_steps), "--seed", str(seed), helpers=("prompts.py",),
             share=FIRST_OF_TWO if grpo_steps > 0 else 0.8) is None:
        return 1
    if grpo_steps <= 0:
        say("EXAMPLE_GRPO_STEPS=0: SFT only, done")
        return 0
    # Stage two: a GRPO script and its reward, a new revision of code/, run from v1.
    if stage(workspace, api, "GRPO", "grpo.py", output_dir / "v2", "--model", str(v1), "--data", str(train),
             "--steps", str(grpo_steps), "--seed", str(seed), "--max-completion", str(max_completion),
             helpers=("reward.py",)) is None:
        return 1
    return 0


def judge_graded(data_path: Path) -> bool:
    """A Level-2 task (its grading kit says so): a judge compares answers, nothing checks them exactly."""
    try:
        return json.loads((data_path / "grading.json").read_text(encoding="utf-8")).get("level") == 2
    except (OSError, ValueError):
        return False


def interactive_route(workspace: Path, api: GraderAPI, model_path: Path, data_path: Path, output_dir: Path,
                      sft_steps: int, grpo_steps: int, seed: int) -> int:
    """The paper's route on a game task: SFT warm-up on expert trajectories, then GRPO online."""
    games = os.environ.get("EXAMPLE_GAMES", "0")
    note(workspace, f"# Plan (interactive task)\n- SFT {sft_steps} steps on the train games' gold paths, "
                    f"in the grader's transcript format (data/play.py) -> output/v1\n"
                    f"- GRPO {grpo_steps} steps with online rollouts through the game, reward = the game's "
                    f"score, from v1 -> output/v2\n")
    v1 = output_dir / "v1"
    if stage(workspace, api, "SFT", "episodes_sft.py", v1, "--model", str(model_path), "--data", str(data_path),
             "--steps", str(sft_steps), "--games", games, "--seed", str(seed), share=FIRST_OF_TWO) is None:
        return 1
    if stage(workspace, api, "GRPO online", "episodes_grpo.py", output_dir / "v2", "--model", str(v1),
             "--data", str(data_path), "--steps", str(grpo_steps), "--games", games, "--seed", str(seed),
             "--generations", os.environ.get("EXAMPLE_GENERATIONS", "4")) is None:
        return 1
    return 0


def served_task(data_path: Path) -> bool:
    """An interactive task whose games the run serves (a store, a search engine): its kit is a client."""
    try:
        return json.loads((data_path / "env.json").read_text(encoding="utf-8")).get("kind") in ("webshop", "search-qa")
    except (OSError, ValueError):
        return False


def service_route(workspace: Path, api: GraderAPI, model_path: Path, data_path: Path, output_dir: Path,
                  sft_steps: int, grpo_steps: int, seed: int) -> int:
    """The paper's route where the games are served: SFT on demonstrations the service rewarded,
    then GRPO with online rollouts through the service."""
    games = os.environ.get("EXAMPLE_GAMES", "0")
    note(workspace, f"# Plan (interactive task, games served at $TRAIN_ENV_URL)\n- SFT {sft_steps} steps on "
                    "scripted demonstrations the service rewarded, in the grader's prompts -> output/v1\n"
                    f"- GRPO {grpo_steps} steps, rollouts through the service, reward = the service's, from v1 -> "
                    "output/v2\n")
    v1 = output_dir / "v1"
    stage(workspace, api, "SFT", "service_sft.py", v1, "--model", str(model_path), "--data", str(data_path),
          "--steps", str(sft_steps), "--games", games, "--seed", str(seed),
          share=FIRST_OF_TWO if grpo_steps > 0 else 0.8)
    start = v1 if (v1 / "config.json").exists() else model_path
    if start == model_path:
        say("no SFT model: GRPO starts from the base model")
    if grpo_steps <= 0:
        return 0
    done = stage(workspace, api, "GRPO online", "service_grpo.py", output_dir / "v2", "--model", str(start),
                 "--data", str(data_path), "--steps", str(grpo_steps), "--games", games, "--seed", str(seed),
                 "--generations", os.environ.get("EXAMPLE_GENERATIONS", "4"))
    return 0 if done is not None else 1


SAVE_S = 20.0
"""What a stage keeps, of its share of the budget, to save its model and submit it."""


def until_for(api: GraderAPI, share: float) -> float | None:
    """When a stage must stop training: ``share`` of the budget left, less ``SAVE_S`` (None: unknown)."""
    try:
        remaining = api.time().get("remaining")
    except GraderAPIError:
        return None
    if not isinstance(remaining, (int, float)):
        return None
    return time.time() + max(0.0, remaining * share - SAVE_S)


def stage(workspace: Path, api: GraderAPI, name: str, script: str, out: Path, *args: str,
          helpers: tuple[str, ...] = (), share: float = 0.8) -> dict[str, Any] | None:
    """One stage: write ``script`` (and ``helpers``) into code/, run it to train ``out`` until its
    ``share`` of the budget left is used (``timebox.py``: it stops and saves what it has), submit
    it, note the score. None when the script failed (the stage before stays the best)."""
    write_code(workspace, *helpers, "lean_imports.py", "timebox.py", script)
    started = time.time()
    until = until_for(api, share)
    if until is not None:
        say(f"{name}: training until {time.strftime('%H:%M:%S', time.gmtime(until))} UTC "
            f"({until - started:.0f} s), then saving and submitting")
    rc = run_code(workspace, script, *args, *(("--until", f"{until:.0f}") if until is not None else ()),
                  "--out", str(out))
    if rc != 0:
        say(f"code/{script} failed (exit {rc}); stopping" + (" with v1 as the best" if out.name != "v1" else ""))
        note(workspace, f"- {name} failed (exit {rc})")
        return None
    say(f"{name} done in {time.time() - started:.1f} s; submitting {out}")
    result = submit(api, out)
    say(f"submission {out.name}: {json.dumps(result)}")
    note(workspace, f"- {out.name} ({name}): score {result.get('score')} (baseline {result.get('baseline_score')}); "
                    f"best so far {result.get('best')}")
    summarize_attempt(workspace, name, script, args, result, time.time() - started)
    return result


def summarize_attempt(workspace: Path, name: str, script: str, args: tuple[str, ...], result: dict[str, Any],
                      took: float) -> None:
    """Append this attempt to summary.md, in the form the run's instructions ask for."""
    path = workspace / "summary.md"
    text = path.read_text(encoding="utf-8") if path.exists() else "# Run summary\n"
    n = text.count("\n## Attempt ") + 1
    flags = " ".join(a for a in args if not a.startswith("/"))
    best = result.get("best") or {}
    scored = result.get("status") == "scored"
    why = ("SFT first: the base model cannot answer in the format yet" if n == 1
           else "GRPO from the SFT model: reward the exact answer")
    text += (f"\n## Attempt {n} ({time.strftime('%Y-%m-%d %H:%M', time.gmtime())}, took {took:.0f}s)\n"
             f"- **Status**: {'success' if scored else 'failed'} (exit code 0)\n"
             f"- **Score**: {result.get('score')} | Improvement: {result.get('improvement')} | "
             f"Best: {best.get('score')} (submission {best.get('submission_id')})\n"
             f"- **Training type**: {name.split()[0]}\n"
             f"- **Key configuration**: code/{script} {flags}\n"
             f"- **What was done**: {name} with code/{script}, then submitted it\n"
             f"- **Why**: {why}\n"
             f"- **Problems / progress**: {'none' if scored else result.get('error') or 'not scored'}\n")
    path.write_text(text, encoding="utf-8")
