"""Synthetic run folders built through the project's own store, for snapshots, benchmarks and
the TUI tests.

Everything is written the way the real pipeline writes it (RunStore, the transcript
recorder, evals/<n>/results.jsonl, git snapshots), with fixed times so that screens drawn
from them are the same on every machine. Large histories (thousands of revisions) are made
with ``git fast-import`` and recorded through the same revisions table.
"""

from __future__ import annotations

import json
import random
import subprocess
import tempfile
from pathlib import Path

from agent2rl_tui.envs.twx import TextWorldExpress
from agent2rl_tui.record.revisions import BRANCH, GitRepo, _parse_changes, init_repo
from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.record.transcripts import TranscriptRecorder
from agent2rl_tui.run.streams import make_normalizer
from agent2rl_tui.run.workspace import make_run_folder
from agent2rl_tui.util.timeutil import iso

T0 = 1_795_400_000.0  # 2026-11-22T23:33:20Z


def make_run(root: Path, name: str, *, status: str = "finished", task: str = "arith", agent: str = "example",
             driver: str | None = "scripted", budget_s: float = 300.0, t0: float = T0, scores: tuple[float, ...] = (44.0, 69.0),
             baseline: float = 3.0, n_items: int = 20, heartbeat: float | None = None) -> Path:
    run = root / name
    make_run_folder(run)
    rng = random.Random(name)
    with RunStore(run / "run.db", create=True) as store:
        ended = t0 + budget_s * 0.5 if status not in ("running", "lost") else None
        store.create_run(RunRecord(id=name, task=task, agent=agent, driver=driver, base_model="tiny-llama",
                         base_model_source="/models/tiny-llama", budget_s=budget_s, grace_s=10.0, status=status,
                         created_at=t0 - 20, budget_start=t0, deadline=t0 + budget_s, ended_at=ended,
                         agent_ended_at=ended, agent_exit_code=0 if ended else None,
                         end_reason="agent_exited" if ended else None, heartbeat_at=heartbeat or ended or t0,
                         config_json=json.dumps({"task_folder": "tasks/arith"})))
        _submission(store, run, "baseline", None, baseline, t0 - 10, n_items, rng)
        for i, score in enumerate(scores, start=1):
            _submission(store, run, "agent", f"output/v{i}", score, t0 + 30.0 * i, n_items, rng, revision=i + 1)
    return run


def _submission(store: RunStore, run: Path, kind: str, path: str | None, score: float, at: float, n: int,
                rng: random.Random, revision: int | None = None) -> None:
    correct = round(score / 100 * n)
    sub_id = store.add_submission(kind=kind, status="scored", model_path=path or "models/tiny-llama",
                                  score=100.0 * correct / n, n_items=n, n_correct=correct, weights_hash=f"h{score}",
                                  engine="transformers", revision_seq=revision)
    store.update_submission(sub_id, received_at=at, started_at=at + 0.1, finished_at=at + 2.5)
    hits = set(rng.sample(range(n), correct))
    out = run / "evals" / str(sub_id)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "results.jsonl").open("w") as fh:
        for i in range(n):
            a, b = divmod(i * 7 + 3, 10)
            fh.write(json.dumps({"index": i, "prompt": f"{a}+{b}=", "output": f"#### {a + b if i in hits else 0}",
                                 "extracted": str(a + b if i in hits else 0), "gold": str(a + b),
                                 "correct": i in hits}) + "\n")


def add_revisions(run: Path, files_by_revision: list[dict[str, str]], t0: float = T0, step_s: float = 20.0,
                  at: list[float] | None = None) -> None:
    """Commit each dict of {path: content} as one revision (git fast-import), and record them.

    Revision i is made at ``at[i]`` where given, else at ``t0 + i * step_s``."""
    times = at if at is not None else [t0 + i * step_s for i in range(len(files_by_revision))]
    git_dir = run / "snapshots.git"
    init_repo(git_dir)
    stream: list[bytes] = []
    for i, files in enumerate(files_by_revision):
        at_i = int(times[i])
        msg = b"synthetic snapshot"
        stream.append(b"commit " + BRANCH.encode() + b"\n")
        stream.append(f"mark :{i + 1}\n".encode())
        stream.append(f"committer agent2rl-tui <snapshots@agent2rl-tui> {at_i} +0000\n".encode())
        stream.append(f"data {len(msg)}\n".encode() + msg + b"\n")
        if i:
            stream.append(f"from :{i}\n".encode())
        for path, content in files.items():
            data = content.encode()
            if content == "":
                stream.append(f"D {path}\n".encode())
            else:
                stream.append(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")
        stream.append(b"\n")
    subprocess.run(["git", f"--git-dir={git_dir}", "fast-import", "--quiet"],
                   input=b"".join(stream), check=True)
    repo = GitRepo(git_dir)
    shas = repo.run("rev-list", "--reverse", BRANCH).split()
    rows = []
    parent = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
    for i, sha in enumerate(shas):
        changes = _parse_changes(repo, parent, sha)
        rows.append((i + 1, sha, times[i], "start" if i == 0 else "watch", len(changes),
                     sum(c["added"] for c in changes), sum(c["removed"] for c in changes), json.dumps(changes),
                     json.dumps({"output/": 1, "data/": 1, "models/": 1})))
        parent = sha
    with RunStore.of_run(run) as store, store.transaction() as conn:
        conn.executemany("INSERT INTO revisions (seq, sha, at, trigger, files_changed, added, removed, paths_json,"
                         " ignored_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)


def add_transcript(run: Path, lines: list[tuple[str, float]], fmt: str = "claude-stream-json") -> None:
    rec = TranscriptRecorder(run, make_normalizer(fmt))
    for line, at in lines:
        rec.stdout_line(line, at)
    rec.close()


def add_llm_calls(run: Path, calls: list[tuple[float, int, int]]) -> None:
    """Metered driver-API calls, each as the meter records one: (at, input tokens, output tokens)."""
    with RunStore.of_run(run) as store:
        for at, tokens_in, tokens_out in calls:
            store.add_llm_call(at=at, protocol="anthropic", endpoint="generate", method="POST", path="/v1/messages",
                               model="claude-sonnet-4-5", status=200, latency_s=1.0, streamed=True,
                               input_tokens=tokens_in, output_tokens=tokens_out, complete=True)


def add_logs(run: Path, t0: float = T0) -> None:
    logs = run / "logs"
    (logs / "agent.log").write_text("".join(f"{iso(t0 + i)} [example-agent] step {i}\n" for i in range(50)))
    (logs / "grader.log").write_text(f"{iso(t0)}Z INFO agent2rl.grader: submission 1 scored 44.00\n")
    (logs / "supervisor.log").write_text(f"{iso(t0)} starting agent example\n")


def claude_lines(n: int, t0: float = T0) -> list[tuple[str, float]]:
    out = []
    for i in range(n):
        if i % 3 == 0:
            ev = {"type": "assistant", "message": {"id": f"m{i}", "content": [
                {"type": "text", "text": f"Plan step {i}: train with lr {1e-3 * (i % 5 + 1):.0e}"}],
                "usage": {"input_tokens": 1200, "output_tokens": 40}}}
        elif i % 3 == 1:
            ev = {"type": "assistant", "message": {"id": f"m{i}", "content": [
                {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": f"python code/train.py --step {i}"}}]}}
        else:
            ev = {"type": "user", "message": {"content": [
                {"type": "tool_result", "tool_use_id": f"t{i - 1}", "content": f"loss {1.0 / (i + 1):.4f}"}]}}
        out.append((json.dumps(ev), t0 + 2.0 * i))
    return out


def standard_run(root: Path) -> Path:
    """The snapshot tests' run: two submissions, three revisions, a short transcript, logs."""
    run = make_run(root, "20261122T233320-arith-example")
    add_revisions(run, [
        {"description.md": "# Task: arith\n", "code/train.py": "LR = 1e-3\nSTEPS = 100\n"},
        {"code/train.py": "LR = 3e-4\nSTEPS = 1000\n", "code/NOTES.md": "- v1: SFT\n"},
        {"code/train.py": "LR = 3e-4\nSTEPS = 1000\nGRPO = True\n", "code/NOTES.md": "- v1: SFT\n- v2: GRPO\n"},
    ])
    add_transcript(run, claude_lines(30))
    add_logs(run)
    return run


# -- Level 3: episodes of real games -------------------------------------------------------

TWC = ("twc", "numLocations=1,numItemsToPutAway=1,includeDoors=0,limitInventorySize=0")
"""The twc task's game and parameters (tasks/twc/task.toml)."""


def twc_gold_paths(games: list[str], host: TextWorldExpress | None = None) -> dict[str, list[str]]:
    """Each twc game's gold action sequence, from the simulator (in ``host``'s JVM where given)."""
    env = TextWorldExpress(*TWC, share_jvm_with=host)
    try:
        gold = {}
        for game in games:
            env.reset(game)
            gold[game] = env.gold_actions() or []
        return gold
    finally:
        env.close()


def play_twc(games: list[str], plans: list[str], *, max_steps: int = 8, context_chars: int | None = 4000,
             gold: dict[str, list[str]] | None = None, host: TextWorldExpress | None = None) -> list[dict]:
    """Result lines of twc games played by a scripted policy, exactly as the grader writes them
    (the real episode runner on the real TextWorldExpress; needs Java).

    ``plans[i]`` plays ``games[i]``: ``"gold"`` follows the game's gold path (completions that
    say more than the action, as a model's do), ``"nonsense"`` sends an action the game does
    not know until the step limit, ``"look"`` looks around again and again: long
    observations, until the transcript outgrows ``context_chars`` (None: the step limit).
    The simulators run in ``host``'s JVM where given, else in one JVM of their own (a JVM start is
    most of a small run's time).
    """
    from agent2rl_tui.grader.episode_runner import EpisodeFormat, Pending, play
    from agent2rl_tui.grader.evaluators.episodes import episode_result

    paths = gold if gold is not None else twc_gold_paths([g for g, p in zip(games, plans, strict=True) if p == "gold"],
                                                         host)
    plan_of = dict(zip(games, plans, strict=True))

    def policy(batch: list[Pending]) -> list[str]:
        out = []
        for p in batch:
            ep, plan = p.episode, plan_of[p.episode.game]
            if plan == "gold":
                out.append(f" {paths[ep.game][ep.steps]}" + ("\nI should find where it belongs." if ep.steps % 2 else ""))
            elif plan == "look":
                out.append(" look around")
            else:
                out.append(" dance with the furniture\n> dance")
        return out

    fits = (lambda prompt: len(prompt) <= context_chars) if context_chars else None
    pool: list[TextWorldExpress] = []

    def make() -> TextWorldExpress:  # twx.maker's way: the pool's simulators in one JVM
        jvm = host or next((env for env in pool if env.jvm_up), None)
        pool.append(TextWorldExpress(*TWC, step_limit=max_steps, share_jvm_with=jvm))
        return pool[-1]

    episodes = play(games, make, policy, fmt=EpisodeFormat(header="Your task: {goal}\n"), max_steps=max_steps,
                    pool_size=2, fits=fits)
    return [episode_result(ep).to_dict() for ep in episodes]


def make_episode_run(root: Path, name: str, plans: list[list[str]], *, games: list[str] | None = None,
                     max_steps: int = 8, context_chars: int | None = 4000, t0: float = T0) -> Path:
    """A finished Level-3 (twc) run: the baseline played ``plans[0]``, submission n ``plans[n]``."""
    games = games or [f"test:{20000 + i}" for i in range(len(plans[0]))]
    host = TextWorldExpress(*TWC)  # one JVM for the whole run: its gold paths and every submission's games
    try:
        return _episode_run(root, name, plans, games, max_steps, context_chars, t0, host)
    finally:
        host.close()


def _episode_run(root: Path, name: str, plans: list[list[str]], games: list[str], max_steps: int,
                 context_chars: int | None, t0: float, host: TextWorldExpress) -> Path:
    gold = twc_gold_paths(games, host) if any("gold" in p for p in plans) else {}
    run = root / name
    make_run_folder(run)
    with RunStore(run / "run.db", create=True) as store:
        store.create_run(RunRecord(id=name, task="twc", agent="example", driver="scripted", base_model="tiny-llama",
                         base_model_source="/models/tiny-llama", budget_s=300.0, grace_s=10.0, status="finished",
                         created_at=t0 - 20, budget_start=t0, deadline=t0 + 300.0, ended_at=t0 + 150.0,
                         agent_ended_at=t0 + 150.0, agent_exit_code=0, end_reason="agent_exited",
                         heartbeat_at=t0 + 150.0, config_json=json.dumps({"task_folder": "tasks/twc"})))
        for n, sub_plans in enumerate(plans):
            results = play_twc(games, sub_plans, max_steps=max_steps, context_chars=context_chars, gold=gold,
                               host=host)
            won = sum(r["correct"] for r in results)
            at = t0 - 10 if n == 0 else t0 + 30.0 * n
            sub_id = store.add_submission(
                kind="baseline" if n == 0 else "agent", status="scored",
                model_path="models/tiny-llama" if n == 0 else f"output/v{n}", score=100.0 * won / len(results),
                n_items=len(results), n_correct=won, weights_hash=f"e{n}", engine="transformers",
                revision_seq=None if n == 0 else n + 1)
            store.update_submission(sub_id, received_at=at, started_at=at + 0.1, finished_at=at + 2.5)
            out = run / "evals" / str(sub_id)
            out.mkdir(parents=True, exist_ok=True)
            with (out / "results.jsonl").open("w", encoding="utf-8") as fh:
                for r in results:
                    fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    return run


# -- a run of the example agent, without running it ----------------------------------------

EXAMPLE_SCRIPTS = "agent2rl_tui.agents.example.scripts"
"""The training scripts the example agent writes into code/ (agents/example/agent.py: write_code)."""


def example_script(name: str) -> str:
    from importlib import resources

    return resources.files(EXAMPLE_SCRIPTS).joinpath(name).read_text(encoding="utf-8")


def add_agent_output(run: Path, lines: list[tuple[float, str, bool]], fmt: str = "text") -> None:
    """The agent's output as the supervisor keeps it (run/agent_output.py): each (time, line,
    from stderr) stamped into logs/agent.log and fed to the transcript recorder."""
    rec = TranscriptRecorder(run, make_normalizer(fmt))
    with (run / "logs" / "agent.log").open("a", encoding="utf-8") as log:
        for at, line, is_err in lines:
            log.write(f"{iso(at)}{' [stderr] ' if is_err else ' '}{line}\n")
            if is_err:
                rec.stderr_line(line, at)
            else:
                rec.stdout_line(line, at)
    rec.close()


def _example_output(t0: float, scores: tuple[float, float], baseline: float) -> list[tuple[float, str, bool]]:
    """What the example agent prints for SFT then GRPO (its own lines, the trainers' loss lines
    and warnings on stderr), the submissions answered at make_run's times (t0 + 30, t0 + 60)."""
    say = "[example-agent] "
    out: list[tuple[float, str, bool]] = [
        (t0 + 0.5, say + "task arith: 300 training rows, base model tiny-llama", False),
        (t0 + 0.6, say + "budget left: 300 s", False),
    ]
    best: dict[str, float] = {}
    for n, (name, script, helper, lr, start) in enumerate(
            (("SFT", "sft.py", "prompts.py", 2e-3, t0 + 1.0), ("GRPO", "grpo.py", "reward.py", 5e-4, t0 + 33.0)),
            start=1):
        src = "models/tiny-llama" if n == 1 else "output/v1"
        flags = "--steps 1000 --seed 0" if n == 1 else "--steps 400 --seed 0 --max-completion 8"
        out += [(start, say + f"wrote code/{helper}, code/{script}", False),
                (start, say + f"running python code/{script} --model {src} --data data/train.jsonl {flags} "
                              f"--out output/v{n}", False),
                (start + 0.1, f"{name}: {flags.split()[1]} steps on 300 rows from {src} -> output/v{n}", False),
                (start + 4.0, "/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py:759: UserWarning: "
                              "'pin_memory' argument is set as true but no accelerator is found", True),
                (start + 4.0, "  super().__init__(loader)", True)]
        for k in range(5):
            loss = 1.2 / (k + 1) if n == 1 else 0.001 / (k + 1)
            out.append((start + 6.0 + 3.0 * k, repr({"loss": f"{loss:.4g}", "learning_rate": f"{lr:g}",
                                                     "epoch": f"{k + 1}"}), False))
        out += [(start + 21.0, repr({"train_runtime": "15.0", "train_loss": "0.5"}), False),
                (start + 26.0, say + f"{name} done in 25.0 s; submitting output/v{n}", False)]
        best = {"submission_id": n, "score": scores[n - 1]} if scores[n - 1] >= best.get("score", -1) else best
        answer = {"submission_id": n, "status": "scored", "score": scores[n - 1], "baseline_score": baseline,
                  "improvement": scores[n - 1] - baseline, "best": best, "total_submissions": n}
        out.append((t0 + 30.0 * n + 2.5, say + f"submission v{n}: {json.dumps(answer)}", False))
    return out


def example_agent_run(root: Path, name: str, *, scores: tuple[float, float] = (44.0, 69.0), baseline: float = 3.0,
                      n_items: int = 100, t0: float = T0) -> Path:
    """A finished run shaped as the example agent's (``--agent example --driver scripted`` on
    arith), built from the parts the real pipeline uses instead of training anything: the
    workspace populated by the run layer, its prompt rendered; four revisions as the watcher
    records them (the task, then SFT: code/sft.py and code/prompts.py, then GRPO: code/grpo.py
    and code/reward.py, then the final notes), the scripts being the example agent's own;
    the baseline and two submissions (SFT from revision 2, GRPO from 3) with their items; the
    agent's output in logs/agent.log and the transcript; grader and supervisor logs; the
    containment event, the real contamination check, and the report written as a run's end
    writes it."""
    from agent2rl_tui.record.contamination import check_run, write_contamination
    from agent2rl_tui.review.report import write_report
    from agent2rl_tui.run.prompt import build_prompt
    from agent2rl_tui.run.workspace import populate_workspace
    from agent2rl_tui.tasks.registry import load_task

    run = make_run(root, name, task="arith", agent="example", driver="scripted", scores=scores, baseline=baseline,
                   n_items=n_items, t0=t0)
    task = load_task("arith")
    # What the grader records of how each submission was evaluated (the part a reader uses).
    settings = {"evaluator": "math_answer", "engine_load": "fresh", "prompt_profile": "default",
                "prompt_template": "{question}", "system_prompt": "", "chat": True, "fewshot": 0,
                "max_new_tokens": 8, "temperature": 0.0, "batch_size": 100}
    with RunStore.of_run(run) as store:
        run_row = store.run()
        for sub_id in range(len(scores) + 1):
            store.update_submission(sub_id, settings_json=json.dumps(settings))
    with tempfile.TemporaryDirectory() as tmp:  # a stand-in base model folder: its config only
        model = Path(tmp) / "tiny-llama"
        model.mkdir()
        (model / "config.json").write_text('{"model_type": "llama"}\n', encoding="utf-8")
        ws = populate_workspace(run, task, model, "tiny-llama", budget_s=run_row.budget_s,
                                grace_s=run_row.grace_s)
    (run / "prompt.md").write_text(build_prompt(ws, run_row.budget_s), encoding="utf-8")

    plan = "# Plan\n- SFT 1000 steps on 300 rows -> output/v1\n- GRPO 400 steps, exact-match reward, from v1 -> output/v2\n"
    notes = [plan + f"- v{n} ({kind}): score {scores[n - 1]} (baseline {baseline})\n"
             for n, kind in ((1, "SFT"), (2, "GRPO"))]
    notes[1] = notes[0] + notes[1].removeprefix(plan)
    attempts = [f"\n## Attempt {n}\n- **Status**: success (exit code 0)\n- **Score**: {scores[n - 1]}\n"
                f"- **Training type**: {kind}\n- **Key configuration**: code/{script} {flags}\n"
                f"- **What was done**: {kind} with code/{script}, then submitted it\n"
                for n, kind, script, flags in ((1, "SFT", "sft.py", "--steps 1000 --seed 0"),
                                               (2, "GRPO", "grpo.py", "--steps 400 --seed 0 --max-completion 8"))]
    revisions = [
        {p: (ws / p).read_text(encoding="utf-8") for p in ("description.md", "instructions.md")},
        {"code/NOTES.md": plan, "code/prompts.py": example_script("prompts.py"), "code/sft.py": example_script("sft.py")},
        {"code/NOTES.md": notes[0], "code/reward.py": example_script("reward.py"),
         "code/grpo.py": example_script("grpo.py"), "summary.md": "# Run summary\n" + attempts[0]},
        {"code/NOTES.md": notes[1], "summary.md": "# Run summary\n" + attempts[0] + attempts[1]},
    ]
    add_revisions(run, revisions, t0=t0, at=[t0, t0 + 1.0, t0 + 33.0, t0 + 63.0])
    for files in revisions[1:]:  # the workspace as the agent left it
        for path, content in files.items():
            (ws / path).parent.mkdir(parents=True, exist_ok=True)
            (ws / path).write_text(content, encoding="utf-8")

    add_agent_output(run, _example_output(t0, scores, baseline))
    logs = run / "logs"
    (logs / "grader.log").write_text(
        f"{iso(t0 - 15)} INFO agent2rl.grader: grader for {name} on 127.0.0.1:50379\n"
        + "".join(f"{iso(t0 + 30.0 * n + 2.5)} INFO agent2rl.grader: submission {n} scored {s:.2f}\n"
                  for n, s in enumerate(scores, start=1)), encoding="utf-8")
    (logs / "supervisor.log").write_text(
        f"{iso(t0 - 16)} preparing the workspace in {ws}\n{iso(t0 - 15)} grader started; scoring the baseline\n"
        f"{iso(t0 - 7.5)} baseline score {baseline:.2f}\n{iso(t0)} starting agent example\n"
        f"{iso(t0 + 150)} agent exited with code 0\n", encoding="utf-8")
    with RunStore.of_run(run) as store:
        store.event("supervisor", "containment", "agent contained by bubblewrap (/usr/bin/bwrap)",
                    {"contained": True, "reason": "bubblewrap (/usr/bin/bwrap)", "requested": True})
    found = json.loads(write_contamination(run, check_run(run, task)).read_text(encoding="utf-8"))
    with RunStore.of_run(run) as store:
        store.event("supervisor", "contamination", "contamination check done",
                    {"contaminated": found["contaminated"], "items": found["items"]})
    write_report(run)
    return run
