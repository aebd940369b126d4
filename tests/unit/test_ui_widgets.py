"""DiffView, LogView and TailFile on real files, real `git diff` output and a headless app.

Nothing is mocked: diffs come from a throwaway git repository, logs are files on disk (one of
200 MB, to show the log view reads only its end), and the widgets run inside ``App.run_test``.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rich.color import Color
from rich.style import Style
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Footer

from agent2rl_tui.ui.tailfile import TailFile
from agent2rl_tui.ui.widgets import DiffView, LogView
from agent2rl_tui.ui.widgets.diff_view import SIDE_BY_SIDE_MIN_WIDTH

# -- helpers ------------------------------------------------------------------------------


class WidgetApp(App[None]):
    """One widget (focused) above a footer."""

    def __init__(self, widget: Widget) -> None:
        super().__init__()
        self.widget = widget

    def compose(self) -> ComposeResult:
        yield self.widget
        yield Footer()

    def on_mount(self) -> None:
        self.widget.focus()


async def wait_for(pilot: Pilot[None], cond: Callable[[], bool], timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        await pilot.pause(0.05)
    return cond()


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "core.autocrlf=false",
         *args], cwd=repo, check=True, capture_output=True, text=True,
    ).stdout


def read_backwards(tail: TailFile, chunk: int) -> tuple[list[str], int]:
    lines = tail.read_last(chunk)
    reads = 1
    while not tail.at_start:
        lines = tail.read_before(chunk) + lines
        reads += 1
    return lines, reads


# -- TailFile -----------------------------------------------------------------------------


def test_read_last_gives_the_last_lines(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    path.write_text("".join(f"line {i}\n" for i in range(10_000)))
    tail = TailFile(path)
    lines = tail.read_last(4096)
    assert lines[-1] == "line 9999"
    first = int(lines[0].split()[1])
    assert lines == [f"line {i}" for i in range(first, 10_000)]
    assert 4096 - 12 < sum(len(x) + 1 for x in lines) <= 4096 + 12  # + the straddling line
    assert tail.start_offset == path.stat().st_size - sum(len(x) + 1 for x in lines)
    assert not tail.at_start and tail.at_end


def _varied_lines(n: int, newline: bytes = b"\n") -> bytes:
    out = []
    for i in range(n):
        out.append(f"{i}:".encode() + b"x" * ((i * 37) % 300) + newline)
    return b"".join(out)


@pytest.mark.parametrize(
    "content, chunk",
    [
        (_varied_lines(3000), 1000),  # lines straddle chunk boundaries
        (_varied_lines(3000, b"\r\n"), 777),  # CRLF
        (b"ok\n\xff\xfe bad \xe2\x82\n\xe2\x82\xac euro\n" * 500 + b"end\n", 512),  # bad UTF-8
        (b"".join(b"%d" % i + b"y" * 1500 + b"\n" for i in range(40)), 1024),  # line > chunk
        (b"\n\n\nempty lines around\n\n", 3),
    ],
    ids=["straddle", "crlf", "invalid-utf8", "long-lines", "blank-lines"],
)
def test_reading_backwards_yields_every_line_once(tmp_path: Path, content: bytes,
                                                  chunk: int) -> None:
    path = tmp_path / "b.log"
    path.write_bytes(content)
    expected = content.decode("utf-8", "replace").replace("\r\n", "\n").split("\n")[:-1]
    lines, reads = read_backwards(TailFile(path), chunk)
    assert reads >= 2
    assert [x.removesuffix("…") for x in lines] == [x[:1999] if len(x) > 2000 else x
                                                    for x in expected]


def test_long_lines_are_cut_for_display(tmp_path: Path) -> None:
    path = tmp_path / "c.log"
    path.write_text("short\n" + "z" * 5000 + "\nafter\n")
    lines, _ = read_backwards(TailFile(path), 1024)
    assert lines[0] == "short" and lines[2] == "after"
    assert len(lines[1]) == 2000 and lines[1].endswith("…")


def test_a_file_without_newlines_is_read_in_bounded_pieces(tmp_path: Path) -> None:
    path = tmp_path / "one-line.log"
    path.write_bytes(b"x" * 20_000_000)
    tail = TailFile(path, max_line_bytes=64 * 1024)
    lines = tail.read_last(256 * 1024)
    assert path.stat().st_size - tail.start_offset <= 2 * (256 + 64) * 1024
    assert lines and all(len(line) <= 2000 for line in lines)
    assert tail.pending.startswith("xxx")  # the unfinished last line is held
    with open(path, "ab") as f:
        f.write(b"y" * 100_000)
    assert tail.read_new() == []  # still no newline: nothing complete, memory stays capped
    with open(path, "ab") as f:
        f.write(b"\nnext\n")
    assert [line[:3] for line in tail.read_new() or []] == ["xxx", "nex"]


def test_read_new_returns_appended_lines_and_holds_a_partial_one(tmp_path: Path) -> None:
    path = tmp_path / "d.log"
    path.write_text("a\nb\nhalf")
    tail = TailFile(path)
    assert tail.read_last() == ["a", "b"]
    assert tail.pending == "half"
    assert tail.read_new() == []
    with open(path, "a") as f:
        f.write(" done\nc\nd")
    assert tail.read_new() == ["half done", "c"]
    with open(path, "a") as f:
        f.write("e")
    assert tail.read_new() == []
    with open(path, "a") as f:
        f.write("f\n")
    assert tail.read_new() == ["def"]
    assert tail.end_offset == path.stat().st_size and tail.backlog() == 0


def test_shrink_and_replacement_are_detected(tmp_path: Path) -> None:
    path = tmp_path / "e.log"
    path.write_text("".join(f"old {i}\n" for i in range(100)))
    tail = TailFile(path)
    assert tail.read_last()[-1] == "old 99"
    path.write_text("new 0\n")  # truncated in place
    assert tail.read_new() is None
    assert tail.read_last() == ["new 0"]
    path.rename(tmp_path / "e.log.1")  # rotated: a new file under the old name
    path.write_text("rotated 0\nrotated 1\n" * 10)
    assert tail.read_new() is None
    assert tail.read_last()[-1] == "rotated 1"
    path.unlink()
    assert tail.read_new() is None and tail.backlog() is None


def test_window_trims(tmp_path: Path) -> None:
    path = tmp_path / "f.log"
    path.write_text("".join(f"n {i}\n" for i in range(1000)))
    tail = TailFile(path)
    last = tail.read_last(500)
    middle_start = tail.start_offset
    older = tail.read_before(500)
    tail.trim_end(middle_start)  # forget the newest chunk: it is read again as "new"
    assert not tail.at_end
    assert tail.read_new() == last
    tail.trim_start(middle_start)  # forget the older chunk: it is read again as "before"
    assert tail.read_before(500) == older


# -- LogView ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A 200 MB log: a 1 MB block written 200 times, then 50 distinct last lines."""
    path = tmp_path_factory.mktemp("logs") / "big.log"
    line = "2025-01-01T00:00:00Z step {:06d} loss=0.1234 " + "x" * 40 + "\n"
    block = "".join(line.format(i) for i in range(1024 * 1024 // len(line.format(0))))
    data = block.encode()
    with open(path, "wb") as f:
        for _ in range(200):
            f.write(data)
        f.write("".join(f"last {i}\n" for i in range(50)).encode())
    yield path
    path.unlink()


@pytest.mark.asyncio
async def test_logview_opens_a_200mb_file_at_its_end_and_loads_older_lines(
    big_log: Path,
) -> None:
    size = big_log.stat().st_size
    view = LogView(big_log)
    async with WidgetApp(view).run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert view.row_text(view.line_count - 1) == "last 49"
        assert size - view.first_loaded_offset < 2 * 1024 * 1024  # the end only
        assert view.line_count < 20_000
        assert view.scroll_offset.y == view.max_scroll_y  # the last lines are on screen
        assert view.follow

        loaded, first = view.line_count, view.first_loaded_offset
        top = view.row_text(0)
        view.scroll_to(y=0, animate=False)
        assert await wait_for(pilot, lambda: view.line_count > loaded)
        assert view.first_loaded_offset < first
        assert view.row_text(view.scroll_offset.y) == top  # the view stayed on its line
        assert not view.follow  # scrolling up stopped following


@pytest.mark.asyncio
async def test_logview_follows_a_growing_file(tmp_path: Path) -> None:
    path = tmp_path / "agent.log"
    path.write_text("".join(f"line {i}\n" for i in range(300)))
    view = LogView(path)
    async with WidgetApp(view).run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert view.row_text(view.line_count - 1) == "line 299" and view.follow
        with open(path, "a") as f:
            f.write("appended 1\npartial")
        assert await wait_for(pilot, lambda: view.row_text(view.line_count - 1) == "appended 1",
                              timeout=2.0)
        await pilot.pause()
        assert view.scroll_offset.y == view.max_scroll_y  # stuck to the end
        await pilot.pause(0.6)
        assert view.row_text(view.line_count - 1) == "appended 1"  # partial line held back
        with open(path, "a") as f:
            f.write(" line done\n")
        assert await wait_for(pilot, lambda: view.row_text(view.line_count - 1)
                              == "partial line done", timeout=2.0)

        await pilot.press("f")
        assert not view.follow
        await pilot.press("up", "up")
        y = view.scroll_offset.y
        with open(path, "a") as f:
            f.write("while paused\n")
        assert await wait_for(pilot, lambda: view.row_text(view.line_count - 1) == "while paused")
        assert view.scroll_offset.y == y  # not following: the view did not move

        await pilot.press("f")
        assert view.follow
        await pilot.pause()
        assert view.scroll_offset.y == view.max_scroll_y
        await pilot.press("up")
        assert not view.follow  # scrolling up turns follow off
        await pilot.press("G")
        assert view.follow and view.scroll_offset.y == view.max_scroll_y

        path.write_text("after truncation\n")  # shrink: reload from the end
        assert await wait_for(pilot, lambda: view.line_count == 1)
        assert view.row_text(0) == "after truncation"

        bindings = {b.binding.key: b.binding.description for b in pilot.app.active_bindings
                    .values() if b.binding.show}
        assert bindings.get("f") == "Follow" and bindings.get("end") == "End"


@pytest.mark.asyncio
async def test_logview_waits_for_a_missing_file_and_switches_files(tmp_path: Path) -> None:
    path = tmp_path / "later.log"
    view = LogView(path)
    async with WidgetApp(view).run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert view.line_count == 0
        assert "waiting for" in view.render_line(0).text
        path.write_text("it exists now\n")
        assert await wait_for(pilot, lambda: view.line_count == 1)
        other = tmp_path / "other.log"
        other.write_text("one\ntwo\n")
        view.open(other)
        await pilot.pause()
        assert [view.row_text(i) for i in range(view.line_count)] == ["one", "two"]


class SmallLogView(LogView):
    MAX_LINES = 3000
    CHUNK_BYTES = 16 * 1024
    MIN_LINES = 100


@pytest.mark.asyncio
async def test_logview_caps_lines_held_and_comes_back_to_the_end(tmp_path: Path) -> None:
    path = tmp_path / "long.log"
    path.write_text("".join(f"row {i:06d}\n" for i in range(60_000)))
    view = SmallLogView(path)
    async with WidgetApp(view).run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        for _ in range(8):  # keep scrolling to the top: older chunks in, newest ones out
            first = view.first_loaded_offset
            view.scroll_to(y=0, animate=False)
            assert await wait_for(pilot, lambda: view.first_loaded_offset < first)  # noqa: B023
        assert view.line_count <= SmallLogView.MAX_LINES
        assert view.row_text(view.line_count - 1) != "row 059999"  # the end was dropped
        top = view.row_text(0)
        assert [view.row_text(i) for i in range(5)] == [
            f"row {int(top[4:]) + i:06d}" for i in range(5)]
        await pilot.press("end")
        assert await wait_for(pilot, lambda: view.row_text(view.line_count - 1) == "row 059999")
        assert view.follow and view.line_count <= SmallLogView.MAX_LINES


# -- DiffView -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def repo_diff(tmp_path_factory: pytest.TempPathFactory) -> str:
    """`git diff` of a modification (a change, an addition, a deletion), a rename with a
    change, a deleted file and a new file without a final newline."""
    repo = tmp_path_factory.mktemp("repo")
    git(repo, "init", "-q")
    (repo / "train.py").write_text(
        "".join(f"def step_{i}(x):\n    return x + {i}  # step {i}\n" for i in range(100)))
    (repo / "old_name.py").write_text("".join(f"value_{i} = {i}\n" for i in range(40)))
    (repo / "gone.txt").write_text("".join(f"gone line {i}\n" for i in range(10)))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    lines = (repo / "train.py").read_text().split("\n")
    lines[10] = "    return x * 10  # changed"
    lines.insert(100, "# added line A\n# added line B")
    del lines[150:153]
    (repo / "train.py").write_text("\n".join(lines))
    (repo / "new_name.py").write_text(
        (repo / "old_name.py").read_text().replace("value_20 = 20", "value_20 = 2000"))
    (repo / "old_name.py").unlink()
    (repo / "gone.txt").unlink()
    (repo / "new.rs").write_text('fn main() {\n    println!("hi");\n}')
    git(repo, "add", "-A")
    return git(repo, "diff", "--cached", "-M")


def find_row(view: DiffView, pattern: str) -> int:
    rows = [y for y in range(view.line_count) if re.search(pattern, view.row_text(y))]
    assert rows, f"no row matches {pattern!r}"
    return rows[0]


@pytest.mark.asyncio
async def test_diffview_unified_rows(repo_diff: str) -> None:
    view = DiffView()
    async with WidgetApp(view).run_test(size=(100, 40)) as pilot:
        view.set_diff(repo_diff, "base..work")
        await pilot.pause()
        assert not view.is_side_by_side
        titles = [view.row_text(y).strip() for y in view.file_rows]
        assert titles == ["gone.txt (deleted) -10", "new.rs (new file) +3",
                          "old_name.py → new_name.py (renamed 97%) +1 -1", "train.py +3 -4"]
        assert len(view.hunk_rows) == 6
        assert all(view.row_text(y).strip().startswith("@@") for y in view.hunk_rows)
        find_row(view, r"^ 11     - def step_5\(x\):$")  # removed: old number only
        find_row(view, r"^     11 \+     return x \* 10  # changed$")  # added: new number
        find_row(view, r"^ 10  10       return x \+ 4  # step 4$")  # context: both
        find_row(view, r"^    101 \+ # added line A$")
        find_row(view, r"^150     -     return x \+ 74  # step 74$")
        find_row(view, r"No newline at end of file")
        find_row(view, r"rename from old_name.py")
        # what is drawn is what row_text says
        for y in range(view.size.height):
            assert view.render_line(y).text.rstrip() == view.row_text(y).rstrip()


@pytest.mark.asyncio
async def test_diffview_hunk_and_file_navigation(repo_diff: str) -> None:
    view = DiffView()
    async with WidgetApp(view).run_test(size=(120, 40)) as pilot:
        view.set_diff(repo_diff)
        await pilot.pause()
        hunks, files = view.hunk_rows, view.file_rows
        last = view.max_scroll_y
        assert 0 < last < hunks[-1]  # the diff is taller than the screen
        for row in hunks:
            await pilot.press("n")
            assert view.scroll_offset.y == min(row, last)
        for row in reversed(hunks[:-1]):
            await pilot.press("p")
            assert view.scroll_offset.y == min(row, last)
        await pilot.press("home")
        await pilot.pause()
        await pilot.press("]")
        assert view.scroll_offset.y == min(files[1], last)
        await pilot.press("]")
        assert view.scroll_offset.y == min(files[2], last)
        await pilot.press("[")
        assert view.scroll_offset.y == min(files[1], last)
        shown = {b.binding.key: b.binding.description for b in pilot.app.active_bindings
                 .values() if b.binding.show}
        assert shown["v"] == "Layout" and shown["n"] == "Next hunk" and shown["p"] == "Prev hunk"
        assert shown["right_square_bracket"] == "Next file"


@pytest.mark.asyncio
async def test_diffview_layout_follows_width_and_toggles(repo_diff: str) -> None:
    view = DiffView()
    async with WidgetApp(view).run_test(size=(200, 40)) as pilot:
        view.set_diff(repo_diff)
        await pilot.pause()
        assert view.side_by_side is None and view.is_side_by_side
        for y in range(view.size.height):
            assert view.render_line(y).text.rstrip() == view.row_text(y)
        row = find_row(view, r"def step_5\(x\):")
        left, right = view.row_text(row).split("│")
        assert re.match(r"^ 11 - def step_5\(x\):\s*$", left)
        assert re.match(r"^ 11 \+     return x \* 10  # changed\s*$", right)
        added = view.row_text(find_row(view, r"# added line A")).split("│")
        assert added[0].strip() == "" and "101 + # added line A" in added[1]
        renamed = view.row_text(find_row(view, "value_20 = 20"))
        assert "value_20 = 2000" in renamed
        assert all("│" not in view.row_text(y) for y in view.hunk_rows + view.file_rows)

        await pilot.press("v")
        assert view.side_by_side is False and not view.is_side_by_side
        assert "│" not in view.row_text(find_row(view, r"def step_5"))
        await pilot.press("v")
        assert view.is_side_by_side

        view.side_by_side = None
        await pilot.resize_terminal(100, 40)
        await pilot.pause()
        assert not view.is_side_by_side
        # The view's own width decides: side by side from SIDE_BY_SIDE_MIN_WIDTH cells,
        # where each half still holds a 50-column line beside its gutter.
        await pilot.resize_terminal(SIDE_BY_SIDE_MIN_WIDTH - 1, 40)
        await pilot.pause()
        assert view.size.width == SIDE_BY_SIDE_MIN_WIDTH - 1 and not view.is_side_by_side
        await pilot.resize_terminal(SIDE_BY_SIDE_MIN_WIDTH, 40)
        await pilot.pause()
        assert view.is_side_by_side
        left, right = view.row_text(find_row(view, r"def step_5\(x\):")).split("│")
        assert len(left) >= 50
        await pilot.resize_terminal(200, 40)
        await pilot.pause()
        assert view.is_side_by_side


@pytest.mark.asyncio
async def test_diffview_empty_diff_says_no_changes() -> None:
    view = DiffView()
    async with WidgetApp(view).run_test(size=(120, 40)) as pilot:
        view.set_diff("")
        await pilot.pause()
        assert view.line_count == 1 and view.row_text(0).strip() == "no changes"
        assert "no changes" in view.render_line(0).text
        assert view.hunk_rows == [] and view.file_rows == []


@pytest.mark.asyncio
async def test_diffview_colours_follow_the_theme(repo_diff: str) -> None:
    view = DiffView()
    async with WidgetApp(view).run_test(size=(100, 40)) as pilot:
        view.set_diff(repo_diff)
        await pilot.pause()

        def row_colours(pattern: str) -> tuple[Color, set[Color | None]]:
            """Background at the row's end, and the colours of its code segments."""
            segments = list(view._unified_row(find_row(view, pattern))[0])
            styles = [s.style or Style() for s in segments]
            assert styles[-1].bgcolor is not None
            return styles[-1].bgcolor, {st.color for st in styles[2:]}

        added_bg, code_colours = row_colours(r"\+     return x \* 10")
        removed_bg, _ = row_colours(r"- def step_5")
        assert added_bg != removed_bg
        assert len(code_colours) > 1  # syntax-highlighted (keyword, number, comment...)
        dark_added = added_bg.get_truecolor()
        pilot.app.theme = "textual-light"
        await pilot.pause()
        light_added = row_colours(r"\+     return x \* 10")[0].get_truecolor()
        assert sum(light_added) > sum(dark_added) + 200  # a light tint on a light theme


@pytest.mark.asyncio
async def test_diffview_loads_a_2000_line_rewrite(tmp_path: Path) -> None:
    old, new = tmp_path / "old.py", tmp_path / "new.py"
    old.write_text("".join(f"x_{i} = compute({i}, 'a')  # {i}\n" for i in range(2000)))
    new.write_text("".join(f"y_{i} = compute({i * 2}, 'b')  # {i}\n" for i in range(2000)))
    diff = subprocess.run(["git", "diff", "--no-index", str(old), str(new)],
                          capture_output=True, text=True).stdout
    view = DiffView()
    async with WidgetApp(view).run_test(size=(100, 40)) as pilot:
        view.set_diff(diff)  # how fast: bench/ui_widgets.py
        strips = [view.render_line(y) for y in range(view.size.height)]
        await pilot.pause()
        assert view.line_count >= 4000 and len(view.hunk_rows) == 1
        assert "x_0 = compute(0, 'a')" in strips[2].text
        await pilot.press("end")
        await pilot.pause()
        assert view.scroll_offset.y == view.max_scroll_y > 3900
