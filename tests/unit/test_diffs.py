"""The unified-diff parser (review/diffs.py) on real `git diff` output, without any UI.

A throwaway repository gets a base commit and a work commit that together hold each case the
Revisions pane meets: a change inside a file (a hunk with context), a rename with a change, an
added file without a final newline, a deleted file and a binary file. The diff is taken with
the flags record/revisions.py uses for snapshots.git.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agent2rl_tui.review.diffs import DiffFile, DiffLine, pair_rows, parse_diff

TRAIN = "".join(f"def step_{i}(x):\n    return x + {i}\n" for i in range(10))  # 20 lines
RENAMED = "".join(f"value_{i} = {i}\n" for i in range(30))


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "core.autocrlf=false", *args],
        cwd=repo, check=True, capture_output=True, text=True,
    ).stdout


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("repo")
    git(repo, "init", "-q")
    (repo / "train.py").write_text(TRAIN)
    (repo / "old_name.py").write_text(RENAMED)
    (repo / "gone.txt").write_text("first\nsecond\nthird\n")
    (repo / "model.bin").write_bytes(bytes(range(256)))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "tag", "base")
    (repo / "train.py").write_text(TRAIN.replace("return x + 4\n", "return x * 4  # faster\n"))
    (repo / "new_name.py").write_text(RENAMED.replace("value_20 = 20", "value_20 = 2000"))
    (repo / "old_name.py").unlink()
    (repo / "gone.txt").unlink()
    (repo / "notes.md").write_text("# Notes\nno final newline")
    (repo / "model.bin").write_bytes(bytes(range(255, -1, -1)))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "work")
    return repo


def record_diff(repo: Path, *extra: str) -> str:
    """As record/revisions.py ``diff`` takes it."""
    return git(repo, "diff", "--no-color", "--no-ext-diff", "-M", "-U3", *extra, "base", "HEAD")


@pytest.fixture(scope="module")
def parsed(repo: Path) -> tuple[list[DiffLine], list[DiffFile]]:
    return parse_diff(record_diff(repo))


def file_named(parsed: tuple[list[DiffLine], list[DiffFile]], path: str) -> tuple[int, DiffFile]:
    files = parsed[1]
    index = next(i for i, f in enumerate(files) if f.path == path)
    return index, files[index]


def lines_of(parsed: tuple[list[DiffLine], list[DiffFile]], index: int) -> list[DiffLine]:
    return [line for line in parsed[0] if line.file == index]


def test_every_file_of_the_diff_with_its_status(parsed: tuple[list[DiffLine], list[DiffFile]]) -> None:
    files = parsed[1]
    assert sorted((f.path, f.status) for f in files) == [
        ("gone.txt", "deleted"), ("model.bin", "modified"), ("new_name.py", "renamed"),
        ("notes.md", "added"), ("train.py", "modified")]
    assert all(f.git for f in files)
    assert [line.kind for line in parsed[0] if line.kind == "file"] == ["file"] * len(files)
    titles = [line.text for line in parsed[0] if line.kind == "file"]
    assert titles == [f.title for f in files]  # each file opens with its title line


def test_a_hunk_with_context_numbers_both_sides(parsed: tuple[list[DiffLine], list[DiffFile]]) -> None:
    index, train = file_named(parsed, "train.py")
    assert (train.old_path, train.added, train.removed, train.hunks) == ("train.py", 1, 1, 1)
    assert train.title == "train.py +1 -1"
    lines = lines_of(parsed, index)
    assert [line.kind for line in lines] == [
        "file", "hunk", "context", "context", "context", "removed", "added", "context", "context",
        "context"]
    assert lines[1].text.startswith("@@ -7,7 +7,7 @@")
    body = [(line.kind, line.old_no, line.new_no, line.text) for line in lines[2:]]
    assert [(k, o, n) for k, o, n, _ in body] == [
        ("context", 7, 7), ("context", 8, 8), ("context", 9, 9), ("removed", 10, None),
        ("added", None, 10), ("context", 11, 11), ("context", 12, 12), ("context", 13, 13)]
    assert [text for *_, text in body] == [
        "def step_3(x):", "    return x + 3", "def step_4(x):", "    return x + 4",
        "    return x * 4  # faster", "def step_5(x):", "    return x + 5", "def step_6(x):"]


def test_a_rename_with_a_change(parsed: tuple[list[DiffLine], list[DiffFile]]) -> None:
    index, renamed = file_named(parsed, "new_name.py")
    assert (renamed.old_path, renamed.new_path, renamed.status) == ("old_name.py", "new_name.py", "renamed")
    assert renamed.similarity.endswith("%") and (renamed.added, renamed.removed) == (1, 1)
    assert renamed.title == f"old_name.py → new_name.py (renamed {renamed.similarity}) +1 -1"
    lines = lines_of(parsed, index)
    meta = [line.text for line in lines if line.kind == "meta"]
    assert meta == [f"similarity index {renamed.similarity}", "rename from old_name.py",
                    "rename to new_name.py"]
    changed = [(line.kind, line.old_no, line.new_no, line.text) for line in lines
               if line.kind in ("added", "removed")]
    assert changed == [("removed", 21, None, "value_20 = 20"), ("added", None, 21, "value_20 = 2000")]


def test_an_added_file_without_a_final_newline(parsed: tuple[list[DiffLine], list[DiffFile]]) -> None:
    index, notes = file_named(parsed, "notes.md")
    assert (notes.old_path, notes.new_path, notes.title) == (None, "notes.md", "notes.md (new file) +2")
    lines = lines_of(parsed, index)
    assert [line.kind for line in lines] == ["file", "meta", "hunk", "added", "added", "nonewline"]
    assert lines[1].text == "new file mode 100644"
    assert [(line.old_no, line.new_no, line.text) for line in lines[3:5]] == [
        (None, 1, "# Notes"), (None, 2, "no final newline")]
    assert lines[-1].text == "No newline at end of file"


def test_a_deleted_file(parsed: tuple[list[DiffLine], list[DiffFile]]) -> None:
    index, gone = file_named(parsed, "gone.txt")
    assert (gone.old_path, gone.new_path, gone.title) == ("gone.txt", None, "gone.txt (deleted) -3")
    lines = lines_of(parsed, index)
    assert [(line.kind, line.old_no, line.new_no, line.text) for line in lines[3:]] == [
        ("removed", 1, None, "first"), ("removed", 2, None, "second"), ("removed", 3, None, "third")]
    assert lines[1].text == "deleted file mode 100644" and lines[2].text == "@@ -1,3 +0,0 @@"


def test_a_binary_file_is_one_notice(parsed: tuple[list[DiffLine], list[DiffFile]]) -> None:
    index, model = file_named(parsed, "model.bin")
    assert model.binary and (model.hunks, model.added, model.removed) == (0, 0, 0)
    assert model.title == "model.bin (binary)"
    assert [(line.kind, line.text) for line in lines_of(parsed, index)] == [
        ("file", "model.bin (binary)"),
        ("meta", "Binary files a/model.bin and b/model.bin differ")]


def test_a_binary_patch_body_is_skipped_and_the_next_file_still_parsed(repo: Path) -> None:
    text = record_diff(repo, "--binary")
    assert "GIT binary patch" in text
    lines, files = parse_diff(text)
    index = next(i for i, f in enumerate(files) if f.path == "model.bin")
    assert files[index].binary
    assert [line.text for line in lines if line.file == index and line.kind == "meta"] == [
        "GIT binary patch"]
    assert [f.path for f in files] == [f.path for f in parse_diff(record_diff(repo))[1]]
    assert files[index + 1].hunks == 1  # the file after the patch body is read as usual


def test_side_by_side_pairs_the_removed_line_with_its_replacement(
        parsed: tuple[list[DiffLine], list[DiffFile]]) -> None:
    lines = parsed[0]
    rows = pair_rows(lines)
    removed = next(i for i, line in enumerate(lines) if line.text == "    return x + 4")
    added = next(i for i, line in enumerate(lines) if line.text == "    return x * 4  # faster")
    assert (removed, added) in rows
    deleted = [i for i, line in enumerate(lines) if line.kind == "removed" and line.file == 0]
    assert [(i, -1) for i in deleted] == [row for row in rows if row[0] in deleted]
    assert sorted(i for row in rows for i in set(row) if i != -1) == list(range(len(lines)))


def test_a_diff_from_the_empty_tree_adds_every_file(repo: Path) -> None:
    empty_tree = git(repo, "hash-object", "-t", "tree", "/dev/null").strip()
    lines, files = parse_diff(git(repo, "diff", "--no-color", "-M", empty_tree, "base"))
    assert [(f.path, f.status) for f in files] == [
        ("gone.txt", "added"), ("model.bin", "added"), ("old_name.py", "added"), ("train.py", "added")]
    assert files[3].added == 20 and lines[-1].new_no == 20


def test_quoted_paths_and_plain_diff_u(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "weights.bin").write_bytes(bytes(range(256)))
    (repo / "tést file.py").write_text("a = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    (repo / "weights.bin").write_bytes(bytes(range(255, -1, -1)))
    (repo / "tést file.py").write_text("a = 2\n")
    text = git(repo, "diff")
    assert '"a/t\\303\\251st file.py"' in text  # git quoted the path
    lines, files = parse_diff(text)
    assert [f.path for f in files] == ["tést file.py", "weights.bin"]
    assert files[1].binary and files[1].title == "weights.bin (binary)"
    assert [ln.kind for ln in lines if ln.file == 1] == ["file", "meta"]
    assert lines[-1].text.startswith("Binary files")

    plain = subprocess.run(["diff", "-u", "--label", "old/x.txt", "--label", "new/x.txt", "-",
                            str(repo / "tést file.py")], input="-- dashes\na = 1\n",
                           capture_output=True, text=True).stdout
    lines, files = parse_diff(plain)
    assert [f.path for f in files] == ["new/x.txt"]
    assert [(ln.kind, ln.text) for ln in lines[2:]] == [
        ("removed", "-- dashes"), ("removed", "a = 1"), ("added", "a = 2")]
    rows = pair_rows(lines)
    assert (2, 4) in rows and (3, -1) in rows  # removed run beside the added run
