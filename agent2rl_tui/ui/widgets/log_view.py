"""A log pane over a possibly huge, growing file: only the tail is read, only visible lines drawn.

``RichLog`` and ``Log`` keep every line and froze apps at a few MB (textual #2432). An agent
log can reach gigabytes, so this view holds a bounded window of lines read from the end by
``TailFile`` and renders through the Line API (``render_line``), like Toolong:

- opening reads the last chunk(s) only, on the event loop (256 KB is about a millisecond);
- scrolling near the top of the window reads the previous chunk in a thread worker and keeps
  the same line on screen; near the bottom of a window whose end was dropped, the next one;
- a timer polls the file size every ``POLL_INTERVAL`` and reads only the new bytes (a shrink
  or a replaced file reloads from the end); while ``follow`` is on the view sticks to the end;
- at most ``MAX_LINES`` lines are held: the chunk farthest from the view is dropped;
- lines are drawn as ``TailFile`` read them: cut at 2,000 characters, control characters
  and ANSI escapes shown as escapes (the agent writes this log), never interpreted.

One file operation runs at a time (``_busy``), so the reader is never shared between threads;
the worker only posts ``ChunkRead`` back, and a result for a file since replaced is ignored.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

from rich.cells import cell_len
from rich.segment import Segment
from textual import work
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from agent2rl_tui.ui.tailfile import CHUNK_BYTES, TailFile
from agent2rl_tui.util.inert import one_line

ReadKind = Literal["older", "newer", "reload", "missing"]

class LogView(ScrollView, can_focus=True):
    """Tail of a text file that follows it as it grows; scroll up to read older lines."""

    DEFAULT_CSS = """
    LogView {
        background: $surface;
        color: $foreground;
        & > .logview--placeholder { color: $text-muted; text-style: italic; }
    }
    """
    COMPONENT_CLASSES = {"logview--placeholder"}

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "toggle_follow", "Follow", id="log-follow",
                tooltip="Stick to the end of the file as it grows (on/off)"),
        Binding("end", "follow_end", "End", id="log-end",
                tooltip="Jump to the last line and follow the file"),
        Binding("G", "follow_end", "End", show=False),
    ]

    CHUNK_BYTES: int = CHUNK_BYTES
    """Bytes read per step backwards (and at most twice this per poll)."""
    MAX_LINES: int = 200_000
    """Lines held in memory; the chunk farthest from the view is dropped beyond this."""
    OPEN_CHUNKS: int = 8
    """At most this many chunks are read on open, even if they hold fewer than MIN_LINES."""
    MERGE_LINES: int = 2048
    """Lines appended by polls are grouped into chunks of at most this many."""
    POLL_INTERVAL: float = 0.5
    """Seconds between checks of the file size."""
    MIN_LINES: int = 500
    """Lines to read on open (more chunks are read while short of this)."""

    follow: reactive[bool] = reactive(True, init=False)
    """Stick to the end: new lines scroll into view. Scrolling up turns it off."""

    @dataclass
    class ChunkRead(Message, bubble=False):
        """A file read finished in the worker (posted to the view itself)."""

        generation: int
        kind: ReadKind
        lines: list[str] = field(default_factory=list)
        start: int = 0
        """Byte offset of the first line read."""
        tail: TailFile | None = None
        """For ``reload``: the reader to use from now on."""
        chunks: list[list[int]] = field(default_factory=list)
        """For ``reload``: ``[start offset, line count]`` per chunk, oldest first."""

    def __init__(
        self,
        path: Path | None = None,
        *,
        follow: bool = True,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.set_reactive(LogView.follow, follow)
        self.path: Path | None = Path(path) if path is not None else None
        self._tail: TailFile | None = None
        self._lines: list[str] = []
        self._chunks: deque[list[int]] = deque()  # [start offset, line count], oldest first
        self._width = 0
        self._generation = 0
        self._busy = False
        self._adjusting = False
        self._status = ""

    # -- public ---------------------------------------------------------------------------

    @property
    def line_count(self) -> int:
        """Lines loaded (the window, not the file)."""
        return len(self._lines)

    @property
    def first_loaded_offset(self) -> int:
        """Byte offset in the file of the first loaded line."""
        if self._chunks:
            return self._chunks[0][0]
        return self._tail.end_offset if self._tail is not None else 0

    def row_text(self, y: int) -> str:
        """The text of loaded line ``y`` as shown (cut long lines end with an ellipsis)."""
        return self._lines[y]

    def open(self, path: Path | None) -> None:
        """Show another file (``None``: nothing), from its end."""
        self.path = Path(path) if path is not None else None
        self._generation += 1
        self._busy = False
        self.workers.cancel_group(self, "logview-io")
        if self.is_mounted:
            self._load_end()

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow

    def action_follow_end(self) -> None:
        if self.follow:
            self._scroll_to_end()
            self._poll()
        else:
            self.follow = True

    # -- lifecycle ------------------------------------------------------------------------

    def on_mount(self) -> None:
        self._load_end()
        self.set_interval(self.POLL_INTERVAL, self._poll, name="logview-poll")

    def watch_follow(self, follow: bool) -> None:
        if follow:
            self._scroll_to_end()
            self._poll()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self._adjusting:
            return
        if new_value < old_value and new_value < self.max_scroll_y:
            self.follow = False
        elif (
            new_value > old_value
            and new_value >= self.max_scroll_y
            and self._tail is not None
            and self._tail.at_end
        ):
            self.follow = True
        self._maybe_load()

    # -- reading --------------------------------------------------------------------------

    def _load_end(self) -> None:
        """Read the last lines synchronously (bounded) and show the end."""
        self._tail = None
        self._lines = []
        self._chunks.clear()
        self._width = 0
        if self.path is None:
            self._status = "no log"
        else:
            tail = TailFile(self.path)
            try:
                chunks = self._read_end(tail)
            except OSError:
                self._status = one_line(f"waiting for {self.path}")
            else:
                self._tail = tail
                self._status = "empty" if not chunks else ""
                for start, lines in chunks:
                    self._chunks.append([start, len(lines)])
                    self._lines.extend(lines)
                self._width = max(map(len, self._lines), default=0)
        self._set_virtual_size()
        self._scroll_to_end()
        self.refresh()

    def _read_end(self, tail: TailFile) -> list[tuple[int, list[str]]]:
        """Chunks ``(start offset, lines)``, oldest first, from the end: about MIN_LINES,
        at most ``OPEN_CHUNKS`` chunks (a file of huge lines must not be read whole)."""
        want = max(self.MIN_LINES, 2 * self.size.height)
        lines = tail.read_last(self.CHUNK_BYTES)
        chunks = [(tail.start_offset, lines)]
        count = len(lines)
        while count < want and not tail.at_start and len(chunks) < self.OPEN_CHUNKS:
            lines = tail.read_before(self.CHUNK_BYTES)
            chunks.insert(0, (tail.start_offset, lines))
            count += len(lines)
        return [c for c in chunks if c[1]]

    def _poll(self) -> None:
        if self._busy or self.path is None or not self.is_mounted:
            return
        if self._tail is None:
            self._start("reload")
            return
        backlog = self._tail.backlog()  # one stat on the event loop; reads go to the worker
        if backlog is None:
            self._start("reload")
        elif backlog > 0 and (self.follow or self._near_bottom() or (
            self._tail.at_end and len(self._lines) < self.MAX_LINES
        )):
            self._start("newer")

    def _maybe_load(self) -> None:
        if self._busy or self._tail is None:
            return
        margin = max(2 * self.size.height, 100)
        if int(self.scroll_y) < margin and not self._tail.at_start:
            self._start("older")
        elif not self._tail.at_end and self._near_bottom():
            self._start("newer")

    def _near_bottom(self) -> bool:
        margin = max(2 * self.size.height, 100)
        return int(self.scroll_y) + self.size.height >= len(self._lines) - margin

    def _start(self, kind: ReadKind) -> None:
        self._busy = True
        self._read(self._generation, kind, self._tail, self.path, self.follow)

    @work(thread=True, group="logview-io", exit_on_error=False)
    def _read(
        self,
        generation: int,
        kind: ReadKind,
        tail: TailFile | None,
        path: Path | None,
        follow: bool,
    ) -> None:
        """Thread worker: one bounded read; posts ``ChunkRead`` back."""
        try:
            if tail is not None and kind == "older":
                older = tail.read_before(self.CHUNK_BYTES)
                self.post_message(self.ChunkRead(generation, "older", older, tail.start_offset))
                return
            if tail is not None and kind == "newer":
                start = tail.end_offset
                backlog = tail.backlog()
                # Following a file that jumped far ahead: reload its end instead of catching up.
                if backlog is not None and not (follow and backlog > 4 * self.CHUNK_BYTES):
                    new = tail.read_new(2 * self.CHUNK_BYTES)
                    if new is not None:
                        self.post_message(self.ChunkRead(generation, "newer", new, start))
                        return
            assert path is not None
            fresh = TailFile(path)
            chunks = self._read_end(fresh)
            self.post_message(
                self.ChunkRead(generation, "reload", tail=fresh,
                               chunks=[[offset, len(part)] for offset, part in chunks],
                               lines=[line for _, part in chunks for line in part])
            )
        except OSError:
            self.post_message(self.ChunkRead(generation, "missing"))

    def on_log_view_chunk_read(self, message: ChunkRead) -> None:
        if message.generation != self._generation:
            return
        self._busy = False
        if message.kind == "older":
            self._prepend(message.lines, message.start)
        elif message.kind == "newer":
            self._append(message.lines, message.start)
        elif message.kind == "reload":
            self._replace(message)
        elif message.kind == "missing" and self._tail is not None:
            self._tail = None
            self._lines, self._status = [], one_line(f"waiting for {self.path}")
            self._chunks.clear()
            self._set_virtual_size()
            self.refresh()
        if self.is_mounted:
            self.call_after_refresh(self._maybe_load)

    def _prepend(self, lines: list[str], start: int) -> None:
        if not lines:
            return
        self._lines[:0] = lines
        self._chunks.appendleft([start, len(lines)])
        self._width = max(self._width, max(map(len, lines)))
        self._set_virtual_size()
        self._move(len(lines))
        self._cap(drop_front=False)

    def _append(self, lines: list[str], start: int) -> None:
        if not lines:
            return
        if self._chunks and self._chunks[-1][1] + len(lines) <= self.MERGE_LINES:
            self._chunks[-1][1] += len(lines)  # many small polls make one droppable chunk
        else:
            self._chunks.append([start, len(lines)])
        self._lines.extend(lines)
        self._width = max(self._width, max(map(len, lines)))
        self._status = ""
        self._set_virtual_size()
        self._cap(drop_front=True)
        if self.follow:
            self._scroll_to_end()
        self.refresh()

    def _replace(self, message: ChunkRead) -> None:
        self._tail = message.tail
        self._chunks = deque(message.chunks)
        self._lines = message.lines
        self._width = max(map(len, self._lines), default=0)
        self._status = "" if self._lines else "empty"
        self._set_virtual_size()
        self._scroll_to_end()
        self.refresh()

    def _cap(self, *, drop_front: bool) -> None:
        """Drop whole chunks beyond MAX_LINES: the oldest after an append, else the newest."""
        assert self._tail is not None
        removed = 0
        while len(self._lines) > self.MAX_LINES and len(self._chunks) > 1:
            if drop_front:
                n = self._chunks.popleft()[1]
                del self._lines[:n]
                self._tail.trim_start(self._chunks[0][0])
                removed += n
            else:
                start, n = self._chunks.pop()
                del self._lines[-n:]
                self._tail.trim_end(start)
                self.follow = False
        self._set_virtual_size()
        if removed:
            self._move(-removed)

    # -- scrolling helpers ----------------------------------------------------------------

    def _set_virtual_size(self) -> None:
        self.virtual_size = Size(self._width, len(self._lines))

    def _move(self, rows: int) -> None:
        """Shift the scroll position by ``rows`` so the same line stays on screen."""
        self._adjusting = True
        try:
            self.scroll_to(y=self.scroll_y + rows, animate=False, force=True, immediate=True)
        finally:
            self._adjusting = False

    def _scroll_to_end(self) -> None:
        self._adjusting = True
        try:
            self.scroll_to(y=len(self._lines), animate=False, force=True, immediate=True)
        finally:
            self._adjusting = False

    # -- rendering ------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        row = scroll_y + y
        width = self.size.width
        style = self.rich_style
        if row >= len(self._lines):
            if row == 0 and self._status:
                muted = self.get_component_rich_style("logview--placeholder")
                text = f" {self._status}"
                return Strip([Segment(text, muted)], cell_len(text)).crop_extend(0, width, style)
            return Strip.blank(width, style)
        line = self._lines[row]  # made inert when read (tailfile: controls shown as escapes)
        strip = Strip([Segment(line, style)], cell_len(line))
        return strip.crop_extend(scroll_x, scroll_x + width, style)
