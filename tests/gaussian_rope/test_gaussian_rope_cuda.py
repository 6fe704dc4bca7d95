"""CUDA backend of reference.gaussian_rope (RoPE's phase kernels times K(m)): fast outputs agree
with the CPU backend's, golden ones are identical, under the simulator (CI) and on a real GPU."""

import textwrap

import pytest
from cuda_support import TARGETS, run_script, target_env

_SCRIPT = textwrap.dedent(
    """
    import json
    import numpy as np
    from numba import config
    from reference import gaussian_rope as G
    x = np.random.default_rng(0).standard_normal((1, 3, 1, 8))
    pos = np.array([[0, 20, 765]])
    fast = G.apply(x, pos, kernel=G.DOCUMENT_KERNEL, backend="cuda")
    cpu = G.apply(x, pos, kernel=G.DOCUMENT_KERNEL, backend="cpu")
    golden = G.apply(x, pos, kernel=G.DOCUMENT_KERNEL, backend="cuda", mode="golden")
    golden_cpu = G.apply(x, pos, kernel=G.DOCUMENT_KERNEL, backend="cpu", mode="golden")
    scale = np.abs(x).max() * np.abs(G.kernel(pos, G.DOCUMENT_KERNEL))[..., None, None]
    print(json.dumps({"simulated": bool(config.ENABLE_CUDASIM),
                      "fast_rel": float((np.abs(fast - cpu) / np.maximum(scale, 1e-300)).max()),
                      "golden_identical": bool(np.array_equal(golden, golden_cpu))}))
    """
)


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_matches_cpu(target):
    res = run_script(_SCRIPT, target_env(target))
    assert res["simulated"] == (target == "simulator")
    assert res["golden_identical"] and res["fast_rel"] <= 8 * 2.0**-53, res
