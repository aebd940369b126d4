#!/usr/bin/env bash
# The GPU check on the lent device machine (its image: python3 3.12 with torch, transformers, ...;
# no network). From the repo root, with .whl carried:  bash bench/gpu_check.sh [gpu_check.py options, e.g. --quick]
#
# .whl/ (ignored by git, carried by the device tool) holds what the image lacks: trl, datasets,
# dill, multiprocess, GitPython, gitdb, smmap, starlette, uvicorn, watchdog as wheels, and
# .whl/data/gsm8k/ (GSM8K's test split and 300 train rows) for the GSM8K steps. Everything
# printed goes to $OUT/gpu_check.log too; bench/gpu_check.py writes $OUT/gpu_check.json and, on
# the way out, the grader's, a worker's and the agent's logs.
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "GPU CHECK: FAIL (the carried wheels did not install)"; exit 1; }
export PYTHONPATH="/tmp/site:$PWD" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/gpu-check-out}"
mkdir -p "$OUT"
{
    nvidia-smi --query-gpu=index,name,driver_version,memory.used,memory.total --format=csv 2>&1
    python3 bench/gpu_check.py --require-cuda "$@" 2>&1
} | tee "$OUT/gpu_check.log"
