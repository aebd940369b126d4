"""Every benchmark in bench/ runs in quick mode and prints its figures: benchmarks that cannot rot.

Nothing else runs the scripts, so an API they call can change under them unnoticed (one did:
bench/judge.py called ``evaluator_for`` with an argument it no longer takes). Each script takes
``--quick``: the same code path as its full run, at small sizes. Here each runs so, for real, in
a subprocess from the repository root, as ``make bench`` runs it, and its output must hold the
lines that carry its figures, each with its numbers. Only behaviour is asserted (a figure is
printed and is a number, the pasted items are found, the cache answers the second pass); how
fast is the benchmarks' own business, never a test's.

A new script is collected by the glob and fails until its figure lines are listed in
``FIGURES``. The GPU-only scripts say in one line, at full size on a machine without a CUDA GPU,
that they need one, and exit 0 (``make bench`` runs every script at full size on any machine).
"""

from __future__ import annotations

import ast
import contextlib
import math
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.paths import REPO, SHARED_DATA
from support.skip_policy import needs_gpu

from agent2rl_tui.run import containment

ROOT = REPO
BENCH = ROOT / "bench"
SCRIPTS = sorted(p.stem for p in BENCH.glob("*.py"))
TIMEOUT_S = 480
"""A quick run takes seconds to a minute on two busy cores; this is far beyond, and below pytest's own 600 s."""

N = r"([-+]?\d[\d,]*(?:\.\d+)?)"
"""A printed figure: digits, maybe signed, with thousands commas and a fraction (never nan or inf)."""

GPU_ONLY = ("gpu_check", "gsm8k_gpu")
"""Scripts whose full run needs a CUDA GPU: without one they say so in one line and exit 0."""
CUDA_ONLY_QUICK = {"gsm8k_gpu": "bench/gsm8k_gpu.py --quick (vLLM on CUDA; bench/vllm_grading.py is its CPU twin)"}
"""Scripts whose quick run needs CUDA too (the one allowed skip)."""
SLOW = {"engine_cpu", "episodes", "gpu_check", "grader_overhead", "rl_vs_sft", "vllm_grading"}
"""Quick runs that start vLLM, a grader or a training process: tens of seconds each."""


def _figures(*lines: str) -> tuple[str, ...]:
    return tuple(line.replace("{n}", N) for line in lines)


def _containment_figures() -> tuple[str, ...]:
    """Where bubblewrap works, the two timings; else the line that says why nothing was timed."""
    why_not = containment.probe()
    if why_not:
        return (r"^containment unavailable here: " + re.escape(why_not),)
    return _figures(r"^sandbox: {n} arguments, hidden: ",
                    r"^start python -c pass +bare +{n} ms +contained +{n} ms +\(\+{n} ms, median of {n}\)",
                    r"^{n} small files +bare +{n} ms +contained +{n} ms +\(\+{n} ms, median of {n}\)")


FIGURES: dict[str, tuple[str, ...]] = {
    "alfworld_env": _figures(
        r"^{n} games from " + re.escape(str(SHARED_DATA.resolve() / "alfworld")) + r"\S*; {n} CPUs",  # the real games
        r"^first environment \(imports textworld \+ alfworld\): {n} s",
        r"^  \S+ +reset +{n} s +plan +{n} s +{n} steps +{n} s",
        r"^reset \(load \+ reset\): mean {n} s, max {n} s",
        r"^planner plan: mean {n} s",
        r"^steps: {n} moves/s, {n} unknown commands/s",
        r"^time per game on the expert plan \(reset \+ steps, no planner\): mean {n} s",
        r"^one environment process, started and closed: {n} s",
        r"^episode runner, expert plans: one game at a time in-process {n} s; {n} processes at once {n} s \({n}x\)"),
    "cli_startup": _figures(
        r"^{n} repetitions each, fresh processes, {n} CPUs, load {n}",
        r"^python -c pass: wall median {n} s \(best {n}\), CPU median {n} s \(best {n}\)$",
        r"^agent2rl-tui --help: wall median {n} s \(best {n}\), CPU median {n} s \(best {n}\), {n} modules",
        r"^agent2rl-tui runs \({n} runs\): wall median {n} s \(best {n}\), CPU median {n} s \(best {n}\), {n} modules"),
    "containment": _containment_figures(),
    "contamination": _figures(
        r"^revisions: {n} taken in {n} s \({n} MB of snapshots.git\)",
        r"^rollouts: {n} MB of JSONL in output/, 3 test items pasted in",
        r"^index: {n} eval items \({n} checkable\), {n} n-grams, built in {n} s",
        r"^history: {n} revisions, {n} distinct blobs, mapped in {n} s",
        r"^scan: {n} files / blobs, {n} MB in {n} s \({n} MB/s\), {n} revisions",
        r"^total: {n} s; peak RSS {n} MB",
        r"^hits: 3 file\(s\), items \['1211', '3', '640'\] \(as pasted\)"),  # exactly the pasted test items
    "diagnosis": _figures(
        r"^built a run of {n} steps, {n} submissions and revisions in {n} s",
        r"^route: GRPO .*; {n} iterations",
        r"^build_iterations: {n} s \(best of 3\)",
        r"^build_report: +{n} s \(best of 3\)"),
    "engine_cpu": _figures(
        r"^{n} prompts x {n} new tokens, greedy, {n} CPUs",
        r"^tiny +{n}M params +transformers +{n} tok/s \( *{n} s\) +vLLM +{n} tok/s \( *{n} s; engine start {n} s\)"),
    "episodes": _figures(
        r"^environment alone: {n} games on their gold paths, {n} steps in {n} s \({n} steps/s, {n} ms per game incl. reset\)",
        r"^transformers \(turn cache\) +pool +{n}: {n} episodes in +{n} s = +{n} episodes/s \(generate {n} s",
        r"^transformers +pool +{n}: {n} episodes in +{n} s = +{n} episodes/s .* per turn {n} prompt tokens, {n} prefilled",
        r"^transformers: generation, {n} at once vs one at a time: {n}x faster; end to end {n}x",
        r"^vllm +pool +{n}: {n} episodes in +{n} s = +{n} episodes/s .* per turn {n} prompt tokens, {n} prefilled",
        r"^vllm: generation, {n} at once vs one at a time: {n}x faster; end to end {n}x",
        r"^prediction, ALFWorld on one H100 .* = {n} min at worst"),
    "gpu_check": _figures(  # on the CPU where no CUDA GPU is visible: the CUDA steps small, nvml and vitals skipped
        r'^\{"step": "env", "status": "pass", "seconds": {n}',
        r'^\{"step": "nvml", "status": "(?:pass|skip)", "seconds": {n}',
        r'^\{"step": "build_tiny", "status": "pass", "seconds": {n}, "tiny_build_s": {n}',
        r'^\{"step": "worker_tiny", "status": "pass", "seconds": {n}.*"n_items": {n}.*"items_per_s": {n}',
        r'^\{"step": "worker_larger", "status": "pass", "seconds": {n}, "params_m": {n}.*"items_per_s": {n}',
        r'^\{"step": "grader", "status": "pass", "seconds": {n}, "grader_ready_s": {n}.*"items_per_s": {n}',
        r'^\{"step": "agent", "status": "pass", "seconds": {n}, "agent_s": {n}, "agent_exit": 0',
        r'^\{"step": "vitals", "status": "(?:pass|skip)", "seconds": {n}.*"samples": {n}',
        r"^GPU CHECK: PASS - {n} passed"),
    "grader_overhead": _figures(
        r"^grader up with baseline scored in {n} s",
        r"^spaced \(warm spare worker\) +n={n} +submit->scored +{n} ms +generate +{n} ms +load +{n} ms +overhead +{n} ms",
        r"^back to back +n={n} +submit->scored +{n} ms +generate +{n} ms +load +{n} ms +overhead +{n} ms",
        r"^transformers engine, batch 100: +{n} items/s \({n} ms for {n}\)",
        r"^transformers engine, batch  16: +{n} items/s \({n} ms for {n}\)",
        r"^transformers engine, batch   1: +{n} items/s \({n} ms for {n}\)"),
    "gsm8k_gpu": _figures(
        r"^submission \(baseline, {n} items, engine vllm, model \S+\): {n} s, score {n}",
        r"^  generate +{n} s",
        r"^plain vLLM: engine start {n} s, generate {n} s",
        r"^grader overhead beyond engine start \+ generation: {n} s = {n}% of plain generation"),
    "intake": _figures(
        r"^a {n} GiB safetensors file, in the page cache",
        r"^plain copy \(shutil.copyfile\) +{n} ms/GiB \(min {n}, max {n}, n=5\)",
        r"^intake \(copy \+ checks\) +{n} ms/GiB \(min {n}, max {n}, n=5\)",
        r"^weights hash \(eval worker\) +{n} ms/GiB \(min {n}, max {n}, n=3\)"),
    "judge": _figures(
        r"^judge calls against the local judge server, ranking mode, {n} pairs",
        r"^  concurrency  1: +{n} calls/s \({n} s\)",
        r"^  concurrency  4: +{n} calls/s \({n} s\)",
        r"^  concurrency  8: +{n} calls/s \({n} s\)",
        r"^  concurrency 16: +{n} calls/s \({n} s\)",
        r"^  the same (?P<pairs>\d+) pairs again: (?P=pairs) from the cache, 0 calls, {n} s",  # all from the cache
        r"^full grading, {n} items, tiny model \(transformers, CPU, {n} new tokens\), judge concurrency {n}:",
        r"^  render {n} s, generation {n} s \({n} tokens/output\), judging {n} s; score {n} \((?:length_controlled_)?win_rate\)"),
    "meter": _figures(
        r"^straight to the driver, whole: {n} ms a call \(median of {n}\)",
        r"^through an open meter, streamed: {n} ms a call, overhead {n} ms a call",
        r"^through a run's meter \(key held, token cap\), whole: {n} ms a call, overhead {n} ms a call",
        r"^{n} calls at once under a {n}-token cap: {n} s, {n} answered, {n} refused"),
    "prompt_profiles": _figures(
        r"^GSM8K, first {n} test problems, tiny model on the transformers engine \(CPU\)",
        r"^  reference +prompt +{n} tokens \(max {n}\), generation +{n} ms/item \(batch {n}\), judging +{n} ms/item, "
        r"readings differ on {n} of {n}",
        r"^  zero-shot +prompt +{n} tokens \(max {n}\), generation +{n} ms/item \(batch {n}\), judging +{n} ms/item"),
    "revisions": _figures(
        r"^snapshot of 20 files: first {n} ms, unchanged {n} ms, one file edited {n} ms",
        r"^snapshot of (?!20 files){n} files: first {n} ms, unchanged {n} ms, one file edited {n} ms",
        r"^save -> revision, 1 save/s, n={n}: p50 {n} ms, p95 {n} ms, max {n} ms",
        r"^{n} files created then deleted in code/many/: {n} revision\(s\) on create, {n} on delete; watcher CPU {n} s",
        r"^{n} files created then deleted in output/many/: {n} revision\(s\) on create, {n} on delete; watcher CPU {n} s",
        r"^idle {n} s: watcher CPU {n} s \({n}% of a core\)"),
    "rl_vs_sft": _figures(
        r"^task coin: {n} train games; {n} held-out test-fold games; SFT {n} steps, GRPO {n} steps",
        r"^base model: {n}% of {n} held-out games",
        r"^    episodes_sft.py: expert: {n} games replayed",
        r"^    episodes_grpo.py: rollouts: {n} episodes",
        r"^  seed 0: SFT {n}% \({n} s\), then GRPO {n}% \({n} s\); {n} s of training",
        r"^SFT mean {n}%, GRPO mean {n}%; GRPO - SFT = {n} points, 95% bootstrap interval \[{n}, {n}\]",
        r'^\{"task": "coin", .*"base": {n}, "gain": {n}, "ci95": \[{n}, {n}\]\}$'),
    "sandbox": _figures(  # every mode this machine allows; each passes every program
        r"^(?:full|userns|rlimits) +latency: mean {n} ms, median {n} ms a program \(best of {n}, one at a time\); "
        r"throughput, {n} workers: {n} problems/s, (?P<ok>\d+)/(?P=ok) passed"),
    "transcript": _figures(
        r"^normalize \+ store {n} lines +{n} ms",
        r"^run.db size {n} MB",
        r"^count all steps +{n} ms",
        r"^count tool_call steps +{n} ms",
        r"^page of 100 at offset {n} +{n} ms",
        r"^page of 100 tool_calls at offset {n} +{n} ms",
        r"^search 'seed \d+' \(prefixes\) +{n} ms",
        r"^totals \(tokens, cost, kinds\) +{n} ms",
        r"^{n} steps; search found ([1-9]\d*)$"),  # the searched tool call is found
    "tui": _figures(
        r"^built {n} runs in {n} s",
        r"^built the big run in {n} s",
        r"^Runs, {n} runs: first paint with rows {n} s; all {n} listed {n} s",
        r"^Run, {n} revisions / {n} submissions / {n} GB log: first paint {n} s",
        r"^  Logs tab on the {n} GB agent log: {n} s",
        r"^  Revisions tab with {n} revisions: {n} s",
        r"^  diff of a {n}-line change \(git diff \+ first paint\): {n} s \({n} rows\)",
        r"^  Transcript tab, {n} steps, to its end: {n} s",
        r"^peak memory \(max RSS of this process\): {n} MB"),
    "ui_widgets": _figures(
        r"^diff \({n} rows, unified, cold\): set_diff {n} ms, \+ first screen {n} ms, until painted {n} ms",
        r"^diff \({n} rows, unified\): set_diff {n} ms, \+ first screen {n} ms, until painted {n} ms",
        r"^diff \({n} rows, side by side\): set_diff {n} ms, \+ first screen {n} ms, until painted {n} ms",
        r"^log \({n} GB\): open until painted {n} ms, {n} lines loaded, first loaded line {n} KB from the end, "
        r"last line 'the very last line'",
        r"^log: one older chunk \({n} lines\) loaded in {n} ms",
        r"^peak RSS: {n} MB"),
    "vllm_grading": _figures(
        r"^task gsm8k, {n} items per submission, tiny model, vLLM",  # the real GSM8K, from SHARED_DATA
        r"^baseline \(cold\): worker start {n} s, engine start {n} s, generate {n} s, score {n} s",
        r"^submission 1 \(reload\): submit->scored {n} s = load {n} \+ generate {n} \+ score {n} \+ rest {n}",  # warm engine
        r"^plain vLLM, same prompts, one process: engine start {n} s, generate {n} s \(first call {n} s\)",
        r"^warm submission / plain generation = {n}x"),
}
"""Per script (bench/<name>.py), the lines its quick run must print: each a regular expression
matched against a line of its output, ``{n}`` standing for a figure (a number). A new script
needs its entry here."""

NEVER: dict[str, tuple[str, ...]] = {
    "sandbox": (r"\b(\d+)/(?!\1 )\d+ passed",),  # a canonical solution failed in some mode
}
"""Lines a quick run must not print."""


@dataclass
class Ran:
    """A finished script: its exit status and what it printed."""

    code: int
    stdout: str
    stderr: str

    def tail(self) -> str:
        return f"exit {self.code}\n--- stdout (tail) ---\n{self.stdout[-4000:]}\n--- stderr (tail) ---\n{self.stderr[-4000:]}"


def run_script(name: str, *args: str, tmp: Path, env: dict[str, str] | None = None) -> Ran:
    """``python bench/<name>.py ARGS`` from the repository root, as ``make bench`` runs it, offline, with
    a data cache of its own. On timeout: TERM (the scripts stop their graders and servers on it), then KILL."""
    environ = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONUNBUFFERED": "1",
               "TOKENIZERS_PARALLELISM": "false", "AGENT2RL_DATA": str(tmp / "data-cache"), **(env or {})}
    proc = subprocess.Popen([sys.executable, str(BENCH / f"{name}.py"), *args], cwd=ROOT, env=environ, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        stdout, stderr = stop(proc)
        raise AssertionError(f"bench/{name}.py {' '.join(args)} ran past {TIMEOUT_S} s\n"
                             + Ran(proc.returncode, stdout, stderr).tail()) from None
    return Ran(proc.returncode, stdout, stderr)


def stop(proc: subprocess.Popen) -> tuple[str, str]:
    """TERM first (the scripts close their graders, servers and engines on it), then KILL what is
    left of its process group; what it printed."""
    proc.terminate()
    try:
        printed = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        printed = None
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    return printed or proc.communicate()


def figures_missing(name: str, stdout: str) -> list[str]:
    """The expected lines not printed, or printed with a figure that is not a finite number."""
    missing = []
    for pattern in FIGURES[name]:
        match = re.search(pattern, stdout, re.M)
        if match is None:
            missing.append(pattern)
        elif not all(math.isfinite(float(g.replace(",", ""))) for g in match.groups() if g is not None):
            missing.append(f"{pattern} (a figure is not a number: {match.group(0)!r})")
    return missing


def quick_params() -> list[pytest.param]:
    params = []
    for name in SCRIPTS:
        marks = [pytest.mark.slow] if name in SLOW else []
        if name in CUDA_ONLY_QUICK:
            marks.append(needs_gpu(CUDA_ONLY_QUICK[name]))
        params.append(pytest.param(name, marks=marks, id=name))
    return params


def test_every_script_lists_its_figures() -> None:
    assert SCRIPTS, f"no scripts in {BENCH}"
    assert sorted(FIGURES) == SCRIPTS, ("FIGURES must name the lines every bench/*.py prints: "
                                        f"missing {sorted(set(SCRIPTS) - set(FIGURES))}, "
                                        f"stale {sorted(set(FIGURES) - set(SCRIPTS))}")
    assert set(GPU_ONLY) <= set(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_script_takes_quick_and_says_what_it_does(name: str) -> None:
    """An argparse ``--quick`` option, and a docstring that tells what it does."""
    tree = ast.parse((BENCH / f"{name}.py").read_text(encoding="utf-8"))
    docstring = ast.get_docstring(tree) or ""
    assert "--quick" in docstring, f"bench/{name}.py's docstring does not say what --quick does"
    options = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr == "add_argument" and node.args and isinstance(node.args[0], ast.Constant)
               and node.args[0].value == "--quick"]
    assert options, f"bench/{name}.py has no argparse --quick option"


@pytest.mark.parametrize("name", quick_params())
def test_quick_run_prints_its_figures(name: str, tmp_path: Path) -> None:
    ran = run_script(name, "--quick", tmp=tmp_path)
    assert ran.code == 0, f"bench/{name}.py --quick failed\n{ran.tail()}"
    missing = figures_missing(name, ran.stdout)
    assert not missing, f"bench/{name}.py --quick did not print these figures:\n  " + "\n  ".join(missing) + "\n" + ran.tail()
    for pattern in NEVER.get(name, ()):
        bad = re.search(pattern, ran.stdout, re.M)
        assert bad is None, f"bench/{name}.py --quick printed {bad.group(0)!r}\n{ran.tail()}"


@pytest.mark.parametrize("name", GPU_ONLY)
def test_a_gpu_script_at_full_size_without_a_gpu_says_so_and_exits_0(name: str, tmp_path: Path) -> None:
    """``make bench`` runs every script at full size on any machine: with no CUDA GPU visible (hidden
    here, so this holds on a GPU machine too) a GPU-only script says it needs one, in one line."""
    ran = run_script(name, tmp=tmp_path, env={"CUDA_VISIBLE_DEVICES": ""})
    assert ran.code == 0, ran.tail()
    lines = ran.stdout.splitlines()
    assert len(lines) == 1, ran.tail()
    assert f"bench/{name}.py needs a CUDA GPU and none is visible" in lines[0], ran.tail()
