#!/usr/bin/env bash
# The GPU checks of issue 28, as run on a lent GPU (docs/performance.md, "On a GPU"): the machine
# and its packages, the numba.cuda tests on the device (-m gpu), posref bench with the cuda backend,
# and conformance runs with --device cuda. Wheels the machine lacks can be carried in .gpu/ (no
# network there). Writes everything under $OUT.
set -u
OUT=${OUT:-/tmp/posref-gpu}
mkdir -p "$OUT"
step() { local name=$1 limit=$2; shift 2; echo "\$ $*" > "$OUT/$name.txt"; timeout "$limit" "$@" >> "$OUT/$name.txt" 2>&1; echo "rc $?" >> "$OUT/$name.txt"; }
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
  python3 -m pip list 2>/dev/null | grep -i -E "^(numba|llvmlite|numpy|mpmath|triton|liger|flash|transformers|jsonschema|pytest|hypothesis)"
} > "$OUT/env.txt" 2>&1
if ls .gpu/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-deps --no-index .gpu/*.whl >> "$OUT/env.txt" 2>&1
  python3 -c "import numpy, jsonschema; print('now numpy', numpy.__version__)" >> "$OUT/env.txt" 2>&1
fi
export PYTHONPATH=$PWD

step gpu_tests 240 python3 -m pytest -q -p no:randomly -m gpu tests
step bench 150 python3 -m conformance.cli bench --skip-slow --backends cpu,cuda --repeat 5 --json "$OUT/bench.json"
step conform 120 bash -c 'for run in "examples/rope/hf_rotate_half.py:apply rope.apply" "examples/attention/sdpa_rope.py:forward attention.forward" "examples/mrope/qwen_vl.py:apply mrope.apply"; do set -- $run; python3 -m conformance.cli conform "$1" --protocol "$2" --device cuda --dtype float32 --dtype bfloat16 -q --seed 1; echo "exit $?"; done'
