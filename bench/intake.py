"""Benchmark: what taking a submission costs (the grader's copy at acceptance, grader/server/intake.py).

Copies a model folder with a 1 GiB safetensors file the way ``/submit`` does before it answers
(regular files only, no links followed, size-capped, checked unchanged) and prints ms per GiB,
beside a plain ``shutil.copyfile`` of the same file and the per-tensor weights hash the eval
worker computes over the copy. The whole submit-to-scored path with the copy is measured by
``bench/grader_overhead.py`` (run it on this tree and on an older one to compare).

Run: ``python bench/intake.py [GiB] [--quick]`` (default 1 GiB; ``--quick``: a 16 MiB file, the same
steps in about a second). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from agent2rl_tui.grader.server.intake import take
from agent2rl_tui.tasks.modelfiles import weights_hash

GIB = 1 << 30
QUICK_GIB = 1 / 64


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gib", nargs="?", type=float, help="size of the safetensors file in GiB (default 1)")
    parser.add_argument("--quick", action="store_true", help="a 16 MiB file: the same steps in about a second")
    return parser.parse_args()


def model_folder(folder: Path, size: int) -> Path:
    """config.json, a tokenizer file and one safetensors file of ``size`` bytes of random data."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}))
    (folder / "tokenizer.json").write_text(json.dumps({"model": {"vocab": {}}}))
    n = size // 4
    header = json.dumps({"w": {"dtype": "F32", "shape": [n], "data_offsets": [0, n * 4]}}).encode()
    with (folder / "model.safetensors").open("wb") as fh:
        fh.write(struct.pack("<Q", len(header)) + header)
        block = os.urandom(1 << 24)
        left = n * 4
        while left:
            fh.write(block[: min(left, len(block))])
            left -= min(left, len(block))
    return folder


def timed(fn: Callable[[], object], runs: int = 5) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def show(label: str, seconds: list[float], gib: float) -> None:
    per = [s / gib * 1000 for s in seconds]
    print(f"{label:34} {statistics.median(per):7.0f} ms/GiB (min {min(per):.0f}, max {max(per):.0f}, n={len(per)})")


def main() -> None:
    args = parse_args()
    gib = args.gib or (QUICK_GIB if args.quick else 1.0)
    tmp = Path(tempfile.mkdtemp(prefix="bench-intake-"))
    try:
        src = model_folder(tmp / "ws" / "model", int(gib * GIB))
        os.sync()
        counter = iter(range(1000))

        def intake() -> None:
            dest = tmp / "intake" / str(next(counter))
            take(src, src.parent, dest, max_bytes=4 * GIB, base=None)
            shutil.rmtree(dest)

        def plain() -> None:
            shutil.copyfile(src / "model.safetensors", tmp / "plain.safetensors")
            (tmp / "plain.safetensors").unlink()

        print(f"a {gib:g} GiB safetensors file, in the page cache, on {tmp}")
        show("plain copy (shutil.copyfile)", timed(plain), gib)
        show("intake (copy + checks)", timed(intake), gib)
        show("weights hash (eval worker)", timed(lambda: weights_hash(src, ["model.safetensors"]), runs=3), gib)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
