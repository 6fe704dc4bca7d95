"""CUDA backend of reference.sinusoidal (the phase kernels of reference.rope): golden tables bit
for bit equal to the CPU backend's, under the simulator (CI) and on a real GPU where there is one."""

import textwrap

import pytest
from cuda_support import TARGETS, run_script, target_env

_SCRIPT = textwrap.dedent(
    """
    import json
    import numpy as np
    from numba import config
    from reference import sinusoidal as S
    pos = np.array([0, 1, 7, 4095, 2**20, -(2**40) - 3, 2**53])
    out = []
    for kw in [dict(d_model=7), dict(d_model=10, layout="concatenated", exponent="2i/(d-2)"),
               dict(d_model=8, layout="concatenated", dims=2)]:
        p = np.stack([pos, pos[::-1]], -1) if kw.get("dims") == 2 else pos
        g = S.table(p, backend="cuda", mode="golden", **kw)
        c = S.table(p, backend="cpu", mode="golden", **kw)
        f = S.table(p, backend="cuda", **kw)
        out.append({"golden_identical": bool(np.array_equal(g, c)),
                    "fast_ulps": float((np.abs(f - c) / np.spacing(np.maximum(np.abs(c), 1e-300))).max())})
    print(json.dumps({"simulated": bool(config.ENABLE_CUDASIM), "cases": out}))
    """
)


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_tables_agree_with_cpu(target):
    res = run_script(_SCRIPT, target_env(target))
    assert res["simulated"] == (target == "simulator")
    for case in res["cases"]:
        assert case["golden_identical"] and case["fast_ulps"] <= 1.5, case
