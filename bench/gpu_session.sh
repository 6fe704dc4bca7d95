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

STEPS=${STEPS:-"gpu_tests bench conform"}
case " $STEPS " in *" gpu_tests "*) step gpu_tests 240 python3 -m pytest -q -p no:randomly -m gpu tests;; esac
case " $STEPS " in *" bench "*) step bench 150 python3 -m conformance.cli bench --skip-slow --backends cpu,cuda --repeat 5 --json "$OUT/bench.json";; esac
# Each correct example on the GPU (--device cuda), float32 and bfloat16; Liger's kernels compiled
# for the GPU, not interpreted (docs/performance.md compares the two).
RUNS=(
  "examples/rope/hf_rotate_half.py:apply rope.apply"
  "examples/attention/sdpa_rope.py:forward attention.forward"
  "examples/mrope/qwen_vl.py:apply mrope.apply"
  "examples/rope/kv_write.py:kv_write rope.kv_write"
  "examples/rope/fp8_quantize.py:apply_qk_fp8 rope.apply_qk_fp8"
  "examples/rope/qk_norm_torch.py:qk_norm rope.qk_norm"
  "examples/attention/mla_torch.py:mla attention.mla"
  "examples/mrope/decode_session.py:decode mrope.decode"
  "examples/attention/decode_sdpa.py:decode attention.decode"
  "examples/rope/lib_liger.py:apply_qk rope.apply_qk --grad"
  "examples/mrope/lib_liger.py:apply mrope.apply"
)
case " $STEPS " in *" conform "*)
  : > "$OUT/conform.txt"
  for run in "${RUNS[@]}"; do
    set -- $run
    [ -f "${1%%:*}" ] || continue
    target=$1 protocol=$2; shift 2
    echo "== $target $protocol $*" >> "$OUT/conform.txt"
    args=("$target" --protocol "$protocol" "$@" --device cuda --dtype float32 --dtype bfloat16 --seed 1)
    start=$SECONDS
    timeout 300 python3 -m conformance.cli conform "${args[@]}" -q >> "$OUT/conform.txt" 2>&1
    rc=$?
    echo "exit $rc, $((SECONDS - start)) s" >> "$OUT/conform.txt"
    if [ $rc -ne 0 ]; then  # the causes, for a failing run
      timeout 300 python3 -m conformance.cli conform "${args[@]}" 2>&1 | head -40 >> "$OUT/conform.txt"
    fi
  done;;
esac
