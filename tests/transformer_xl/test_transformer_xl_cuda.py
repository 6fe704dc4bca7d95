"""CUDA backend of reference.transformer_xl: within fast_bound of the golden scores and close to the
CPU kernel, under the simulator (CI) and on a real GPU where there is one; kernels compile to PTX."""

import textwrap

import pytest
from cuda_support import TARGETS, run_script, target_env

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


def test_kernels_compile_to_ptx():
    script = textwrap.dedent(
        """
        import json
        from numba import cuda
        from reference.transformer_xl import cuda_kernels as K
        ok = []
        for cc in ((8, 0), (9, 0)):
            for fn, sig in K.PTX_SIGNATURES:
                ptx, _ = cuda.compile_ptx(fn, sig, cc=cc)
                # float64 products, and no approximate division or square root (fastmath would give them)
                ok.append(("fma.rn.f64" in ptx or "mul.rn.f64" in ptx) and ".approx" not in ptx
                          and (fn.__name__ != "score_kernel" or ("div.rn.f64" in ptx and "sqrt.rn.f64" in ptx)))
        print(json.dumps(ok))
        """
    )
    res = run_script(script)
    assert len(res) == 4 and all(res), res
