"""An environment in its own child process, so that a pool of them plays in parallel.

ALFWorld's games are pure Python (TextWorld's PDDL engine): a reset costs seconds and a
step a fifth of a second of CPU, under the interpreter lock. Played in the grader's process,
a pool of sixteen games advances one CPU core's worth; each in a child process, the
episode runner's threads (``grader.episode_runner.play(workers=...)``) wait on them while they
use every core.

The child is ``python -m agent2rl_tui.envs.subproc``, not a ``multiprocessing`` process:
``fork`` does not survive the eval worker's CUDA and threads, and ``spawn`` re-imports the
parent's main script, which breaks any caller without a ``__main__`` guard. Calls and answers
are pickles over the child's stdin and a private copy of its stdout (its fd 1 goes to
stderr, so whatever the environment prints cannot garble them); the child ends when its
stdin does, so it never outlives the parent. What the child's environment raises comes back
as an ``EnvError`` with its message.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from typing import IO, Any

from agent2rl_tui.envs.base import EnvError, Environment, Outcome, Start

CLOSE_TIMEOUT_S = 10.0


def _message(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, EnvError) else f"{type(exc).__name__}: {exc}"


def serve(calls: IO[bytes], answers: IO[bytes]) -> None:
    """The child: unpickle the maker, make the environment, answer calls until told to close."""
    def send(ok: bool, value: Any) -> None:
        pickle.dump((ok, value), answers)
        answers.flush()

    try:
        env: Environment = pickle.load(calls)()
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it
        send(False, _message(exc))
        return
    send(True, env.name)
    while True:
        try:
            method, args = pickle.load(calls)
        except (EOFError, OSError):  # the parent is gone
            env.close()
            return
        try:
            send(True, getattr(env, method)(*args))
        except Exception as exc:  # noqa: BLE001 - the parent raises it as an EnvError
            send(False, _message(exc))
        if method == "close":
            return


class InChildProcess:
    """The environment ``make()`` builds, run in a child process; ``make`` must pickle
    (a class or a ``functools.partial`` of one, not a lambda)."""

    def __init__(self, make: Callable[[], Environment]) -> None:
        self._proc = subprocess.Popen([sys.executable, "-m", "agent2rl_tui.envs.subproc"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._calls, self._answers = self._proc.stdin, self._proc.stdout
        try:
            self._send(make)
            self.name: str = self._answer()
        except EnvError:
            self._end()
            raise

    def _send(self, obj: Any) -> None:
        try:
            pickle.dump(obj, self._calls)
            self._calls.flush()
        except (BrokenPipeError, OSError) as exc:
            raise EnvError(f"the environment's process ended (exit code {self._proc.poll()})") from exc

    def _answer(self) -> Any:
        try:
            ok, value = pickle.load(self._answers)
        except (EOFError, OSError, pickle.UnpicklingError) as exc:
            raise EnvError(f"the environment's process ended (exit code {self._proc.poll()})") from exc
        if not ok:
            raise EnvError(value)
        return value

    def _call(self, method: str, *args: Any) -> Any:
        self._send((method, args))
        return self._answer()

    def reset(self, game: str) -> Start:
        return self._call("reset", game)

    def step(self, action: str) -> Outcome:
        return self._call("step", action)

    def gold_actions(self) -> list[str] | None:
        return self._call("gold_actions")

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self._call("close")
            except EnvError:
                pass
        self._end()

    def _end(self) -> None:
        for pipe in (self._calls, self._answers):
            try:
                pipe.close()
            except OSError:
                pass
        try:
            self._proc.wait(CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def main() -> None:
    """Answer on a private copy of stdout; the environment's own prints go to stderr."""
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(sys.stdin.buffer, answers)


if __name__ == "__main__":
    main()
