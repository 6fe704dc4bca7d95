"""CUDA backend of reference.gaussian_rope: apply (RoPE's phase kernels) and the score form's backward
(RoPE's rotations around cuda_kernels.weighted_sum_kernel). Fast outputs agree with the CPU
backend's, golden ones are identical, under the simulator (CI) and on a real GPU where there is
one; every kernel of cuda_kernels.PTX_SIGNATURES compiles to PTX for sm_80 and sm_90.

All run in subprocesses: NUMBA_ENABLE_CUDASIM is read when numba.cuda is first imported."""

import textwrap

import pytest
from cuda_support import TARGETS, assert_cuda_matches_cpu, assert_refused_without_gpu, ptx_report, run_script, target_env

SETUP = textwrap.dedent(
    """
    from reference import gaussian_rope as G
    x = np.random.default_rng(0).standard_normal((1, 3, 1, 8))
    pos = np.array([[0, 20, 765]])
    def call(**kw):
        return G.apply(x, pos, kernel=G.DOCUMENT_KERNEL, **kw)
    """
)


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_matches_cpu(target):
    assert_cuda_matches_cpu(target, SETUP)


_SCORE_VJP_SCRIPT = textwrap.dedent(
    """
    import json
    import numpy as np
    from numba import config
    from reference.gaussian_rope import DOCUMENT_KERNEL as KERNEL, backward

    U = 2.0**-53
    rng = np.random.default_rng(12)
    q, k = rng.standard_normal((1, 3, 2, 6)), rng.standard_normal((1, 4, 2, 6))
    # ties (5, 5), causal zeros in G, and a visible key so far back that K(n - m) = 0
    qp, kp = np.array([[2, 5, 5]]), np.array([[0, 2, 5, -900]])
    G = rng.standard_normal((1, 2, 3, 4)) * (kp[:, None, None, :] <= qp[:, None, :, None])
    out = []
    for r, layout, sq, sk in ((4, "half", 3, 4), (6, "interleaved", 2, 3), (4, "half", 0, 4)):
        args = (G[:, :, :sq, :sk], q[:, :sq], k[:, :sk], qp[:, :sq], kp[:, :sk])
        kw = dict(kernel=KERNEL, rotary_dim=r, layout=layout)
        got = {be: backward.score_vjp(*args, backend=be, **kw) for be in ("cuda", "cpu", "numpy")}
        golden = backward.score_vjp(*args, mode="golden", **kw)
        bounds = backward.score_vjp_bound(*args, kernel=KERNEL)  # fast mode's, on any backend
        largest = max(float(np.max(np.abs(a), initial=0.0)) for a in got["cpu"])

        def within(ref, times):
            return all(bool(np.all(np.abs(f - e) <= times * b)) for f, e, b in zip(got["cuda"], ref, bounds))

        out.append({
            "shapes": [list(a.shape) == list(b.shape) for a, b in zip(got["cuda"], args[1:3])],
            "golden": within(golden, 1), "cpu": within(got["cpu"], 2), "numpy": within(got["numpy"], 2),
            "rel_cpu": max(float(np.max(np.abs(f - c), initial=0.0)) for f, c in zip(got["cuda"], got["cpu"]))
                       / max(largest, 1e-300),
            "far_key_zero": bool(sk < 4 or np.all(got["cuda"][1][0, 3] == 0.0)),
            "golden_same": all(a.tobytes() == b.tobytes() for a, b in
                               zip(backward.score_vjp(*args, mode="golden", backend="cuda", **kw), golden)),
        })
    # the reduction alone, on terms spanning 2^-30..2^30 (the order of the sum shows in the bits)
    from reference.gaussian_rope import cpu_kernels, cuda_kernels
    w = rng.standard_normal((1, 2, 3, 5)) * np.exp2(rng.integers(-30, 30, (1, 2, 3, 5)))
    qr, kr = rng.standard_normal((1, 3, 2, 4)), rng.standard_normal((1, 5, 2, 4))
    dev, host = cuda_kernels.weighted_sums(w, qr, kr), cpu_kernels.weighted_sums(w, qr, kr)
    gamma = (5 * U * np.einsum("bhij,bjhd->bihd", np.abs(w), np.abs(kr)),
             3 * U * np.einsum("bhij,bihd->bjhd", np.abs(w), np.abs(qr)))
    sums = {"identical": all(a.tobytes() == b.tobytes() for a, b in zip(dev, host)),
            "within": all(bool(np.all(np.abs(a - b) <= 2 * g)) for a, b, g in zip(dev, host, gamma))}
    print(json.dumps({"simulated": bool(config.ENABLE_CUDASIM), "cases": out, "sums": sums}))
    """
)


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_score_vjp_within_the_fast_bound_and_near_the_cpu(target):
    """cuda within the fast bound of golden (the numpy and cpu backends' bound), within twice it of
    cpu and numpy per element, and within 8 u of cpu relative to the largest gradient (measured:
    about 1 u; the rotations of RoPE's cpu and cuda kernels differ in the last bits). The
    weighted sums alone: bit for bit the CPU kernel's under the simulator (the same additions in
    the same order, no FMA there), within twice gamma_n of it on a GPU (FMA)."""
    res = run_script(_SCORE_VJP_SCRIPT, target_env(target))
    assert res["simulated"] == (target == "simulator")
    assert len(res["cases"]) == 3
    for case in res["cases"]:
        assert all(case["shapes"]) and case["golden"] and case["cpu"] and case["numpy"], case
        assert case["rel_cpu"] <= 8 * 2.0**-53 and case["far_key_zero"] and case["golden_same"], case
    assert res["sums"]["within"] and (res["sums"]["identical"] or target == "gpu"), res["sums"]


def test_every_cuda_kernel_compiles_to_ptx_for_sm80_and_sm90():
    for k in ptx_report("reference.gaussian_rope.cuda_kernels"):
        # the weighted sum's multiply-adds, fused by NVVM into round-once FMAs (as documented);
        # no atomics (each thread owns its output: a fixed order), nothing approximate
        assert k["fma"] >= 1 and k["atomic"] == 0 and k["approx"] == 0, k


def test_cuda_backend_without_gpu_or_simulator_is_a_one_line_error():
    assert_refused_without_gpu("""
        from reference.gaussian_rope import DOCUMENT_KERNEL, backward
        q, pos = np.ones((1, 2, 1, 4)), np.zeros((1, 2), np.int64)
        backward.score_vjp(np.ones((1, 1, 2, 2)), q, q, pos, pos, kernel=DOCUMENT_KERNEL, backend="cuda")
    """)
