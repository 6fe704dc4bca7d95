"""CUDA backend of reference.xpos (RoPE's phase kernels): fast outputs agree with the CPU backend's,
golden ones are identical, under the simulator (CI) and on a real GPU where there is one."""

import textwrap

import pytest
from cuda_support import TARGETS, run_script, target_env

_SCRIPT = textwrap.dedent(
    """
    import json
    import numpy as np
    from numba import config
    from reference import xpos
    q = np.random.default_rng(0).standard_normal((1, 3, 1, 8)); k = np.random.default_rng(1).standard_normal((1, 3, 1, 8))
    def call(**kw):
        return np.stack(xpos.apply(q, k, np.array([[0, 100, 4000]]), **kw))
    def run(**kw):
        return np.asarray(call(**kw), dtype=np.float64)
    fast, cpu = run(backend="cuda"), run(backend="cpu")
    golden, golden_cpu = run(backend="cuda", mode="golden"), run(backend="cpu", mode="golden")
    scale = max(float(np.max(np.abs(cpu))), 1e-300)
    print(json.dumps({"simulated": bool(config.ENABLE_CUDASIM), "fast_rel": float(np.max(np.abs(fast - cpu)) / scale),
                      "golden_identical": bool(np.array_equal(golden, golden_cpu))}))
    """
)


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_matches_cpu(target):
    res = run_script(_SCRIPT, target_env(target))
    assert res["simulated"] == (target == "simulator")
    assert res["golden_identical"] and res["fast_rel"] <= 8 * 2.0**-53, res
