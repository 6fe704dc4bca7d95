"""CUDA backend of reference.learned: PTX for sm_80 / sm_90 at the real signatures, and the
simulator agreeing bit for bit with the CPU and NumPy backends.

Both run in subprocesses: NUMBA_ENABLE_CUDASIM is read when numba.cuda is first imported, so an
in-process check would depend on test order (and pytest-xdist worker reuse).
"""

import ast
import pathlib
import textwrap

import pytest
from cuda_support import TARGETS, run_script, target_env

ROOT = pathlib.Path(__file__).resolve().parents[2]

_PTX_SCRIPT = textwrap.dedent(
    """
    import json, re
    from types import SimpleNamespace
    from unittest import mock
    from numba import cuda
    from reference.learned import cuda_kernels as K

    results = []
    for cc in [(8, 0), (9, 0)]:
        # Without a GPU numba-cuda cannot ask the driver for the device's compute capability:
        # tell it the target (the one the kernel is compiled for). With a GPU nothing is patched.
        patch = None
        if not cuda.is_available():
            fake = SimpleNamespace(compute_capability=cc)
            patch = mock.patch("numba.cuda.dispatcher.get_current_device", lambda: fake)
            patch.start()
        for fn, sig in K.PTX_SIGNATURES:
            ptx, _ = cuda.compile_ptx(fn, sig, cc=cc)
            results.append({
                "kernel": fn.__name__, "cc": list(cc),
                "target": re.findall(r"\\.target\\s+(\\S+)", ptx),
                "entry": len(re.findall(r"\\.entry\\s", ptx)),
                "add": len(re.findall(r"\\badd(\\.rn)?\\.f64\\b", ptx)),
                "fma": len(re.findall(r"fma\\.rn\\.f64", ptx)),
                "mul": len(re.findall(r"\\bmul(\\.rn)?\\.f64\\b", ptx)),
                "nargs": len(sig),
            })
        if patch:
            patch.stop()
    print(json.dumps(results))
    """
)




def _kernels_defined_in_module():
    """Names passed to cuda.jit in cuda_kernels.py, read from the source (no numba.cuda import)."""
    tree = ast.parse((ROOT / "reference" / "learned" / "cuda_kernels.py").read_text())
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    jitted = {
        n.value.args[0].id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
        and ast.unparse(n.value.func) == "cuda.jit" and n.value.args and isinstance(n.value.args[0], ast.Name)
    }
    assert jitted and jitted <= defined
    return jitted


def test_every_cuda_kernel_compiles_to_ptx_for_sm80_and_sm90():
    results = run_script(_PTX_SCRIPT)
    names = {r["kernel"] for r in results}
    assert names == _kernels_defined_in_module()  # every kernel is listed in PTX_SIGNATURES
    assert len(results) == 2 * len(names)
    for r in results:
        assert r["target"] == [f"sm_{r['cc'][0]}{r['cc'][1]}"], r
        assert r["entry"] == 1, r
        # The lookup is one double addition (unrolled copies of it), with no product that NVVM
        # could fuse into an FMA: bit-identical to the CPU kernel's IEEE addition.
        assert r["add"] >= 1 and r["fma"] == 0 and r["mul"] == 0, r


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


def test_cuda_backend_without_gpu_or_simulator_is_a_one_line_error():
    script = textwrap.dedent(
        """
        import json
        import numpy as np
        import reference.learned as L
        from numba import cuda
        if cuda.is_available():
            print(json.dumps("gpu"))
        else:
            try:
                L.lookup(np.zeros((1, 1, 2)), np.zeros((1, 1), dtype=np.int64), np.zeros((4, 2)), backend="cuda")
            except ValueError as exc:
                print(json.dumps(str(exc)))
        """
    )
    msg = run_script(script)
    if msg == "gpu":
        pytest.skip("a CUDA GPU is present, so the backend does not refuse")
    assert msg.startswith("backend:") and "\n" not in msg
