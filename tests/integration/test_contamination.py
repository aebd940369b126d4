"""The contamination check on real run folders: real snapshots.git, real GSM8K and HumanEval splits."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from support.runs import make_prepared_run

from agent2rl_tui.record.contamination import (
    CHUNK_BYTES,
    ContaminationResult,
    Hit,
    Scanner,
    build_index,
    check_run,
    read_contamination,
    write_contamination,
)
from agent2rl_tui.record.revisions import Snapshotter
from agent2rl_tui.tasks.registry import Task, load_task


@pytest.fixture(scope="module")
def gsm8k(prepared_data: Path) -> Task:
    return load_task("gsm8k")


@pytest.fixture(scope="module")
def humaneval(prepared_data: Path) -> Task:
    return load_task("humaneval")


@pytest.fixture
def run_dir(tmp_path: Path, tiny_model: Path) -> Path:
    return make_prepared_run(tmp_path / "runs", tiny_model)


def write(run_dir: Path, rel: str, text: str | bytes) -> Path:
    path = run_dir / "workspace" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def disguised(text: str) -> str:
    """The text as an agent might paste it: case changed, spaces doubled, lines re-broken."""
    return text.upper().replace(" ", "  ").replace(". ", ".\n\t")


def hit_of(result: ContaminationResult, path: str) -> Hit:
    return next(h for h in result.hits if h.path == path)


def test_pasted_test_questions_are_found_with_their_revisions_and_path(run_dir: Path, gsm8k: Task) -> None:
    evals, train = gsm8k.load_split("eval"), gsm8k.load_split("train")
    snap = Snapshotter(run_dir)
    snap.snapshot("start")
    stolen = [17, 250, 1300]
    notes = "# extra practice problems\n\n" + "\n\n".join(disguised(evals[i]["question"]) for i in stolen) + "\n"
    write(run_dir, "code/notes.md", notes)
    write(run_dir, "code/train_copy.jsonl", "".join(json.dumps(r) + "\n" for r in train[:300]))
    write(run_dir, "code/train.py", "import json\nrows = [json.loads(l) for l in open('notes.md')]\n")
    second, _ = snap.snapshot("watch")
    write(run_dir, "code/train.py", "import json\nlr = 1e-5\n")
    third, _ = snap.snapshot("watch")
    # A file that held a test item (question and worked answer) for one revision only.
    scratch = write(run_dir, "code/scratch.py", f"Q = {evals[42]['question']!r}\nA = {evals[42]['answer']!r}\n")
    fourth, _ = snap.snapshot("watch")
    scratch.unlink()
    fifth, _ = snap.snapshot("watch")

    result = check_run(run_dir, gsm8k)

    assert result.contaminated is True
    assert result.eval_items == len(evals) == 1319
    assert result.checkable_items > 1300
    assert result.items == sorted(["17", "250", "1300", "42"])
    assert [h.path for h in result.hits] == ["code/notes.md", "code/scratch.py"]
    assert hit_of(result, "code/notes.md") == Hit(
        path="code/notes.md", revisions=[second.seq, third.seq, fourth.seq, fifth.seq],
        in_final_workspace=True, items=["1300", "17", "250"])
    assert hit_of(result, "code/scratch.py") == Hit(
        path="code/scratch.py", revisions=[fourth.seq], in_final_workspace=False, items=["42"])
    assert result.revisions_scanned == 5 and result.skipped["errors"] == 0


def test_files_outside_the_revisions_are_scanned_and_ours_are_not(run_dir: Path, gsm8k: Task) -> None:
    evals = gsm8k.load_split("eval")
    Snapshotter(run_dir).snapshot("start")
    # Rollouts in output/ (never captured by a revision) with test items' gold answers.
    rollouts = [json.dumps({"prompt": f"problem {i}", "completion": "Let me think. " * 20, "reward": 0.0})
                for i in range(3000)]
    rollouts.insert(1500, json.dumps({"prompt": evals[7]["question"], "completion": evals[7]["answer"]}))
    write(run_dir, "output/rollouts/step_100.jsonl", "\n".join(rollouts) + "\n")
    write(run_dir, "output/rollouts/copy.jsonl", (run_dir / "workspace/output/rollouts/step_100.jsonl").read_text())
    # A file of several chunks, one item's words one per line in the middle.
    words = evals[8]["question"].split()
    filler = "x\n" * ((CHUNK_BYTES - 200) // 2)
    write(run_dir, "output/long.txt", filler + "\n".join(words) + "\n" + filler)
    # Skipped, though they hold test items: weights by name, binary content, over the size cap.
    write(run_dir, "output/ckpt/model.safetensors", evals[9]["question"] * 3)
    write(run_dir, "output/cache.dat", b"\0\1" + evals[10]["question"].encode() * 3)
    write(run_dir, "output/huge.txt", evals[11]["question"] + "\n" + "y " * 3_000_000)
    # Ours: the base model and the train split (read-only to the agent) are never scanned.
    models, data = run_dir / "workspace" / "models", run_dir / "workspace" / "data"
    base = next(models.iterdir())
    for folder in (base, data):
        folder.chmod(folder.stat().st_mode | stat.S_IWUSR)
    write(run_dir, f"models/{base.name}/README.md", evals[12]["question"])
    write(run_dir, "data/eval_copy.txt", evals[13]["question"])
    assert any(p.suffix == ".safetensors" for p in base.iterdir())

    result = check_run(run_dir, gsm8k, size_cap=5_000_000)

    assert result.items == ["7", "8"]
    assert [h.to_dict() for h in result.hits] == [
        {"path": "output/long.txt", "revisions": [], "in_final_workspace": True, "items": ["8"]},
        {"path": "output/rollouts/copy.jsonl", "revisions": [], "in_final_workspace": True, "items": ["7"]},
        {"path": "output/rollouts/step_100.jsonl", "revisions": [], "in_final_workspace": True, "items": ["7"]},
    ]
    skipped = result.skipped
    assert (skipped["weights"], skipped["binary"], skipped["too_large"], skipped["errors"]) == (1, 1, 1, 0)
    assert result.bytes_scanned > os.path.getsize(run_dir / "workspace" / "output" / "long.txt")


def test_an_item_is_found_however_the_stream_is_cut(gsm8k: Task) -> None:
    evals = gsm8k.load_split("eval")
    index = build_index(evals, gsm8k.load_split("train"))
    text = ("noise " * 50 + "\n".join(json.dumps(evals[99]["question"]).split(" ")) + "\n" + "noise\n" * 50).encode()
    for piece in (1, 7, 64, len(text)):
        scanner = Scanner(index, chunk_bytes=1)  # every feed is scanned at once: n-grams span the pieces
        for at in range(0, len(text), piece):
            scanner.feed(text[at:at + piece])
        assert [index.item_ids[i] for i in index.items_in(scanner.finish())] == ["99"], piece


def test_a_copied_humaneval_eval_problem_is_found_and_a_train_problem_is_not(run_dir: Path,
                                                                             humaneval: Task) -> None:
    evals, train = humaneval.load_split("eval"), humaneval.load_split("train")
    snap = Snapshotter(run_dir)

    def solution(row: dict[str, Any]) -> str:
        return row["prompt"] + row["canonical_solution"] + "\n\n" + row["test"] + f"\ncheck({row['entry_point']})\n"

    write(run_dir, "code/reference.py", solution(evals[5]))
    write(run_dir, "code/train_solutions.py", "\n\n".join(solution(r) for r in train[:40]))
    rev, _ = snap.snapshot("watch")

    result = check_run(run_dir, humaneval)

    assert result.eval_items == len(evals) == 82
    assert result.checkable_items == 82
    assert result.hits == [
        Hit(path="code/reference.py", revisions=[rev.seq], in_final_workspace=True, items=["HumanEval/87"])]


def test_the_result_is_written_whole_and_read_back(run_dir: Path, gsm8k: Task) -> None:
    assert read_contamination(run_dir) is None
    result = check_run(run_dir, gsm8k)
    assert result.contaminated is False and result.hits == [] and result.items == []
    path = write_contamination(run_dir, result)
    assert path == run_dir / "report" / "contamination.json"
    assert read_contamination(run_dir) == result
    assert sorted(p.name for p in path.parent.iterdir()) == ["contamination.json"]
    path.write_text("{not json")
    assert read_contamination(run_dir) is None


JSON_KEYS = ["n", "min_shared", "eval_items", "checkable_items", "revisions_scanned", "files_scanned", "bytes_scanned",
             "skipped", "errors", "hits", "items", "contaminated", "seconds", "task", "index_seconds"]


def test_a_real_result_round_trips_through_its_json_key_for_key(run_dir: Path, gsm8k: Task) -> None:
    evals = gsm8k.load_split("eval")
    Snapshotter(run_dir).snapshot("start")
    write(run_dir, "code/notes.md", disguised(evals[3]["question"]) + "\n")
    Snapshotter(run_dir).snapshot("watch")
    write(run_dir, "output/stash.txt", evals[5]["question"] + "\n" + evals[5]["answer"] + "\n")
    result = check_run(run_dir, gsm8k)
    assert result.items == ["3", "5"] and result.task == "gsm8k" and result.index_seconds is not None

    path = write_contamination(run_dir, result)
    text = path.read_text(encoding="utf-8")
    data = json.loads(text)
    assert list(data) == JSON_KEYS and list(data["hits"][0]) == ["path", "revisions", "in_final_workspace", "items"]
    assert data == result.to_dict()
    again = ContaminationResult.from_dict(data)
    assert again == result and again.to_dict() == data
    assert json.dumps(again.to_dict(), indent=2) == text  # the same bytes, key order included
    assert read_contamination(run_dir) == result
    # The run's event (what the runs list reads) is read through the same type.
    event = json.loads(json.dumps(result.event_data()))
    assert event == {"contaminated": True, "items": ["3", "5"], "n_items": 2, "files": ["code/notes.md", "output/stash.txt"]}
    assert ContaminationResult.from_dict(event).contaminated is True


def test_an_old_or_hostile_result_reads_as_defaults_or_a_clear_error(tmp_path: Path) -> None:
    from agent2rl_tui.review.report import contamination_line, contamination_section

    # Missing keys (a file written before they existed): their defaults.
    empty = ContaminationResult.from_dict({})
    assert empty == ContaminationResult() and empty.contaminated is False and empty.task is None
    assert list(empty.to_dict()) == JSON_KEYS[:-2]  # no task, no index time: a scan with a ready index
    old = ContaminationResult.from_dict({"items": ["7", 12], "hits": [{"path": "out.txt"}], "n": 13})
    assert old.contaminated is True and old.items == ["7", "12"]  # a numeric id is read as its text
    assert old.hits == [Hit(path="out.txt", revisions=[], in_final_workspace=False, items=[])]
    assert old.errors == [] and old.skipped == {}
    # Wrong types: a ValueError that names the key, never a crash further on.
    hostile: list[Any] = [
        [1, 2], "contaminated", None, 17,
        {"items": "17"}, {"items": [None]}, {"items": [True]}, {"hits": {"path": "a"}}, {"hits": ["a"]},
        {"hits": [{"path": 3}]}, {"hits": [{"path": "a", "revisions": ["1"]}]},
        {"hits": [{"path": "a", "in_final_workspace": "yes"}]}, {"n": "13"}, {"n": True}, {"seconds": "1.0"},
        {"contaminated": 1}, {"skipped": []}, {"skipped": {"binary": "2"}}, {"errors": {"path": "x"}},
        {"errors": [{"path": 1}]}, {"task": ["gsm8k"]}, {"eval_items": 1.5},
    ]
    for data in hostile:
        with pytest.raises(ValueError, match="contamination result"):
            ContaminationResult.from_dict(data)
    with pytest.raises(ValueError, match="hits"):
        ContaminationResult.from_dict({"hits": {"path": "a"}})
    with pytest.raises(ValueError, match="checkable_items must be an integer, not str"):
        ContaminationResult.from_dict({"checkable_items": "1319"})
    # A reader never crashes on one: the file reads as no result, a report says it is unreadable.
    (tmp_path / "report").mkdir()
    for data in hostile:
        (tmp_path / "report" / "contamination.json").write_text(json.dumps(data))
        assert read_contamination(tmp_path) is None
        if data is not None:
            assert contamination_line(data).startswith("- contamination check: unreadable result (")
            assert contamination_section(data) == []
    assert contamination_line(None) == "- contamination check: not run"
