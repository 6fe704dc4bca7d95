"""CUDA backend of reference.transformer_xl: within fast_bound of the golden scores and close to the
CPU kernel, the backward within vjp_bound of golden and close to the CPU kernels, under the
simulator (CI) and on a real GPU where there is one; kernels compile to PTX."""

import textwrap

import pytest
from cuda_support import TARGETS, ptx_report, run_script, target_env

_SCRIPT = textwrap.dedent(
    """
    import json
    import numpy as np
    from numba import config
    from reference import transformer_xl as xl
    rng = np.random.default_rng(2)
    ok = []
    for qlen, mlen, clamp in ((2, 0, 0), (2, 3, 0), (3, 2, 1)):
        args = (rng.uniform(-2, 2, (qlen, 2, 4)), rng.uniform(-2, 2, (qlen + mlen, 2, 4)),
                rng.uniform(-1, 1, (2, 4)), rng.uniform(-1, 1, (2, 4)), rng.uniform(-0.5, 0.5, (8, 8)))
        kw = dict(mlen=mlen, d_model=8, clamp_len=clamp)
        gpu, cpu = xl.score(*args, backend="cuda", **kw), xl.score(*args, backend="cpu", **kw)
        golden, bound = xl.score(*args, mode="golden", **kw), xl.fast_bound(*args, **kw)
        ok.append(bool(np.all(np.abs(gpu - golden) <= bound) and np.all(np.abs(gpu - cpu) <= 2 * bound)))
    print(json.dumps({"simulated": bool(config.ENABLE_CUDASIM), "ok": ok}))
    """
)


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_scores_within_the_fast_bound(target):
    res = run_script(_SCRIPT, target_env(target))
    assert res["simulated"] == (target == "simulator") and all(res["ok"]) and len(res["ok"]) == 3, res


_VJP_SCRIPT = textwrap.dedent(
    """
    import json
    import numpy as np
    from numba import config
    from reference import transformer_xl as xl
    from reference.transformer_xl import backward
    rng = np.random.default_rng(3)
    ok, rel = [], 0.0
    for qlen, mlen, clamp, masked in ((2, 0, 0, False), (2, 3, 0, True), (3, 2, 1, False)):
        args = (rng.uniform(-2, 2, (qlen, 2, 2)), rng.uniform(-2, 2, (qlen + mlen, 2, 2)),
                rng.uniform(-1, 1, (2, 2)), rng.uniform(-1, 1, (2, 2)), rng.uniform(-0.5, 0.5, (4, 4)))
        G = rng.uniform(-2, 2, (2, qlen, qlen + mlen))
        if masked:
            G[:, xl.distances(qlen, mlen) < 0] = 0.0
        kw = dict(mlen=mlen, d_model=4, clamp_len=clamp)
        gpu, cpu = backward.score_vjp(G, *args, backend="cuda", **kw), backward.score_vjp(G, *args, backend="cpu", **kw)
        golden, bound = backward.score_vjp(G, *args, mode="golden", **kw), backward.vjp_bound(G, *args, **kw)
        scale = max(float(np.max(np.abs(cpu[r]))) for r in backward.ROLES)
        rel = max([rel] + [float(np.max(np.abs(gpu[r] - cpu[r]))) / scale for r in backward.ROLES])
        ok.append(all(gpu[r].shape == cpu[r].shape and np.all(np.abs(gpu[r] - golden[r]) <= bound[r])
                      and np.all(np.abs(gpu[r] - cpu[r]) <= 2 * bound[r]) for r in backward.ROLES))
    print(json.dumps({"simulated": bool(config.ENABLE_CUDASIM), "ok": ok, "rel": rel}))
    """
)


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_vjp_within_the_vjp_bound(target):
    """The backward kernels: within vjp_bound of golden (mlen 0 and > 0, clamp_len, G zero on the
    masked keys), within twice the bound of the cpu kernels and within 32 u of them relative to the
    largest gradient value (both sum in the same order; the GPU contracts into fma, and the
    simulator's R may differ from the cpu table's in the last bit)."""
    res = run_script(_VJP_SCRIPT, target_env(target))
    assert res["simulated"] == (target == "simulator") and all(res["ok"]) and len(res["ok"]) == 3, res
    assert res["rel"] <= 32 * 2.0**-53, res


def test_kernels_compile_to_ptx():
    """Every kernel in PTX_SIGNATURES compiles for sm_80 and sm_90: float64 fma or products, no
    approximate division or square root (fastmath would give them), no atomics (the backward is
    deterministic), and the scores divide and take the root correctly rounded."""
    kernels = ptx_report("reference.transformer_xl.cuda_kernels")
    names = ["project_kernel", "score_kernel", "query_grad_kernel", "key_grad_kernel", "bias_grad_kernel",
             "distance_sums_kernel"]
    assert [k["kernel"] for k in kernels] == names * 2, kernels
    for k in kernels:
        assert (k["fma"] or k["mul_rn"]) and not k["approx"] and not k["atomic"], k
        assert k["kernel"] != "score_kernel" or (k["div_rn"] and k["sqrt_rn"]), k
