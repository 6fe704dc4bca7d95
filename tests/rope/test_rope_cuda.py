"""CUDA backend: PTX for sm_80 / sm_90 at the real signatures, and the simulator agreeing.

Both run in subprocesses: NUMBA_ENABLE_CUDASIM is read when numba.cuda is first imported, so
an in-process check would depend on test order (and pytest-xdist worker reuse).
"""

import textwrap

import pytest
from cuda_support import TARGETS, assert_refused_without_gpu, run_script, target_env

_PTX_SCRIPT = textwrap.dedent(
    """
    import json, math, re, sys
    from types import SimpleNamespace
    from unittest import mock
    from numba import cuda, float64
    from reference.numerics import cuda_kernels as K

    def count(pattern, text):
        return len(re.findall(pattern, text))

    def sincos_only(a, o):
        o[0] = math.sin(a[0])
        o[1] = math.cos(a[0])

    results = []
    for cc in [(8, 0), (9, 0)]:
        # numba-cuda compiles device functions for the *current* device's compute capability,
        # which needs a driver; without a GPU, tell it the target cc (the same one the kernel
        # is compiled for). On a machine with a GPU nothing is patched.
        patch = None
        if not cuda.is_available():
            fake = SimpleNamespace(compute_capability=cc)
            patch = mock.patch("numba.cuda.dispatcher.get_current_device", lambda: fake)
            patch.start()
        ref, _ = cuda.compile_ptx(sincos_only, (float64[::1], float64[::1]), cc=cc)
        for fn, sig in K.PTX_SIGNATURES:
            ptx, _ = cuda.compile_ptx(fn, sig, cc=cc)
            results.append({
                "kernel": fn.__name__, "cc": list(cc),
                "target": re.findall(r"\\.target\\s+(\\S+)", ptx),
                "entry": count(r"\\.entry\\s", ptx),
                "fma": count(r"fma\\.rn\\.f64", ptx), "fma_sincos": count(r"fma\\.rn\\.f64", ref),
                # a plain mul.f64 may be contracted by ptxas; libdevice sin/cos have a few
                "mul_plain": count(r"\\bmul\\.f64", ptx), "mul_plain_sincos": count(r"\\bmul\\.f64", ref),
                "mul_rn": count(r"mul\\.rn\\.f64", ptx),
                "mul_int": count(r"mul\\.(lo|hi|wide)\\.[su]64", ptx),
                "libdevice_sincos": fn.__name__ in K.USES_LIBDEVICE_SINCOS,
                "nargs": len(sig),
            })
        if patch:
            patch.stop()
    print(json.dumps(results))
    """
)




def _kernels_defined_in_module():
    import ast
    import pathlib

    import reference.numerics

    src = pathlib.Path(reference.numerics.__file__).with_name("cuda_kernels.py").read_text()
    tree = ast.parse(src)
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    jitted = {
        n.value.args[0].id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Call)
        and ast.unparse(n.value.func) == "cuda.jit"
        and n.value.args
        and isinstance(n.value.args[0], ast.Name)
    }
    assert jitted and jitted <= defined
    return jitted


def test_every_cuda_kernel_compiles_to_ptx_for_sm80_and_sm90():
    results = run_script(_PTX_SCRIPT)
    names = {r["kernel"] for r in results}
    # every kernel the module defines (read from its source, without importing numba.cuda
    # into this process) is listed in PTX_SIGNATURES
    assert names == _kernels_defined_in_module()
    assert len(results) == 2 * len(names)
    for r in results:
        assert r["target"] == [f"sm_{r['cc'][0]}{r['cc'][1]}"], r
        assert r["entry"] == 1, r
        # Every product of the double-double code is an explicit mul.rn (never contracted);
        # the only FMAs (and plain, contractible mul.f64) are the ones inside libdevice's sin
        # and cos, which only the fast kernels call; the golden kernels have none at all.
        assert r["mul_rn"] >= 20, r
        assert r["mul_int"] >= 2, r  # the integer Payne-Hanek products
        if r["libdevice_sincos"]:
            assert r["fma_sincos"] > 0 and r["fma"] == r["fma_sincos"], r
            assert r["mul_plain"] == r["mul_plain_sincos"], r
        else:
            assert r["fma"] == 0 and r["mul_plain"] == 0, r
    assert {r["kernel"] for r in results if r["libdevice_sincos"]} == {
        "cos_sin_fast_kernel", "apply_fast_kernel"}


_SIM_SCRIPT = textwrap.dedent(
    """
    import json
    import numpy as np
    import reference.rope as R
    from reference.rope import oracle
    from numba import config
    rng = np.random.default_rng(11)
    out = []
    cases = [
        ((1, 2, 1, 8), None, "half"), ((2, 1, 2, 6), 4, "interleaved"),
        ((1, 3, 1, 10), 6, "half"), ((1, 1, 1, 4), None, "interleaved"),
    ]
    for shape, r, layout in cases:
        x = rng.standard_normal(shape)
        pos = rng.integers(-(2**53), 2**53, size=shape[:2])
        pos[0, 0] = 2**24
        base = float(np.exp(rng.uniform(np.log(1e4), np.log(1e6))))
        rr = shape[3] if r is None else r
        res = {"scale": float(np.abs(x).max())}
        for mode in ("fast", "golden"):
            kw = dict(rotary_dim=r, base=base, layout=layout, mode=mode)
            g = R.apply(x, pos, backend="cuda", **kw)
            c = R.apply(x, pos, backend="cpu", **kw)
            n = R.apply(x, pos, backend="numpy", **kw)
            res[mode] = {
                "max_diff_cpu": float(np.abs(g - c).max()),
                "max_diff_numpy": float(np.abs(g - n).max()),
                "identical_cpu": bool(np.array_equal(g, c)),
                "identical_numpy": bool(np.array_equal(g, n)),
                "tail_identical": bool(np.array_equal(g[..., rr:], x[..., rr:])),
            }
        out.append(res)
    # values next to zeros: convergent denominators of 2 theta_i / pi (r = 8, base 5e5)
    thetas = R.ladder(8, 500000.0).mp_values(400)
    near = [q for i in range(4) for q in oracle.near_zero_positions(thetas[i])[-2:]]
    pos = np.array(near + [-q for q in near[:2]] + [0, 1, 2**53, -1], dtype=np.int64).reshape(2, 7)
    cs = {}
    for mode in ("fast", "golden"):
        cg, sg = R.cos_sin(pos, 8, 500000.0, backend="cuda", mode=mode)
        cc, sc = R.cos_sin(pos, 8, 500000.0, backend="cpu", mode=mode)
        ulp = np.spacing(np.abs(np.concatenate([cc, sc])))
        diff = np.abs(np.concatenate([cg - cc, sg - sc]))
        cs[mode] = {"ulps": float((diff / ulp).max()),
                    "identical": bool(np.array_equal(cg, cc) and np.array_equal(sg, sc)),
                    "min_abs": float(np.abs(np.concatenate([cc, sc])).min())}
    nan = R.apply(np.full((1, 1, 1, 4), np.nan), np.array([[3]]), backend="cuda")
    print(json.dumps({"simulated": bool(config.ENABLE_CUDASIM), "cases": out, "cos_sin": cs,
                      "shape": list(cg.shape),
                      "nan": bool(np.isnan(nan).all())}))
    """
)


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_agrees_with_cpu_and_numpy(target):
    res = run_script(_SIM_SCRIPT, target_env(target))
    assert res["simulated"] == (target == "simulator")
    # Fast mode, same bound as cpu vs numpy (ACCURACY.md): 8 ulp of the pair norm <= 8 ulp of
    # max|x|; golden mode: bit for bit (all are correctly rounded).
    for case in res["cases"]:
        bound = 8 * 2.0**-52 * case["scale"]
        assert case["fast"]["max_diff_cpu"] <= bound, case
        assert case["fast"]["max_diff_numpy"] <= bound, case
        assert case["golden"]["identical_cpu"] and case["golden"]["identical_numpy"], case
        assert case["fast"]["tail_identical"] and case["golden"]["tail_identical"], case
    assert res["cos_sin"]["fast"]["ulps"] <= 2.0
    assert res["cos_sin"]["golden"]["identical"]
    assert res["cos_sin"]["golden"]["min_abs"] < 1e-10  # next to a zero
    assert res["shape"] == [2, 7, 4]
    assert res["nan"]


def test_cuda_backend_without_gpu_or_simulator_is_a_one_line_error():
    assert_refused_without_gpu("""
        import reference.rope as R
        R.apply(np.zeros((1, 1, 1, 4)), np.zeros((1, 1), dtype=np.int64), backend="cuda")
    """)
