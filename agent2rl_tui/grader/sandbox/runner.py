"""The sandbox runner: trusted set-up, then the untrusted program, then the verdict.

Not imported by anything that runs a program: the grader copies this file, layers.py and
hook.py into the sandbox's root and compiles them there; the sandboxed interpreter runs this
copy by path (``python -I runner.pyc ARGS``), which loads the other two, compiled, by path
before the program's code exists (see ``agent2rl_tui.grader.sandbox`` for why a program cannot
forge its verdict, and docs/grading.md, part A). Its parameters come on the command line::

    runner FD OPTS UID VLINE KLINE KEY_NAME VERDICT_EVENT TESTS_NAME LAYERS HOOK N MASKED*N HIDDEN*

FD: the result pipe; OPTS: ``-`` or the OS layers to set up (layers.py: ``m`` mounts, ``w``
read-only but its folder, ``u`` switch to UID, ``c`` drop capabilities, ``r`` reaper); UID: the
unprivileged uid for ``u``, else ``-``; VLINE: the line number of this file's ``<verdict>``
line, KLINE: that of hook.py's ``<key-open>`` line (the grader counts them); KEY_NAME: the
verdict key's file name in the program's folder; VERDICT_EVENT: the audit event of the verdict;
TESTS_NAME: the file of the task's tests, when the program has them; LAYERS and HOOK: layers.py
and hook.py compiled; MASKED: the shared temp folders (a private tmpfs each under ``m``);
HIDDEN: folders and files the program must not read (an empty tmpfs each, or /dev/null over a
file, under ``m``; refused by the hook in every mode).

What the program may read: what its uid may, except /proc, the key, its tests, and whatever
lies in a masked or hidden folder with no kept folder between (the program's own folder, the
interpreter's: ``sys.path`` and its prefixes); the deepest of the two decides.

Three files, one trusted program: all three are the grader's, compiled beside each other
(read-only .pyc files) and read only before any code of the program exists (under a mount
namespace the sandbox's root is covered once the mounts are made). The hook's own checks do not depend on where its code
came from: it compares frames and code objects it captured (this file's top-level frame, the
code of ``_run_tests``, its own code for the key's line), and reads no globals.

A program with tests (HumanEval: ``TESTS_NAME`` exists) runs in two phases. Phase one is the
program's own code (the prompt and the model's completion). Phase two runs the tests apart from
it: the hook read and compiled them before the program started and keeps them in its closure,
hands them to ``_run_tests`` only (once, in this process), refuses frames (``sys._getframe``)
to the whole program and, from then on, forks. The tests get a namespace of their own, with a copy of the
builtins taken before the program ran and the prompt's own definitions; the function under test
is wrapped so that it gets the hook's copies of the tests' arguments and every value it
returns is checked by the hook (the builtin types of plain data, recursively, within a depth
and size limit; a subclass of one is read as its base type by the base type's own C methods)
and replaced by the hook's copy. The verdict needs the tests to have run
to their end with every result plain. Everything the hook uses is captured into its closure at install
time: a program can rebind globals and builtins, not closure cells it cannot reach. Standard
library only, Python 3.11+.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not typing's: the runner imports nothing it does not need
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import CodeType
    from typing import Any, NoReturn


def _setup() -> tuple[CodeType, dict[str, Any], bool]:
    if sys.version_info < (3, 11):  # noqa: UP036 - it may run on the system's Python
        raise SystemExit("the sandbox runner needs Python 3.11 or newer")
    fd, opts, uid, vline, kline = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    key_name, event, tests_name, layers, hook, n = sys.argv[6:12]
    masked, hidden = tuple(sys.argv[12:12 + int(n)]), tuple(sys.argv[12 + int(n):])
    os.set_inheritable(fd, False)
    sys.dont_write_bytecode = True
    keep = tuple(p for p in {*sys.path, sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
                 if p.startswith("/") and os.path.isdir(p))
    install = _load(hook)["install"]  # both loaded before the mounts cover the sandbox's root
    if opts != "-":
        _load(layers)["apply"](opts, fd, None if uid == "-" else int(uid), masked, hidden, keep)
    with open("prog.py", encoding="utf-8") as fh:
        code = compile(fh.read(), "prog.py", "exec")
    ns = {"__name__": "__sandbox__", "__builtins__": __builtins__}
    tests = install(fd, sys._getframe(1), vline, kline, key_name, event, tests_name, masked + hidden, keep, _run_tests)
    return code, ns, tests

def _load(path: str) -> dict[str, Any]:
    """A compiled companion file (layers.py, hook.py), by path, in a namespace of its own."""
    import marshal
    with open(path, "rb") as fh:
        ns = {"__name__": "__sandbox_runner__", "__builtins__": __builtins__}
        exec(marshal.loads(fh.read()[16:]), ns)  # a .pyc: 16 bytes of header, then the code
    return ns

def _run_tests(ns: dict[str, Any], audit: Callable[..., None] = sys.audit,
               Base: type[BaseException] = BaseException) -> None:
    """Phase two: the task's tests against the program's function, apart from the program.

    Uses nothing but its arguments and what the hook hands this frame (once): the audit
    function, ``exec``, the compiled prompt and tests, the entry point's name, the builtins as
    they were and the hook's result box. Whatever else calls this code gets nothing from the hook.
    """
    try:
        audit("agent2rl.refs")
    except Base as delivered:
        refs = delivered.args[0]
    audit, run, prompt, tests, entry, builtins, take = refs
    env = {"__name__": "__tests__", "__builtins__": builtins}
    run(prompt, env)  # the prompt's own helpers (the tests may call them), never the program's
    fn = ns[entry]

    def candidate(*args, **kwargs):
        audit("agent2rl.call", args, kwargs)
        args, kwargs = take(None)  # the hook's copies: the function never holds the tests' own objects
        audit("agent2rl.result", fn(*args, **kwargs))
        return take(None)  # the hook's copy of the result, checked plain

    env[entry] = candidate
    run(tests, env)
    env["check"](candidate)
    audit("agent2rl.tested")

def _exit(code: int, flush: tuple[Callable[[], None], ...] = (sys.stdout.flush, sys.stderr.flush),
          _exit: Callable[[int], NoReturn] = os._exit) -> NoReturn:
    """Leave without finalizing the interpreter (it costs milliseconds, more after a fork)."""
    for f in flush:
        try:
            f()
        except BaseException:
            pass
    _exit(code)

def _failed(hook: Callable[..., Any] = sys.__excepthook__, exc_info: Callable[..., Any] = sys.exc_info,
            isinstance: Callable[..., bool] = isinstance, int: type = int) -> NoReturn:
    kind, err, tb = exc_info()
    if isinstance(err, SystemExit):
        code = err.code
        if code is not None and not isinstance(code, int):
            sys.stderr.write(str(code) + "\n")
            code = 1
        _exit((code or 0) & 0xFF)
    hook(kind, err, tb)
    _exit(1)

if __name__ == "__main__":
    _code, _ns, _tests = _setup()
    _verdict = sys.argv[7]
    del _setup, _load
    try:
        exec(_code, _ns)
        if _tests:
            sys.audit("agent2rl.tests")
            _run_tests(_ns)
    except BaseException:
        _failed()  # exits; should it return or raise instead, the exception goes on anyway:
        raise      # only a normal return of exec reaches the next line
    sys.audit(_verdict)  # <verdict>
    _exit(0)
