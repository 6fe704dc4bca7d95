"""CUDA backend of reference.fire: within the fast bound's scale of the CPU backend, golden
identical; the backward within vjp_bound of golden and close to the CPU kernel; under the
simulator (CI) and on a real GPU where there is one; every kernel compiles to PTX."""

import textwrap

import pytest
from cuda_support import TARGETS, assert_cuda_matches_cpu, ptx_report, run_script, target_env

_SETUP = """
from reference import fire
rng = np.random.default_rng(2)
w = {"c": 0.1, "L_multiplier": 2.0 ** -7, "W1": rng.uniform(-1, 1, (4, 1)), "b1": rng.uniform(-1, 1, 4),
     "W2": rng.uniform(-0.2, 0.2, (2, 4)), "b2": rng.uniform(-0.2, 0.2, 2)}
qp, kp = np.array([0, 3, 4095]), np.array([0, 2, 4095])
def call(backend, mode="fast"):
    return fire.bias(qp, kp, w, backend=backend, mode=mode)
"""


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_bias_matches_cpu(target):
    assert_cuda_matches_cpu(target, _SETUP, tolerance=32 * 2.0**-53)


_VJP_SCRIPT = textwrap.dedent(
    """
    import json
    import numpy as np
    from numba import config
    from reference.fire import backward
    rng = np.random.default_rng(3)
    w = {"c": 0.3, "L_multiplier": 2.0, "W1": rng.uniform(-1, 1, (3, 1)), "b1": rng.uniform(-1, 1, 3),
         "W2": rng.uniform(-0.5, 0.5, (2, 3)), "b2": rng.uniform(-0.5, 0.5, 2)}
    w["b1"][0] = 0.0  # unit 0's pre-activation is exactly 0 where x = 0 (i = j, or c = 0)
    qp, kp = np.array([0, 2, 4]), np.array([0, 2, 3])  # L = 2: query 2 is a tie
    ok, rel, zero = [], 0.0, []
    for changes in ({}, {"c": -0.3, "L_multiplier": -2.0}, {"c": 0.0, "L_multiplier": 0.0}):
        ww = w | changes
        G = rng.uniform(-2, 2, (2, 3, 3))
        gpu = backward.bias_vjp(G, qp, kp, ww, init_L=1.0, backend="cuda")
        cpu = backward.bias_vjp(G, qp, kp, ww, init_L=1.0, backend="cpu")
        golden = backward.bias_vjp(G, qp, kp, ww, init_L=1.0, mode="golden")
        bound = backward.vjp_bound(G, qp, kp, ww, init_L=1.0)
        scale = max(float(np.max(np.abs(cpu[r]))) for r in backward.ROLES)
        rel = max([rel] + [float(np.max(np.abs(gpu[r] - cpu[r]))) / scale for r in backward.ROLES])
        ok.append(all(np.shape(gpu[r]) == np.shape(golden[r]) and np.all(np.abs(gpu[r] - golden[r]) <= bound[r])
                      and np.all(np.abs(gpu[r] - cpu[r]) <= 2 * bound[r]) for r in backward.ROLES))
    zero.append(bool(gpu["c"] == 0 and gpu["L_multiplier"] == 0))  # sign(0) = 0
    empty = backward.bias_vjp(np.zeros((2, 0, 3)), np.array([], dtype=np.int64), kp, w, backend="cuda")
    zero.append(all(np.shape(empty[r]) == np.shape(w[r]) and not np.any(empty[r]) for r in backward.ROLES))
    print(json.dumps({"simulated": bool(config.ENABLE_CUDASIM), "ok": ok, "rel": rel, "zero": zero}))
    """
)


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_vjp_within_the_vjp_bound(target):
    """The backward kernels on the kinks (a tie i = L, pre-activations exactly 0, c = L_multiplier =
    0 with sign(0) = 0, negative c and L_multiplier) and with no query: within vjp_bound of golden,
    within twice the bound of the cpu kernel and within 32 u of it relative to the largest gradient
    value (the same order of sums; the GPU contracts into fma)."""
    res = run_script(_VJP_SCRIPT, target_env(target))
    assert res["simulated"] == (target == "simulator") and all(res["ok"]) and len(res["ok"]) == 3, res
    assert res["rel"] <= 32 * 2.0**-53 and res["zero"] == [True, True], res


def test_kernels_compile_to_ptx():
    """Every kernel in PTX_SIGNATURES compiles for sm_80 and sm_90 with float64 fma, no atomics
    (the backward is deterministic), and correctly rounded division where the features divide."""
    kernels = ptx_report("reference.numerics.bias.fire_cuda_kernels")
    assert [k["kernel"] for k in kernels] == ["bias_kernel", "entry_kernel", "param_kernel"] * 2, kernels
    for k in kernels:
        assert k["fma"] and not k["atomic"] and (k["kernel"] == "param_kernel" or k["div_rn"]), k
