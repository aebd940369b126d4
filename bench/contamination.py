"""Benchmark: the contamination check on the workspace of a long run (figures printed).

Builds, in a temporary folder, what a 12-hour GSM8K run leaves behind: a real snapshots.git
of 300 revisions of a handful of code files (taken by the real Snapshotter), about 200 MB of
JSONL rollouts in output/ with three real GSM8K test items pasted in, and the train split
in data/. Then times the eval index (1,319 test items, n-grams shared with the 7,473 train
items removed) and the scan, and checks that exactly the pasted items are found.

Run: ``python bench/contamination.py [MB] [--quick]`` (about a minute; the real GSM8K files are
read from the data folder beside the repository). ``--quick``: 10 revisions and 2 MB of
rollouts, the same steps and the same check of the pasted items, in seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import tempfile
import time
from pathlib import Path

from agent2rl_tui.record.contamination import build_index, item_id, revision_blobs, scan_run
from agent2rl_tui.record.revisions import Snapshotter
from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.tasks.data import read_rows

GSM8K = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k"
REVISIONS, ROLLOUT_MB = 300, 200
QUICK_REVISIONS, QUICK_MB = 10, 2
STOLEN = (3, 640, 1211)


def make_run(root: Path) -> Path:
    run = root / "run"
    for sub in ("code", "output", "data", "models/base"):
        (run / "workspace" / sub).mkdir(parents=True)
    with RunStore(run / "run.db", create=True) as store:
        store.create_run(RunRecord(id="bench", task="gsm8k", agent="command", base_model="base", base_model_source="/m",
                         budget_s=12 * 3600, grace_s=60, status="running", created_at=0.0))
    return run


def code_file(rng: random.Random, name: str, version: int) -> str:
    lines = [f"# {name}, version {version}", "import json", "import torch", ""]
    for i in range(rng.randint(150, 400)):
        lines.append(f"def step_{i}(batch, lr={rng.random():.5f}):\n    loss = model(batch).loss * {rng.random():.3f}"
                     f"\n    return loss.backward()\n")
    return "\n".join(lines)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mb", nargs="?", type=int, help=f"MB of rollouts (default {ROLLOUT_MB}; --quick {QUICK_MB})")
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_REVISIONS} revisions, {QUICK_MB} MB of rollouts: the same steps in seconds")
    return parser.parse_args()


def make_revisions(run: Path, rng: random.Random, revisions: int) -> float:
    snap = Snapshotter(run)
    code = run / "workspace" / "code"
    names = ["train_grpo.py", "sft.py", "reward.py", "eval_local.py", "config.yaml", "NOTES.md"]
    started = time.perf_counter()
    for version in range(revisions):
        for name in rng.sample(names, rng.randint(1, 2)) if version else names:
            (code / name).write_text(code_file(rng, name, version), encoding="utf-8")
        snap.snapshot("watch")
    return time.perf_counter() - started


def make_rollouts(run: Path, train: list[dict], evals: list[dict], target_mb: int, rng: random.Random) -> int:
    """JSONL rollouts made of train questions and perturbed answers; each stolen item pasted once,
    halfway through one of the first files (halfway: a file of any size holds it)."""
    out = run / "workspace" / "output" / "rollouts"
    out.mkdir(parents=True)
    files = 8
    per_file = target_mb * 1_000_000 // files
    written = 0
    for f in range(files):
        path = out / f"step_{(f + 1) * 500:05d}.jsonl"
        with path.open("w", encoding="utf-8") as fh:
            size = 0
            line_no = 0
            pasted = f >= len(STOLEN)
            while size < per_file:
                row = train[rng.randrange(len(train))]
                completion = row["answer"].replace("=", " = ").replace("####", f"so the answer is {rng.randint(0, 99)}")
                line = json.dumps({"step": line_no, "prompt": row["question"], "completion": completion,
                                   "reward": rng.choice([0.0, 1.0]), "kl": rng.random()}) + "\n"
                if not pasted and size >= per_file // 2:
                    pasted = True
                    item = evals[STOLEN[f]]
                    line = json.dumps({"step": line_no, "prompt": item["question"], "completion": item["answer"],
                                       "reward": 1.0}) + "\n"
                fh.write(line)
                size += len(line)
                line_no += 1
        written += path.stat().st_size
    return written


def main() -> None:
    args = parse_args()
    target_mb = args.mb or (QUICK_MB if args.quick else ROLLOUT_MB)
    revisions = QUICK_REVISIONS if args.quick else REVISIONS
    rng = random.Random(0)
    train, evals = read_rows(GSM8K / "train.jsonl"), read_rows(GSM8K / "test.jsonl")
    with tempfile.TemporaryDirectory() as tmp:
        run = make_run(Path(tmp))
        seconds = make_revisions(run, rng, revisions)
        git_mb = sum(p.stat().st_size for p in (run / "snapshots.git").rglob("*") if p.is_file()) / 1e6
        print(f"revisions: {revisions} taken in {seconds:.1f} s ({git_mb:.1f} MB of snapshots.git)")
        data = run / "workspace" / "data" / "train.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in train), encoding="utf-8")
        (run / "workspace" / "models" / "base" / "model.safetensors").write_bytes(os.urandom(1 << 20))
        written = make_rollouts(run, train, evals, target_mb, rng)
        print(f"rollouts: {written / 1e6:.0f} MB of JSONL in output/, {len(STOLEN)} test items pasted in")

        started = time.perf_counter()
        index = build_index(evals, train)
        index_s = time.perf_counter() - started
        print(f"index: {len(evals)} eval items ({index.checkable} checkable), {index.keys.size:,} n-grams, "
              f"built in {index_s:.2f} s")
        started = time.perf_counter()
        blobs = revision_blobs(run)
        print(f"history: {blobs.revisions} revisions, {len(blobs.where)} distinct blobs, mapped in "
              f"{time.perf_counter() - started:.2f} s (one git log pass)")
        started = time.perf_counter()
        result = scan_run(run, index)
        scan_s = time.perf_counter() - started
        mb = result.bytes_scanned / 1e6
        print(f"scan: {result.files_scanned} files / blobs, {mb:.0f} MB in {scan_s:.1f} s ({mb / scan_s:.1f} MB/s),"
              f" {result.revisions_scanned} revisions; skipped {result.skipped}")
        print(f"total: {index_s + scan_s:.1f} s; peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
        expected = sorted(item_id(evals[i], i) for i in STOLEN)
        print(f"hits: {len(result.hits)} file(s), items {result.items} "
              f"({'as pasted' if result.items == expected else f'EXPECTED {expected}'})")
        for hit in result.hits:
            print(f"  {hit.path}: {hit.items}")


if __name__ == "__main__":
    main()
