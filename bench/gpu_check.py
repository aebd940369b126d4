"""GPU check: the project's GPU paths on a real CUDA machine, in one short, self-checking run.

Run from the repo root: ``python3 bench/gpu_check.py`` (``bench/gpu_check.sh`` installs the
carried wheels first and tees the output to ``$OUT/gpu_check.log``). Each step prints one JSON
line of figures (``{"step": ..., "status": "pass" | "fail" | "skip", ...}``); a step that fails
does not stop the others; the last line is ``GPU CHECK: PASS`` or ``GPU CHECK: FAIL (...)``.

Steps:
  env      versions, where the carried packages load from, the imports our GPU paths need,
           a bf16 matmul on CUDA
  nvml     util/gpus.py (Gpus, visible_gpu_count, used_memory, engines.visible_gpus) against
           ``nvidia-smi --query-gpu``
  worker   the eval worker's own ``evaluate`` in this process, transformers engine: the tiny model
           (tasks/tinymodel.py) and a ~95M-parameter Llama with its tokenizer, on GSM8K with the
           reference 4-shot profile (data carried in .whl/data/gsm8k; else arith): device, dtype,
           items/s, results.jsonl and summary.json written
  grader   the real grader subprocess (as tests/system/conftest.py's LiveGrader drives it) scoring the
           baseline through its eval worker, with the vitals sampler running on the run
  agent    the example agent (agents/example) against that grader: SFT then one GRPO step with
           TRL on CUDA, both submitted and scored; which processes held GPU memory (NVML)
  vitals   run/vitals.py's samples in that run's run.db: GPU name, memory, utilisation

Where no CUDA GPU is visible, a plain run says so in one line and exits 0 (``make bench`` runs it
on any machine); ``--allow-cpu`` runs the CUDA steps on the CPU with small sizes (to check this
script's logic anywhere); ``--require-cuda`` runs the steps anyway, a step skipped for want of
CUDA then failing. ``--quick``: the arith task and small sizes (2 items where the CPU runs the
CUDA steps, 8 on CUDA; 2 SFT steps, 1 GRPO step), the same steps, on CUDA where it is visible,
else on the CPU (as ``--allow-cpu``). Exit status: 0 when nothing failed.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "tests"))  # conftest: make_prepared_run, LiveGrader, PINNED_EVAL_SEED

for key, value in {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                   "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
                   "GIT_PYTHON_REFRESH": "quiet",  # `import git` must not fail where no git binary is
                   "OMP_WAIT_POLICY": "PASSIVE",  # torch threads sleep, not spin (the CPU mode, a loaded machine)
                   "PYTHONUNBUFFERED": "1"}.items():
    os.environ.setdefault(key, value)

VERSIONS = ("torch", "transformers", "accelerate", "huggingface_hub", "tokenizers", "safetensors", "trl", "datasets",
            "dill", "multiprocess", "pyarrow", "fsspec", "pandas", "numpy", "peft", "starlette", "uvicorn", "anyio",
            "h11", "uvloop", "GitPython", "gitdb", "smmap", "watchdog", "nvidia-ml-py", "psutil", "jinja2")
IMPORTS = ("torch", "transformers", "trl", "datasets", "git", "starlette", "uvicorn", "watchdog", "pynvml",
           "agent2rl_tui.util.gpus", "agent2rl_tui.run.vitals", "agent2rl_tui.run.lifecycle",
           "agent2rl_tui.run.watcher", "agent2rl_tui.grader.launch", "agent2rl_tui.grader.worker",
           "agent2rl_tui.grader.engines.hf", "agent2rl_tui.grader.engines.keeper",
           "agent2rl_tui.grader.server.routes", "agent2rl_tui.grader.server.__main__", "agent2rl_tui.tasks.data",
           "agent2rl_tui.agents.example.agent", "conftest")


FULL = {"task": "gsm8k", "limit": 32, "limit_larger": 16, "grader_limit": 16, "sft_steps": 4}
QUICK = {"task": "arith", "limit": 8, "limit_larger": 8, "grader_limit": 8, "sft_steps": 2}


class Skip(Exception):
    """The step cannot run here (no CUDA, no GPU); not a failure unless --require-cuda."""


class Check:
    """The steps' shared state, results and printing."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.tmp = Path(tempfile.mkdtemp(prefix="gpu-check-"))
        self.out = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
        self.results: list[dict[str, Any]] = []
        self.cuda = False
        self.cpu_mode = False  # CUDA steps on the CPU (--allow-cpu without CUDA)
        self.task = "arith"
        self.tiny: Path | None = None
        self.run_dir: Path | None = None
        self.grader: Any = None
        self.sampler: Any = None
        self.gpu_procs: GpuProcesses | None = None
        self.logs: list[Path] = []
        self.current = ""
        self.agent_proc: subprocess.Popen | None = None
        self.expired = threading.Event()

    def halt_if_expired(self) -> None:
        """The main thread stops here once the deadline has passed: ``expire`` ends the process."""
        if self.expired.is_set():
            threading.Event().wait()

    def expire(self) -> None:
        """The deadline passed: the step in progress fails, the rest are not run; exit now."""
        self.expired.set()
        row = {"step": self.current, "status": "fail", "why": f"the check's deadline ({self.args.deadline:g} s) passed"}
        self.results.append(row)
        print(json.dumps(row), flush=True)
        try:
            if self.agent_proc is not None and self.agent_proc.poll() is None:
                os.killpg(self.agent_proc.pid, signal.SIGKILL)  # its own session: it would outlive us
            if self.grader is not None:
                self.grader.close()
        finally:
            self.finish()
            if not self.args.keep:
                shutil.rmtree(self.tmp, ignore_errors=True)
            os._exit(1)

    def step(self, name: str, fn: Callable[[dict[str, Any]], None], needs_cuda: bool = False) -> None:
        self.halt_if_expired()
        self.current = name
        figures: dict[str, Any] = {}
        t0 = time.perf_counter()
        try:
            if needs_cuda and not self.cuda and not self.cpu_mode:
                raise Skip("no CUDA (torch.cuda.is_available() is False; --allow-cpu runs it on the CPU)")
            fn(figures)
            status, why = "pass", None
        except Skip as exc:
            status, why = ("fail" if self.args.require_cuda else "skip"), str(exc)
        except Exception as exc:  # noqa: BLE001 - a step's failure is recorded, the next step runs
            status, why = "fail", f"{type(exc).__name__}: {exc}"
            figures["traceback"] = traceback.format_exc()[-3000:]
        row = {"step": name, "status": status, "seconds": round(time.perf_counter() - t0, 2)}
        if why:
            row["why"] = why
        row.update(figures)
        if self.cpu_mode and needs_cuda:
            row["on"] = "cpu (--allow-cpu)"
        self.halt_if_expired()
        self.results.append(row)
        print(json.dumps(row, default=str), flush=True)

    def finish(self) -> int:
        failed = [r["step"] for r in self.results if r["status"] == "fail"]
        skipped = [r["step"] for r in self.results if r["status"] == "skip"]
        if self.out:
            self.out.mkdir(parents=True, exist_ok=True)
            (self.out / "gpu_check.json").write_text(json.dumps(self.results, indent=2, default=str))
            kept = 0
            for log in dict.fromkeys(self.logs):  # $OUT brings back at most 8 files
                if log.is_file() and kept < 5:
                    shutil.copy(log, self.out / log.name)
                    kept += 1
        verdict = "FAIL (failed: " + ", ".join(failed) + ")" if failed else "PASS"
        extra = f"; skipped: {', '.join(skipped)}" if skipped else ""
        print(f"GPU CHECK: {verdict} - {len(self.results) - len(failed) - len(skipped)} passed{extra}", flush=True)
        return 1 if failed else 0


def tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"({exc})"


def version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


# --- env ---------------------------------------------------------------------------------------

def step_env(c: Check, f: dict[str, Any]) -> None:
    f["python"] = sys.version.split()[0]
    f["executable"] = sys.executable
    f["versions"] = {d: version(d) for d in VERSIONS}
    site = os.environ.get("PYTHONPATH", "")
    f["pythonpath"] = site
    bad = {}
    origin = {}
    for name in IMPORTS:
        try:
            mod = importlib.import_module(name)
            origin[name] = str(Path(getattr(mod, "__file__", "") or "?").parent)
        except Exception as exc:  # noqa: BLE001
            bad[name] = f"{type(exc).__name__}: {exc}"[:300]
    f["carried_from"] = {k: v for k, v in origin.items() if k in ("trl", "datasets", "git", "starlette", "uvicorn",
                                                                   "watchdog")}
    f["git_binary"] = shutil.which("git")
    f["nvidia_smi"] = shutil.which("nvidia-smi")
    import torch

    c.cuda = torch.cuda.is_available()
    c.cpu_mode = not c.cuda and c.args.allow_cpu
    f["cuda"] = c.cuda
    f["torch_cuda"] = torch.version.cuda
    f["CUDA_VISIBLE_DEVICES"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    if c.cuda:
        props = torch.cuda.get_device_properties(0)
        f["device"] = {"name": props.name, "capability": f"{props.major}.{props.minor}",
                       "memory_gib": round(props.total_memory / 2**30, 1), "sms": props.multi_processor_count,
                       "bf16": torch.cuda.is_bf16_supported()}
        a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(10):
            a @ a
        torch.cuda.synchronize()
        f["bf16_matmul_tflops"] = round(10 * 2 * 4096**3 / (time.perf_counter() - t) / 1e12, 1)
        del a
        torch.cuda.empty_cache()
    if bad:
        f["import_errors"] = bad
        raise RuntimeError(f"{len(bad)} import(s) failed: {', '.join(bad)}")


# --- nvml --------------------------------------------------------------------------------------

def nvidia_smi() -> list[dict[str, Any]] | None:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    out = subprocess.run([exe, "--query-gpu=index,name,memory.used,memory.total,utilization.gpu",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise RuntimeError(f"nvidia-smi failed ({out.returncode}): {out.stderr.strip()[:300]}")
    rows = []
    for line in out.stdout.strip().splitlines():
        idx, name, used, total, util = [p.strip() for p in line.split(",")]
        rows.append({"index": int(idx), "name": name, "mem_used_mib": int(used), "mem_total_mib": int(total),
                     "util_pct": None if util.startswith("[") else float(util)})
    # Newer drivers count the driver's reserved memory apart from memory.used; NVML's v1 used (total -
    # free, what util/gpus.py reads) includes it. Asked alone: an older nvidia-smi refuses the field.
    reserved = subprocess.run([exe, "--query-gpu=memory.reserved", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=30)
    values = reserved.stdout.strip().splitlines() if reserved.returncode == 0 else []
    for row, value in zip(rows, values):
        row["mem_reserved_mib"] = int(value) if value.strip().isdigit() else None
    return rows


def step_nvml(c: Check, f: dict[str, Any]) -> None:
    from agent2rl_tui.grader.engines import visible_gpus
    from agent2rl_tui.util.gpus import Gpus, used_memory, visible_gpu_count

    gpus = Gpus()
    f["note"], f["reason"] = gpus.note, gpus.reason
    samples = gpus.sample()
    smi = nvidia_smi()
    f["nvml"] = [{"index": s.index, "name": s.name, "mem_used_mib": s.mem_used >> 20, "mem_total_mib": s.mem_total >> 20,
                  "util_pct": s.util_pct} for s in samples]
    f["nvidia_smi"] = smi
    f["count"], f["visible_gpu_count"], f["engines.visible_gpus"] = gpus.count(), visible_gpu_count(), visible_gpus()
    used = used_memory()
    f["used_memory_mib"] = None if used is None else used >> 20
    if not samples and smi is None:
        if c.cuda:
            raise RuntimeError("torch sees CUDA but NVML reads no GPU: " + gpus.reason)
        raise Skip(f"no GPU: NVML says {gpus.note!r} ({gpus.reason}), no nvidia-smi")
    problems = []
    if smi is None:
        problems.append("nvidia-smi not found")
    else:
        if len(smi) != len(samples):
            problems.append(f"count: NVML {len(samples)}, nvidia-smi {len(smi)}")
        for s, r in zip(samples, smi):
            if s.name != r["name"]:
                problems.append(f"GPU {s.index} name: NVML {s.name!r}, nvidia-smi {r['name']!r}")
            if abs((s.mem_total >> 20) - r["mem_total_mib"]) > 1:
                problems.append(f"GPU {s.index} memory.total: NVML {s.mem_total >> 20}, nvidia-smi {r['mem_total_mib']} MiB")
            # Read a moment apart, and nvidia-smi may leave the driver's reserved memory out of memory.used.
            readings = [r["mem_used_mib"], r["mem_used_mib"] + (r.get("mem_reserved_mib") or 0)]
            if min(abs((s.mem_used >> 20) - x) for x in readings) > 256:
                problems.append(f"GPU {s.index} memory.used: NVML {s.mem_used >> 20}, nvidia-smi {r['mem_used_mib']} "
                                f"MiB (+ {r.get('mem_reserved_mib')} reserved)")
    if f["count"] != len(samples) or f["visible_gpu_count"] != len(samples):
        problems.append("Gpus.count / visible_gpu_count disagree with the samples")
    if used is None or abs(used - sum(s.mem_used for s in samples if _visible(s.index))) > 64 << 20:
        problems.append(f"used_memory() {used} is not the visible GPUs' sum")
    if c.cuda:
        import torch

        if visible_gpus() != torch.cuda.device_count():
            problems.append(f"engines.visible_gpus() {visible_gpus()} != torch.cuda.device_count() "
                            f"{torch.cuda.device_count()}")
    if problems:
        raise RuntimeError("; ".join(problems))


def _visible(index: int) -> bool:
    wanted = os.environ.get("CUDA_VISIBLE_DEVICES")
    if wanted and all(d.strip().isdigit() for d in wanted.split(",")):
        return index in {int(d) for d in wanted.split(",")}
    return True


class GpuProcesses(threading.Thread):
    """Polls NVML's compute processes: which command lines held GPU memory, and how much at most."""

    def __init__(self, interval_s: float = 0.5) -> None:
        super().__init__(daemon=True, name="gpu-processes")
        self.interval_s = interval_s
        self.stop_event = threading.Event()
        self.seen: dict[str, int] = {}
        self.error = ""

    def run(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception as exc:  # noqa: BLE001
            self.error = f"{type(exc).__name__}: {exc}"
            return
        while not self.stop_event.is_set():
            for h in handles:
                try:
                    procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
                except Exception as exc:  # noqa: BLE001
                    self.error = f"{type(exc).__name__}: {exc}"
                    continue
                for p in procs:
                    key = _cmd_key(p.pid)
                    self.seen[key] = max(self.seen.get(key, 0), int(p.usedGpuMemory or 0) >> 20)
            self.stop_event.wait(self.interval_s)

    def stop(self) -> dict[str, int]:
        self.stop_event.set()
        self.join(timeout=5)
        return dict(self.seen)


def _cmd_key(pid: int) -> str:
    """A process's command line, short: the module or script it runs."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return f"pid {pid} (gone)"
    if "-m" in args and args.index("-m") + 1 < len(args):
        return "-m " + args[args.index("-m") + 1]
    scripts = [a for a in args[1:] if a.endswith(".py")]
    return scripts[0] if scripts else " ".join(args)[:80]


# --- the eval worker in this process -----------------------------------------------------------

def prepare_data(c: Check) -> None:
    """GSM8K into a data cache of this check's own (AGENT2RL_DATA), where its files are here."""
    os.environ["AGENT2RL_DATA"] = str(c.tmp / "data-cache")
    if c.args.task == "arith":
        return
    for folder in (c.args.gsm8k, ROOT / ".whl" / "data" / "gsm8k", ROOT.parent / "shared" / "data" / "gsm8k"):
        if folder and (Path(folder) / "test.jsonl").is_file() and (Path(folder) / "train.jsonl").is_file():
            from agent2rl_tui.tasks.data import prepare
            from agent2rl_tui.tasks.registry import load_task

            meta = prepare(load_task("gsm8k"), Path(folder))
            c.task = "gsm8k"
            print(f"# GSM8K prepared from {folder}: {meta['train']} train, {meta['eval']} eval rows", flush=True)
            return
    print("# no GSM8K files found (.whl/data/gsm8k or --gsm8k): the built-in arith task is used", flush=True)


def build_models(c: Check, f: dict[str, Any]) -> None:
    from agent2rl_tui.tasks.tinymodel import build_tiny_model

    t = time.perf_counter()
    c.tiny = build_tiny_model(c.tmp / "models" / "tiny-llama")
    f["tiny_build_s"] = round(time.perf_counter() - t, 2)


def build_larger(tiny: Path, out: Path, small: bool) -> tuple[Path, int]:
    """A bigger Llama with the tiny model's tokenizer (so the same prompts fit), random bf16 weights."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    base = LlamaConfig.from_pretrained(str(tiny))
    size = dict(hidden_size=256, intermediate_size=704, num_hidden_layers=4, num_attention_heads=4,
                num_key_value_heads=2) if small else \
        dict(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=8)
    cfg = LlamaConfig(vocab_size=base.vocab_size, max_position_embeddings=base.max_position_embeddings,
                      tie_word_embeddings=True, bos_token_id=base.bos_token_id, eos_token_id=base.eos_token_id,
                      pad_token_id=base.pad_token_id, head_dim=size["hidden_size"] // size["num_attention_heads"],
                      **size)
    torch.manual_seed(1)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    for p in tiny.iterdir():
        if p.is_file() and p.name not in ("config.json", "model.safetensors"):
            shutil.copy(p, out / p.name)
    return out, sum(p.numel() for p in model.parameters())


def evaluate_in_process(c: Check, f: dict[str, Any], model: Path, sub_id: int, limit: int) -> None:
    import torch
    from support.runs import PINNED_EVAL_SEED

    from agent2rl_tui.grader import worker
    from agent2rl_tui.grader.engines.keeper import EngineKeeper
    from agent2rl_tui.record.evaljob import EvalJob
    from agent2rl_tui.tasks import decoding
    from agent2rl_tui.tasks.registry import load_task

    task = load_task(c.task)
    row = decoding.model_row(model)[0] if task.settings_for(None).model_table else None
    out = c.tmp / "in-process" / "evals" / str(sub_id)
    job = EvalJob(submission_id=sub_id, model_path=str(model), task_folder=str(task.folder), out_dir=str(out),
                  limit=limit, engine={"engine": "transformers"}, decoding_row=row, eval_seed=PINNED_EVAL_SEED)
    keeper = EngineKeeper()
    if c.cuda:
        torch.cuda.reset_peak_memory_stats()
    try:
        summary = worker.evaluate(job, keeper, 0.0)
        worker.write_json_atomic(out / "summary.json", summary.to_json())
        engine = keeper.engine
        f["engine"] = summary.engine
        f["device"] = engine.device
        f["dtype"] = str(next(engine.model.parameters()).dtype).removeprefix("torch.")
        f["model_device"] = str(next(engine.model.parameters()).device)
        f["prefill_tokens"] = engine.prefill.prompt_tokens
    finally:
        keeper.close()
    written = (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
    gen = summary.timings["generate"]
    settings = summary.settings.to_json()
    f.update(task=c.task, prompt_profile=settings.get("prompt_profile"), max_new_tokens=settings.get("max_new_tokens"),
             batch_size=settings.get("batch_size"), n_items=summary.n_items, score=summary.score,
             load_s=round(summary.timings["load"], 2), generate_s=round(gen, 2),
             items_per_s=round(summary.n_items / gen, 2) if gen else None,
             results_lines=len(written), summary_json=(out / "summary.json").is_file())
    if c.cuda:
        f["peak_gpu_mem_mib"] = torch.cuda.max_memory_allocated() >> 20
        torch.cuda.empty_cache()
    want = "cuda" if c.cuda else "cpu"
    if f["device"] != want or not f["model_device"].startswith(want):
        raise RuntimeError(f"the engine ran on {f['device']} ({f['model_device']}), not {want}")
    if c.cuda and f["dtype"] != "bfloat16":
        raise RuntimeError(f"dtype on CUDA is {f['dtype']}, not bfloat16")
    if summary.n_items != limit or len(written) != limit:
        raise RuntimeError(f"{summary.n_items} items scored, {len(written)} result lines; {limit} asked for")


def step_worker_tiny(c: Check, f: dict[str, Any]) -> None:
    if c.tiny is None:
        raise RuntimeError("the tiny model was not built")
    evaluate_in_process(c, f, c.tiny, 1, 2 if c.cpu_mode else c.args.limit)


def step_worker_larger(c: Check, f: dict[str, Any]) -> None:
    if c.tiny is None:
        raise RuntimeError("the tiny model was not built")
    t = time.perf_counter()
    model, params = build_larger(c.tiny, c.tmp / "models" / "llama-larger", small=c.cpu_mode)
    f["params_m"] = round(params / 1e6, 1)
    f["build_s"] = round(time.perf_counter() - t, 2)
    evaluate_in_process(c, f, model, 2, 2 if c.cpu_mode else c.args.limit_larger)


# --- the real grader, the example agent, vitals ------------------------------------------------

def step_grader(c: Check, f: dict[str, Any]) -> None:
    from support.runs import LiveGrader, make_prepared_run

    from agent2rl_tui.run.vitals import VitalsSampler

    if c.tiny is None:
        raise RuntimeError("the tiny model was not built")
    limit = 2 if c.cpu_mode else c.args.grader_limit
    c.run_dir = make_prepared_run(c.tmp / "runs", c.tiny, task=c.task, eval_limit=limit, budget_s=1800)
    c.logs.append(c.run_dir / "logs" / "grader.log")
    c.sampler = VitalsSampler(c.run_dir, interval_s=1.0)
    c.sampler.start()
    c.gpu_procs = GpuProcesses()
    c.gpu_procs.start()
    t = time.perf_counter()
    try:
        c.grader = LiveGrader(c.run_dir)
    except Exception:
        print("# grader.log:\n" + tail(c.run_dir / "logs" / "grader.log", 40), flush=True)
        raise
    f["grader_ready_s"] = round(time.perf_counter() - t, 2)
    baseline = c.grader.health.get("baseline") or {}
    summary = json.loads((c.run_dir / "evals" / "0" / "summary.json").read_text())
    lines = (c.run_dir / "evals" / "0" / "results.jsonl").read_text().splitlines()
    timings = summary.get("timings", {})
    device = ((summary.get("settings") or {}).get("engine_settings") or {}).get("device")
    f.update(task=c.task, baseline_status=baseline.get("status"), baseline_score=baseline.get("score"),
             engine=summary.get("engine"), engine_choice=(summary.get("settings") or {}).get("engine_choice"),
             device=device, n_items=summary.get("n_items"), results_lines=len(lines),
             timings={k: round(v, 2) for k, v in timings.items() if isinstance(v, int | float)},
             items_per_s=round(summary["n_items"] / timings["generate"], 2) if timings.get("generate") else None)
    want = "cuda" if c.cuda else "cpu"
    if baseline.get("status") != "scored" or summary.get("n_items") != limit or len(lines) != limit:
        raise RuntimeError(f"baseline {baseline.get('status')}, {summary.get('n_items')} items, {len(lines)} lines")
    if device != want:
        raise RuntimeError(f"the grader's eval worker ran on {device}, not {want}")


def step_agent(c: Check, f: dict[str, Any]) -> None:
    if c.grader is None or c.run_dir is None:
        raise RuntimeError("needs the grader step's live grader")
    from agent2rl_tui.record.store import RunStore

    with RunStore.of_run(c.run_dir) as store:
        run = store.run()  # a RunRecord, or a sqlite3.Row in older trees
        base_model = getattr(run, "base_model", None) or run["base_model"]
    ws = c.run_dir / "workspace"
    log = c.tmp / "agent.log"
    c.logs.append(log)
    env = {**os.environ, "TASK": c.task, "BASE_MODEL": base_model, "WORKSPACE": str(ws),
           "MODEL_PATH": str(ws / "models" / base_model), "DATA_PATH": str(ws / "data"),
           "OUTPUT_DIR": str(ws / "output"), "GRADING_SERVER_URL": c.grader.url, "PYTHONUNBUFFERED": "1",
           "EXAMPLE_SFT_STEPS": str(2 if c.cpu_mode else c.args.sft_steps),
           "EXAMPLE_GRPO_STEPS": str(c.args.grpo_steps), "EXAMPLE_MAX_COMPLETION": "24"}
    t = time.perf_counter()
    with log.open("w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "agent2rl_tui.agents.example"], cwd=ws, env=env, stdout=fh,
                                stderr=subprocess.STDOUT, start_new_session=True)
        c.agent_proc = proc
        if c.sampler is not None:
            c.sampler.agent_pgid = proc.pid
        try:
            code = proc.wait(timeout=c.args.agent_timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = "timeout"
    f["agent_s"] = round(time.perf_counter() - t, 2)
    f["agent_exit"] = code
    subs = c.grader.client.submissions()
    agent_subs = [s for s in subs if s.get("kind") == "agent"]
    f["submissions"] = [{k: s.get(k) for k in ("submission_id", "kind", "status", "score", "n_items", "error")}
                        for s in subs]
    devices = []
    for s in agent_subs:
        path = c.run_dir / "evals" / str(s.get("submission_id")) / "summary.json"
        summary = json.loads(path.read_text()) if path.is_file() else {}
        devices.append(((summary.get("settings") or {}).get("engine_settings") or {}).get("device"))
    f["agent_submission_devices"] = devices
    if c.gpu_procs is not None:  # NVML's view: the training scripts and the eval worker held GPU memory
        f["gpu_mib_by_process"] = {k: v for k, v in dict(c.gpu_procs.seen).items()
                                   if "sft.py" in k or "grpo.py" in k or "worker" in k}
    text = log.read_text(errors="replace")
    f["trainer_lines"] = [ln for ln in text.splitlines() if "'loss'" in ln or "train_runtime" in ln][:6]
    want_subs = 1 + (c.args.grpo_steps > 0)
    want = "cuda" if c.cuda else "cpu"
    if code != 0 or len(agent_subs) != want_subs or any(s.get("status") != "scored" for s in agent_subs) \
            or any(d != want for d in devices):
        print("# agent.log (tail):\n" + tail(log, 40), flush=True)
        raise RuntimeError(f"agent exit {code}; {len(agent_subs)} agent submission(s) of {want_subs}: "
                           f"{[s.get('status') for s in agent_subs]}, devices {devices}")


def stop_watchers(c: Check, f: dict[str, Any]) -> None:
    if c.gpu_procs is not None:
        seen = c.gpu_procs.stop()
        f["gpu_processes_mib"] = seen
        if c.gpu_procs.error:
            f["gpu_processes_error"] = c.gpu_procs.error
        c.gpu_procs = None
    if c.sampler is not None:
        c.sampler.stop()


def step_vitals(c: Check, f: dict[str, Any]) -> None:
    from agent2rl_tui.record.store import RunStore
    from agent2rl_tui.run.vitals import VitalsSampler

    stop_watchers(c, f)
    if c.run_dir is None:  # the grader step failed before its run existed: a run of our own
        from support.runs import make_prepared_run

        if c.tiny is None:
            raise RuntimeError("the tiny model was not built")
        c.run_dir = make_prepared_run(c.tmp / "vitals-runs", c.tiny)
    holding = None
    if c.cuda:  # one sample while this process holds GPU memory of its own
        import torch

        holding = torch.empty(1 << 28, dtype=torch.uint8, device="cuda")  # 256 MiB
    sampler = VitalsSampler(c.run_dir)
    with RunStore.of_run(c.run_dir) as store:
        sampler.record(store, sampler.take())
    del holding
    conn = sqlite3.connect(c.run_dir / "run.db")
    try:
        rows = conn.execute("SELECT at, cpu_pct, mem_used, agent_procs, gpus_json, gpu_note FROM samples ORDER BY at").fetchall()
        events = conn.execute("SELECT kind, message FROM events WHERE source = 'vitals'").fetchall() \
            if _has_columns(conn, "events", ("kind", "message", "source")) else []
    finally:
        conn.close()
    gpus = [json.loads(r[4]) for r in rows]
    with_gpu = [g for g in gpus if g]
    f["samples"] = len(rows)
    f["samples_with_gpu"] = len(with_gpu)
    f["gpu_note"] = rows[-1][5] if rows else None
    f["agent_procs_max"] = max((r[3] or 0 for r in rows), default=0)
    f["vitals_events"] = [list(e) for e in events][:5]
    if with_gpu:
        first = with_gpu[-1][0]
        f["gpu"] = {"name": first.get("name"), "mem_total_mib": first.get("mem_total", 0) >> 20}
        f["gpu_mem_used_mib_max"] = max(g[0].get("mem_used", 0) for g in with_gpu) >> 20
        f["gpu_mem_used_mib_last"] = with_gpu[-1][0].get("mem_used", 0) >> 20
        f["gpu_util_pct_max"] = max(g[0].get("util_pct", 0.0) for g in with_gpu)
    if not rows:
        raise RuntimeError("no samples in run.db")
    if not with_gpu:
        if c.cuda:
            raise RuntimeError(f"samples hold no GPU reading (gpu_note {f['gpu_note']!r})")
        raise Skip(f"no GPU: {len(rows)} sample(s) written, gpu_note {f['gpu_note']!r}")
    if c.cuda and f["gpu_mem_used_mib_last"] < 256:
        raise RuntimeError("the last sample reads under 256 MiB used while this process held 256 MiB")


def _has_columns(conn: sqlite3.Connection, table: str, cols: tuple[str, ...]) -> bool:
    have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
    return set(cols) <= have


def parse_args() -> argparse.Namespace:
    """The options; sizes left unset take the full check's defaults, or --quick's."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--allow-cpu", action="store_true", help="run the CUDA steps on the CPU, small")
    parser.add_argument("--require-cuda", action="store_true", help="a step skipped for want of CUDA fails")
    parser.add_argument("--quick", action="store_true",
                        help="arith, small sizes: the same steps, on the CPU where no CUDA GPU is visible")
    parser.add_argument("--gsm8k", type=Path, help="a folder with GSM8K's train.jsonl and test.jsonl")
    parser.add_argument("--task", choices=("gsm8k", "arith"),
                        help="gsm8k where its files are found (else arith), or arith (8 new tokens: quick on a CPU); "
                             "default gsm8k, --quick arith")
    parser.add_argument("--limit", type=int, help=f"items for the tiny model in process (default {FULL['limit']})")
    parser.add_argument("--limit-larger", type=int, help=f"items for the larger model (default {FULL['limit_larger']})")
    parser.add_argument("--grader-limit", type=int, help=f"the grader run's eval_limit (default {FULL['grader_limit']})")
    parser.add_argument("--sft-steps", type=int, help=f"default {FULL['sft_steps']}")
    parser.add_argument("--grpo-steps", type=int, default=1)
    parser.add_argument("--agent-timeout", type=float, default=180)
    parser.add_argument("--deadline", type=float, default=330,
                        help="seconds for the whole check: then it says FAIL for what is left, and exits")
    parser.add_argument("--keep", action="store_true", help="keep the temp folder")
    parser.add_argument("--only", default="", help="comma-separated steps to run (default: all)")
    args = parser.parse_args()
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def cuda_visible() -> bool:
    """A CUDA GPU this process may use (CUDA_VISIBLE_DEVICES honoured), as the env step finds it."""
    import torch

    return torch.cuda.is_available()


def main() -> int:
    args = parse_args()
    if not (args.allow_cpu or args.require_cuda) and not cuda_visible():
        if not args.quick:
            print("bench/gpu_check.py needs a CUDA GPU and none is visible: nothing checked "
                  "(--quick or --allow-cpu runs its steps on the CPU, small)")
            return 0
        args.allow_cpu = True  # quick, without CUDA: the CUDA steps on the CPU
    c = Check(args)
    only = set(filter(None, args.only.split(",")))
    steps: list[tuple[str, Callable[[Check, dict[str, Any]], None], bool]] = [
        ("env", step_env, False), ("nvml", step_nvml, False),
        ("build_tiny", lambda c, f: (prepare_data(c), build_models(c, f), f.update(task=c.task)), False),
        ("worker_tiny", step_worker_tiny, True), ("worker_larger", step_worker_larger, True),
        ("grader", step_grader, True), ("agent", step_agent, True), ("vitals", step_vitals, False)]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a TERM still stops the grader and the agent
    print(f"# gpu_check: temp folder {c.tmp}", flush=True)
    timer = threading.Timer(args.deadline, c.expire)
    timer.daemon = True
    timer.start()
    try:
        for name, fn, needs_cuda in steps:
            if only and name not in only and name not in ("env", "build_tiny"):
                continue
            c.step(name, lambda f, fn=fn: fn(c, f), needs_cuda)
    finally:
        timer.cancel()
        c.halt_if_expired()
        stop_watchers(c, {})
        if c.agent_proc is not None and c.agent_proc.poll() is None:  # stopped mid-step: its own session
            os.killpg(c.agent_proc.pid, signal.SIGKILL)
        if c.grader is not None:
            c.grader.close()
        if c.run_dir is not None:
            c.logs.append(c.run_dir / "logs" / "grader.log")
            c.logs.extend(sorted((c.run_dir / "logs" / "workers").glob("worker-*.log"))[:2])
        code = c.finish()
        if not args.keep:
            shutil.rmtree(c.tmp, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
