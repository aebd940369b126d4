"""The run folder and the agent's workspace inside it (docs/architecture.md, "The run folder").

``workspace/`` is the agent's cwd and nothing else: code/, output/, data/ (the train split
only, and the grader's rules as a program, read-only), models/<base> (a read-only copy of the base model), description.md,
instructions.md and run_meta.json. The record (run.db, logs, evals, report) lives beside it
so nothing the agent writes is trusted as a score, a time or a revision, and the eval
split never enters it.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from agent2rl_tui.envs import EnvSpec
from agent2rl_tui.envs.search import SearchQASpec
from agent2rl_tui.record.modes import mode_section
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.tasks import decoding, grading_rules
from agent2rl_tui.tasks.registry import InferenceSettings, Task, task_cache, write_jsonl
from agent2rl_tui.trainenv import default_max_envs
from agent2rl_tui.util.timeutil import human_duration, iso

RECORD_DIRS = ("logs", "evals", "report")
WORKSPACE_DIRS = ("code", "output", "data", "models")
# Files a model folder may hold that the copy skips (training leftovers, not the model).
_SKIP_IN_MODEL_COPY = shutil.ignore_patterns("optimizer.pt", "scheduler.pt", "rng_state*.pth", "checkpoint-*")

INSTRUCTIONS = """\
# How this run works

You are in a workspace with a base model, training data and a time budget. Your goal is
to post-train the model so that it scores as high as possible on the task described in
`description.md`, within the budget. You may submit as many models as you like; the
result of the run is the best score among your submissions.
{mode_section}
## The loop
1. Explore: read `description.md`, look at `data/`, try the base model in `models/`.
2. Write your code in `code/` ({what_goes}).
3. Train and save a full model (weights, config and tokenizer, via `save_pretrained`) to a
   new folder under `output/`, e.g. `output/v1`.
4. Submit it to the grader (below) and read the score; iterate.

## The workspace
| path | what |
|---|---|
| `code/` | your code; every revision of it is recorded |
| `output/` | your models (`$OUTPUT_DIR`) |
| `data/` | the train split (read-only): {data_files} |
| `models/{base_model}/` | the base model (read-only, `$MODEL_PATH`) |
| `run_meta.json` | the budget: start time, timeout, deadline (UNIX seconds) |

## Environment variables
| name | value |
|---|---|
| `TASK` | `{task}` |
| `BASE_MODEL` | `{base_model}` |
| `WORKSPACE` | this folder |
| `MODEL_PATH` | the base model folder |
| `DATA_PATH` | `data/` |
| `OUTPUT_DIR` | `output/` |
| `GRADING_SERVER_URL` | the grader's address (it includes a secret; do not share it) |

## The grading API
- `POST $GRADING_SERVER_URL/submit` with JSON `{{"model_path": "output/v1"}}` (relative to
  the workspace, or absolute) evaluates the model and answers when it is scored:
  `{{"submission_id": 1, "status": "scored", "score": 65.0, "baseline_score": 45.0,
  "improvement": 20.0, "best": {{"submission_id": 1, "score": 65.0}}, "total_submissions": 1}}`.
  Add `?wait=0` to get `202 {{"submission_id": 1, "status": "queued"}}` at once instead.
  Evaluations run one at a time, in the order they arrive.
- `GET $GRADING_SERVER_URL/submissions` and `/submissions/<id>`: status `queued`,
  `evaluating`, `scored`, `failed` or `rejected`, with the score or the error.
- `GET $GRADING_SERVER_URL/time`: `start_time`, `timeout_s`, `end_time`, `now`,
  `remaining` (seconds).
- `GET $GRADING_SERVER_URL/health`: the grader's status and the baseline score.

Example: `curl -s -X POST "$GRADING_SERVER_URL/submit" -H 'Content-Type: application/json'
-d '{{"model_path": "output/v1"}}'`

A refused submission gets a 4xx answer `{{"error": CODE, "detail": WHAT TO DO}}`: 400 bad
JSON or no `model_path`; 403 a path outside the workspace (symlinks and `..` are resolved);
404 no such folder; 422 not a full model (no `config.json`, no weights, or a LoRA adapter);
409 the budget is over.

## Your running summary
After every training attempt and every submission, append a section to `summary.md` in this
folder (create it with a first line `# Run summary`; never rewrite earlier sections). It is
recorded with your code. Each section, in this form:

```
## Attempt N (YYYY-MM-DD HH:MM, took Xs)
- **Status**: success / failed (exit code X)
- **Score**: X | Improvement: X | Best: X (attempt N)
- **Training type**: SFT / GRPO / PPO / DPO / copy_model / unknown
- **Key configuration**: lr=X, epochs=X, batch=X, ... (from your code)
- **What was done**: the strategy (training method, reward design, data processing)
- **Why**: why this strategy, from the evidence of the previous attempt (scores, logs)
- **Problems / progress**: what went wrong, with the error and a failure type
  (code_error_runtime, rollout_logic_wrong, timeout_no_submission, copy_model_fallback,
  training_diverged, unknown), or what improved
- **Key code**: the 3-5 lines that best show this attempt's strategy
```

## Rules
- The budget is {budget} of wall-clock time from the moment you start; at the deadline
  your processes get SIGTERM and, {grace} later, SIGKILL. Submissions received before the
  deadline are still scored.
- Submit full models. If you train a LoRA adapter, merge it first
  (`model = model.merge_and_unload(); model.save_pretrained(DIR); tokenizer.save_pretrained(DIR)`).
- Only paths under this workspace can be submitted; do not read or write outside it. The run
  is contained unless its record says otherwise: outside this workspace the system is
  read-only, and `$HOME` and `/tmp` are this run's own.
- Submitting the base model, or a copy of it, is recorded as such (by its weights).
- The eval data is held by the grader; you never see it. Train on `data/` only.
"""


def make_run_folder(run_dir: Path) -> None:
    """Create the empty record folders and workspace skeleton."""
    for name in RECORD_DIRS:
        (run_dir / name).mkdir(parents=True, exist_ok=True)
    for name in WORKSPACE_DIRS:
        (run_dir / "workspace" / name).mkdir(parents=True, exist_ok=True)


def _make_read_only(root: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for f in filenames:
            p = Path(dirpath) / f
            p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) | stat.S_IRUSR)
        Path(dirpath).chmod(0o555)


def recorded_decoding_row(run_dir: Path) -> str | None:
    """The model-table row the run's record holds (``lifecycle.decoding_row_for``), or None."""
    if not (run_dir / "run.db").exists():
        return None
    with RunStore.of_run(run_dir) as store:
        return store.config().decoding_row


def populate_workspace(
    run_dir: Path, task: Task, base_model_source: Path, base_model: str, *, budget_s: float, grace_s: float,
    prompt_profile: str | None = None, decoding_row: str | None = None, mode: str | None = None,
) -> Path:
    """Copy the base model and train split in, write description.md and instructions.md, and the
    grader's rules as a program: data/grading.py (Level 1) or data/play.py (Level 3).

    ``decoding_row``: the base model's row of the reference's model table where the profile uses
    it (None: the one the run's record holds), so the kit states the decoding the grader applies.
    ``mode``: the training mode the instructions state (``record.modes``; None: free)."""
    settings = decoding.run_settings(task, prompt_profile, decoding_row or recorded_decoding_row(run_dir))
    ws = run_dir / "workspace"
    model_dst = ws / "models" / base_model
    if not model_dst.exists():
        shutil.copytree(base_model_source, model_dst, ignore=_SKIP_IN_MODEL_COPY)
        _make_read_only(model_dst)
    data_dir = ws / "data"
    train_file = data_dir / "train.jsonl"
    if not train_file.exists():
        write_jsonl(train_file, task.load_split("train"))
        if task.level == 3:
            write_play_kit(data_dir, task, settings)
        else:
            write_grading_kit(data_dir, task, settings)
        _make_read_only(data_dir)
    (ws / "description.md").write_text(description_text(task, settings), encoding="utf-8")
    data_files = ", ".join(f"`{p.name}`" for p in sorted(data_dir.iterdir()))
    constraint = mode_section(mode)  # the mode first, where the loop says what goes
    text = INSTRUCTIONS.format(task=task.name, base_model=base_model, data_files=data_files,
                               budget=human_duration(budget_s), grace=human_duration(grace_s),
                               mode_section=constraint, what_goes="within your training mode, above" if constraint
                               else "SFT, GRPO, PPO, online rollouts: anything goes")
    if task.level == 3:
        text += train_env_section(task)
    (ws / "instructions.md").write_text(text, encoding="utf-8")
    return ws


def description_text(task: Task, settings: InferenceSettings) -> str:
    """description.md for the run's profile; where the base model's row of the model table sets
    the decoding, a line saying so follows the profile's own words (it holds where they differ)."""
    text = task.description_for(settings.prompt_profile)
    if not settings.decoding_row:
        return text
    line = (f"- **Decoding for this base model**: {decoding.describe(settings)}, as AutoRL-Bench decodes it "
            "(`data/grading.json` holds it); where this differs from the decoding stated above, this line holds.")
    about = settings.about.strip()
    if about and about in text:
        return text.replace(about, about + "\n" + line, 1)
    return text.rstrip("\n") + "\n\n" + line + "\n"


WORKSPACE_PROGRAMS = Path(__file__).with_name("workspace_programs")
PLAY_SERVICE = WORKSPACE_PROGRAMS / "play_service.py"
PLAY_PROGRAMS = {"textworld-express": WORKSPACE_PROGRAMS / "play_twx.py",
                 "alfworld": WORKSPACE_PROGRAMS / "play_alfworld.py",
                 "webshop": PLAY_SERVICE,
                 "search-qa": PLAY_SERVICE}
"""The program an interactive task's agent gets as data/play.py, by the kind of its [env]: the
games it can hold itself are played in process, the others (a store, a search engine and its
key) through the run's train-environment service (``$TRAIN_ENV_URL``)."""

TRAIN_ENV_SECTION = """
## Playing the train games
This task is interactive: you collect your own trajectories. `$TRAIN_ENV_URL` serves the train
split's games as the grader plays its own (the same prompt turn by turn, action rule and step
limit); `data/play.py` is a client of it ({play_note}). Every call is recorded.
- `GET $TRAIN_ENV_URL/games`: the train games and the limits.
- `POST $TRAIN_ENV_URL/envs`: a new environment, `{{"env_id": N}}` (at most {max_envs} at once;
  `DELETE $TRAIN_ENV_URL/envs/N` closes one).
- `POST $TRAIN_ENV_URL/envs/N/reset` with `{{"game": GAME}}`: the first prompt.{reward_note}
- `POST $TRAIN_ENV_URL/envs/N/step` with `{{"completion": TEXT}}` (the model's whole completion;
  the grader's rule reads the action from it) or `{{"action": TEXT}}`: the observation, reward,
  `done`, `won` and the next `prompt`.
Only train games are served; the grader's games are refused.
"""


def train_env_section(task: Task) -> str:
    """How an interactive task's agent reaches its train games (``TRAIN_ENV_SECTION``)."""
    spec = EnvSpec.from_table(task.env_table)
    in_process = PLAY_PROGRAMS.get(spec.kind) not in (None, PLAY_SERVICE)
    play_note = ("it also plays them in this process, faster, with the same episodes" if in_process
                 else "`python data/play.py games` lists them")
    reward_note = ("" if spec.kind != "search-qa" else " A question's answer is rewarded as "
                   "`\"reward\"` asks: `exact` (default) or `f1` against the gold answer, or `judge` (the run's judge; "
                   "its calls are capped). Searches go to the run's search engine (a budget a minute).")
    return TRAIN_ENV_SECTION.format(play_note=play_note, reward_note=reward_note,
                                    max_envs=default_max_envs(spec.pool_size))


GRADING_PROGRAM = Path(grading_rules.__file__)
"""The Level-1 rules the grader itself uses, copied into the workspace as data/grading.py."""


def write_grading_kit(data_dir: Path, task: Task, settings: InferenceSettings) -> None:
    """data/grading.py and data/grading.json: the run's prompt profile (worked examples included)
    and the grader's own prompt and answer rules, runnable."""
    spec = task.grading_spec(settings)
    (data_dir / "grading.json").write_text(json.dumps(spec, indent=2, ensure_ascii=False), encoding="utf-8")
    shutil.copyfile(GRADING_PROGRAM, data_dir / "grading.py")


def write_play_kit(data_dir: Path, task: Task, settings: InferenceSettings) -> None:
    """data/play.py and data/env.json: the grader's prompt, action rule and limits, runnable.

    ALFWorld's kit also gets the few-shot examples file and, under data/games/, the game
    files of the train split only (never the grader's games).
    """
    spec = EnvSpec.from_table(task.env_table)
    program = PLAY_PROGRAMS.get(spec.kind)
    env = {"kind": spec.kind, "game": getattr(spec, "game", ""), "params": getattr(spec, "params", ""),  # TWX's
           "max_steps": spec.max_steps, "header": settings.prompt_template,
           "max_new_tokens": settings.max_new_tokens, "stop": list(settings.stop)}
    if spec.kind == "alfworld":
        from agent2rl_tui.tasks.alfworld import GAME_FILE, GAMES_DIR, copy_games

        env |= {"think_prefix": spec.think_prefix, "examples": spec.examples, "games": GAMES_DIR}
        if spec.examples:
            shutil.copyfile(task.folder / spec.examples, data_dir / Path(spec.examples).name)
            env["examples"] = Path(spec.examples).name
        copy_games(task_cache(task) / GAMES_DIR, [row["game"] for row in task.load_split("train")],
                   data_dir / GAMES_DIR, files=(GAME_FILE,))
    if isinstance(spec, SearchQASpec):
        env |= {"transcript": settings.transcript or spec.transcript, "top_k": spec.top_k}
    (data_dir / "env.json").write_text(json.dumps(env, indent=2), encoding="utf-8")
    if program is not None:
        shutil.copyfile(program, data_dir / "play.py")


def write_run_meta(ws: Path, meta: dict[str, Any]) -> None:
    """run_meta.json: the budget as the agent sees it (the record keeps its own copy)."""
    data = dict(meta)
    for key in ("start_time", "end_time"):
        if data.get(key) is not None:
            data[f"{key}_iso"] = iso(data[key])
    tmp = ws / "run_meta.json.tmp"
    tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
    tmp.replace(ws / "run_meta.json")
