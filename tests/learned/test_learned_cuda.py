"""CUDA backend of reference.learned: PTX for sm_80 / sm_90 at the real signatures, and the
simulator agreeing bit for bit with the CPU and NumPy backends, for the lookup and for its
backward's scatter-add (backward.lookup_vjp).

Both run in subprocesses: NUMBA_ENABLE_CUDASIM is read when numba.cuda is first imported, so an
in-process check would depend on test order (and pytest-xdist worker reuse).
"""

import textwrap

import pytest
from cuda_support import TARGETS, assert_refused_without_gpu, ptx_report, run_script, target_env


def test_every_cuda_kernel_compiles_to_ptx_for_sm80_and_sm90():
    for k in ptx_report("reference.learned.cuda_kernels"):
        # The lookup is one double addition (unrolled copies of it) and the scatter-add a chain of
        # them, with no product that NVVM could fuse into an FMA: bit-identical to the CPU kernels'
        # IEEE additions. No atomics: each thread owns its output, so the order of a sum is fixed.
        assert k["add"] >= 1 and k["fma"] == 0 and k["mul"] == 0 and k["atomic"] == 0, k


_SIM_SCRIPT = textwrap.dedent(
    """
    import json
    import numpy as np
    import reference.learned as L
    from numba import config
    rng = np.random.default_rng(7)
    out = []
    for n, variant, pad, shape in [(512, "absolute", None, (2, 3, 4)), (1024, "absolute", None, (1, 2, 3)),
                                   (514, "roberta", 1, (2, 3, 2))]:
        low, high = L.position_range(n, variant, pad)
        pos = rng.integers(low, high, size=shape[:2], endpoint=True)
        pos[0, 0] = high
        x = rng.standard_normal(shape) * np.exp2(rng.integers(-40, 40, size=shape))
        x.reshape(-1)[1] = np.nan
        table = rng.standard_normal((n, shape[2]))
        kw = dict(variant=variant, padding_idx=pad)
        g = L.lookup(x, pos, table, backend="cuda", **kw)
        c = L.lookup(x, pos, table, backend="cpu", **kw)
        m = L.lookup(x, pos, table, backend="numpy", **kw)
        try:
            bad = pos.copy()
            bad[-1, -1] = high + 1
            L.lookup(x, bad, table, backend="cuda", **kw)
            refused = ""
        except ValueError as exc:
            refused = str(exc)
        out.append({"cpu": bool(np.array_equal(g.view(np.int64), c.view(np.int64))),
                    "numpy": bool(np.array_equal(g.view(np.int64), m.view(np.int64))),
                    "shape": list(g.shape), "refused": refused})
    print(json.dumps({"simulated": bool(config.ENABLE_CUDASIM), "cases": out}))
    """
)


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_agrees_bit_for_bit_and_refuses_the_wall(target):
    res = run_script(_SIM_SCRIPT, target_env(target))
    assert res["simulated"] == (target == "simulator")
    for case in res["cases"]:
        assert case["cpu"] and case["numpy"], case
        assert case["refused"].startswith("positions:") and "length wall" in case["refused"], case


_SIM_BACKWARD_SCRIPT = textwrap.dedent(
    """
    import json
    import numpy as np
    from numba import config
    from reference.learned import backward, cuda_kernels

    def same(a, b):
        # bit for bit, except that a GPU may return another NaN payload
        nan = np.isnan(a)
        return bool(a.shape == b.shape and np.array_equal(nan, np.isnan(b))
                    and np.array_equal(np.where(nan, 0.0, a).view(np.int64), np.where(nan, 0.0, b).view(np.int64)))

    rng = np.random.default_rng(8)
    g = rng.standard_normal((2, 9, 3)) * np.exp2(rng.integers(-60, 60, (2, 9, 3)))
    pos = rng.integers(0, 3, (2, 9))
    g[0, 1] = -g[0, 0] * (1 + 2.0**-45)  # a near cancellation in a shared row
    pos[0, 1] = pos[0, 0]
    rpos = np.where(rng.random((2, 9)) < 0.3, -1, rng.integers(0, 4, (2, 9)))
    specials = np.array([[[np.inf, 1e308], [-np.inf, 1e308], [np.nan, -0.0], [1.0, -0.0]]])
    cases = [(g, pos, 4, {}), (g, rpos, 7, dict(variant="roberta", padding_idx=1)),
             (g, rpos, 7, dict(variant="roberta", padding_idx=1, freeze_padding=True)),
             (specials, np.array([[0, 0, 1, 1]]), 3, {}), (np.zeros((0, 2, 3)), np.zeros((0, 2), np.int64), 2, {})]
    out = []
    for g_, pos_, n, kw in cases:
        cuda_t = backward.lookup_vjp(g_, pos_, n, backend="cuda", **kw)[1]
        out.append({"cpu": same(cuda_t, backward.lookup_vjp(g_, pos_, n, backend="cpu", **kw)[1]),
                    "numpy": same(cuda_t, backward.lookup_vjp(g_, pos_, n, backend="numpy", **kw)[1]),
                    "frozen": bool(np.all(cuda_t[1] == 0.0)) if kw.get("freeze_padding") else None})
    try:
        cuda_kernels.scatter_add(np.ones((3, 2)), np.array([0, 4, 1]), 4)
        refused = ""
    except ValueError as exc:
        refused = str(exc)
    print(json.dumps({"simulated": bool(config.ENABLE_CUDASIM), "cases": out, "refused": refused}))
    """
)


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_scatter_add_agrees_bit_for_bit_and_refuses_the_wall(target):
    res = run_script(_SIM_BACKWARD_SCRIPT, target_env(target))
    assert res["simulated"] == (target == "simulator")
    for case in res["cases"]:
        assert case["cpu"] and case["numpy"] and case["frozen"] in (None, True), case
    assert res["refused"].startswith("positions:") and "length wall" in res["refused"]


@pytest.mark.parametrize("call", [
    "L.lookup(np.zeros((1, 1, 2)), np.zeros((1, 1), dtype=np.int64), np.zeros((4, 2)), backend='cuda')",
    "backward.lookup_vjp(np.zeros((1, 1, 2)), np.zeros((1, 1), dtype=np.int64), 4, backend='cuda')",
], ids=["lookup", "lookup_vjp"])
def test_cuda_backend_without_gpu_or_simulator_is_a_one_line_error(call):
    assert_refused_without_gpu(f"import reference.learned as L\nfrom reference.learned import backward\n{call}")
