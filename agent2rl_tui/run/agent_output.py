"""Where the agent's output goes: stamped log, raw stream, normalized transcript.

Two reader threads drain the agent's stdout and stderr (separate pipes, so a long JSON line
on stdout is never interleaved with a warning on stderr). Every line is written to
logs/agent.log with a UTC stamp (stderr lines marked ``[stderr]``); for JSON-stream agents
stdout is also kept byte for byte in logs/agent.jsonl; and every line is fed to the
transcript recorder with its arrival time.

What the agent prints is hostile data, and the supervisor's memory must not depend on it.
Lines are read in pieces of at most ``LINE_BYTES``: a line up to that long (a JSON line with
a whole tool output) is handled whole; a longer one is streamed piece by piece into
agent.log (and agent.jsonl), whole and unbroken (the other stream's reader waits for its
end, so no line is interleaved into it), and the transcript gets its first ``HEAD_BYTES``
with a marker giving its length and where it is kept. Output with no newline at all is
such a line, so it never grows memory either. Every byte passes the run's redactor first
(``record.redact``): a key the agent prints is in none of the three. The supervisor records its own peak
resident memory at the end of the run (``record_peak_memory``), for a reader to check.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import IO

from agent2rl_tui.record.redact import Redactor
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.record.transcripts import TranscriptRecorder
from agent2rl_tui.run.streams import make_normalizer
from agent2rl_tui.util.diskfull import SpooledLog
from agent2rl_tui.util.timeutil import iso, now

log = logging.getLogger(__name__)

LINE_BYTES = 2**20
"""The longest line handled whole (and the most read at once)."""
HEAD_BYTES = 2000
"""What the transcript keeps of a longer line (under record.transcripts.TEXT_LIMIT with the marker)."""


class AgentOutput:
    def __init__(self, run_dir: Path, stream_format: str, redactor: Redactor | None = None) -> None:
        self.redactor = redactor or Redactor()
        logs = run_dir / "logs"
        # A full disk must not stop the draining (the agent would block on its pipe) nor lose lines.
        self.log = SpooledLog(logs / "agent.log", on_full=log.warning, on_room=log.info, name="logs/agent.log")
        self.raw = (SpooledLog(logs / "agent.jsonl", name="logs/agent.jsonl") if stream_format != "text"
                    else None)
        self.recorder = TranscriptRecorder(run_dir, make_normalizer(stream_format))
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self.long_lines = 0

    def attach(self, stdout: IO[bytes] | None, stderr: IO[bytes] | None) -> None:
        for stream, is_err in ((stdout, False), (stderr, True)):
            if stream is not None:
                t = threading.Thread(target=self._drain, args=(stream, is_err),
                                     name="agent-stderr" if is_err else "agent-stdout", daemon=True)
                t.start()
                self.threads.append(t)

    def _drain(self, stream: IO[bytes], is_err: bool) -> None:
        while piece := stream.readline(LINE_BYTES + 1):  # a line of LINE_BYTES and its newline
            at = now()
            if piece.endswith(b"\n") or len(piece) <= LINE_BYTES:  # a whole line (or the last, unended)
                line = self.redactor.data(piece.rstrip(b"\r\n"))
                with self.lock:  # one write a line
                    self.log.write(self._stamp(at, is_err) + line + b"\n")
                    if self.raw is not None and not is_err:
                        self.raw.write(line + b"\n")
                text = line.decode("utf-8", errors="replace")
            else:
                text = self._long_line(stream, piece, at, is_err)
            try:
                if is_err:
                    self.recorder.stderr_line(text, at)
                else:
                    self.recorder.stdout_line(text, at)
            except Exception as exc:  # noqa: BLE001 - keep draining: the pipe must never fill up
                log.warning("transcript recorder failed: %s", exc)

    def _long_line(self, stream: IO[bytes], piece: bytes, at: float, is_err: bool) -> str:
        """Stream a line longer than LINE_BYTES into the logs; the transcript's capped text."""
        head = self.redactor.data(piece[:HEAD_BYTES])
        size = 0
        held = b""  # trailing carriage returns, written only if more of the line follows
        with self.lock:
            self.log.write(self._stamp(at, is_err))
            while piece:
                ended = piece.endswith(b"\n")
                data = held + piece
                body = data.rstrip(b"\r\n") if ended else data.rstrip(b"\r")
                if not ended and len(data) - len(body) > 64:  # a run of them is content, not a line end
                    body = data
                held = b"" if ended else data[len(body):]
                self._write(self.redactor.data(body), is_err)
                size += len(body)
                if ended:
                    break
                piece = stream.readline(LINE_BYTES)
            self._write_end(is_err)
            self.long_lines += 1
        where = "logs/agent.log" + (" and logs/agent.jsonl" if self.raw is not None and not is_err else "")
        return (head.decode("utf-8", errors="replace")
                + f" [... a line of {size:,} bytes, cut here to its first {len(head):,}; kept whole in {where}]")

    @staticmethod
    def _stamp(at: float, is_err: bool) -> bytes:
        return iso(at).encode() + (b" [stderr] " if is_err else b" ")

    def _write(self, data: bytes, is_err: bool) -> None:
        self.log.write(data)
        if self.raw is not None and not is_err:
            self.raw.write(data)

    def _write_end(self, is_err: bool) -> None:
        self.log.write(b"\n")
        if self.raw is not None and not is_err:
            self.raw.write(b"\n")

    def tick(self) -> None:
        """Flush steps and lines that have waited (called from the supervisor's loop); never raises."""
        try:
            self.log.flush()  # lines that waited for room on a full disk
            if self.raw is not None:
                self.raw.flush()
            self.recorder.flush()
        except Exception as exc:  # noqa: BLE001
            log.warning("transcript flush failed: %s", exc)

    def close(self, timeout: float = 10.0, *, final: bool = True) -> bool:
        """Wait for the readers, write what waits and close; whether all of it was written. Not
        ``final``: what a full disk keeps out stays in memory for a final close once there is room
        (the supervisor's, after it gives back the room it kept)."""
        for t in self.threads:
            t.join(timeout=timeout)
        written = self.recorder.close(final=final)
        written = self.log.close(final=final) and written
        if self.raw is not None:
            written = self.raw.close(final=final) and written
        return written

    @staticmethod
    def record_peak_memory(store: RunStore) -> None:
        """The supervisor's own peak resident memory (VmHWM) as a ``peak_memory`` event; never raises.

        However much the agent printed, it should be the supervisor's own size: the reader
        threads hold a piece of a line at a time.
        """
        try:
            with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
                kib = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
            store.event("supervisor", "peak_memory", f"supervisor peak resident memory {kib / 1024:.0f} MiB",
                        {"vm_hwm_bytes": kib * 1024})
        except Exception as exc:  # noqa: BLE001 - a reading for the record, never a reason to fail
            log.warning("could not record the supervisor's peak memory: %s", exc)
