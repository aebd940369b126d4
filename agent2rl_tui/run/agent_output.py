"""Where the agent's output goes: stamped log, raw stream, normalized transcript.

Two reader threads drain the agent's stdout and stderr (separate pipes, so a long JSON line
on stdout is never interleaved with a warning on stderr). Every line is written to
logs/agent.log with a UTC stamp (stderr lines marked ``[stderr]``); for JSON-stream agents
stdout is also kept byte for byte in logs/agent.jsonl; and every line is fed to the
transcript recorder with its arrival time. Lines are read unbounded: one JSON line may hold
a whole tool output.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import IO

from agent2rl_tui.record.transcripts import TranscriptRecorder
from agent2rl_tui.run.transcripts import make_normalizer
from agent2rl_tui.util.timeutil import iso, now

log = logging.getLogger(__name__)


class AgentOutput:
    def __init__(self, run_dir: Path, stream_format: str) -> None:
        logs = run_dir / "logs"
        self.log = (logs / "agent.log").open("ab")
        self.raw = (logs / "agent.jsonl").open("ab") if stream_format != "text" else None
        self.recorder = TranscriptRecorder(run_dir, make_normalizer(stream_format))
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def attach(self, stdout: IO[bytes] | None, stderr: IO[bytes] | None) -> None:
        for stream, is_err in ((stdout, False), (stderr, True)):
            if stream is not None:
                t = threading.Thread(target=self._drain, args=(stream, is_err),
                                     name="agent-stderr" if is_err else "agent-stdout", daemon=True)
                t.start()
                self.threads.append(t)

    def _drain(self, stream: IO[bytes], is_err: bool) -> None:
        for raw in iter(stream.readline, b""):
            at = now()
            line = raw.rstrip(b"\r\n")
            with self.lock:
                self.log.write(iso(at).encode() + (b" [stderr] " if is_err else b" ") + line + b"\n")
                self.log.flush()
                if self.raw is not None and not is_err:
                    self.raw.write(line + b"\n")
                    self.raw.flush()
            text = line.decode("utf-8", errors="replace")
            try:
                if is_err:
                    self.recorder.stderr_line(text, at)
                else:
                    self.recorder.stdout_line(text, at)
            except Exception as exc:  # noqa: BLE001 - keep draining: the pipe must never fill up
                log.warning("transcript recorder failed: %s", exc)

    def tick(self) -> None:
        """Flush steps that have waited (called from the supervisor's loop); never raises."""
        try:
            self.recorder.flush()
        except Exception as exc:  # noqa: BLE001
            log.warning("transcript flush failed: %s", exc)

    def close(self, timeout: float = 10.0) -> None:
        for t in self.threads:
            t.join(timeout=timeout)
        self.recorder.close()
        self.log.close()
        if self.raw is not None:
            self.raw.close()
