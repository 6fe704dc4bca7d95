"""CUDA backend of reference.attention: the forward within a few ulps of the CPU backend
(relative to the largest output), golden identical; the backward within fast_bound of golden mode
and within a few ulps of the CPU backend; under the simulator (CI) and on a real GPU where there
is one; every kernel compiles to PTX for sm_80 and sm_90."""


import pytest
from cuda_support import TARGETS, assert_cuda_matches_cpu, ptx_report, run_script, target_env

_SETUP = """
from reference import attention
rng = np.random.default_rng(2)
b, s, D, hq, hkv, d, P = 2, 3, 8, 4, 2, 4, 2
X = rng.uniform(-1, 1, (b, s, D))
W = {"wq": rng.uniform(-.5, .5, (hq * d, D)), "wk": rng.uniform(-.5, .5, (hkv * d, D)),
     "wv": rng.uniform(-.5, .5, (hkv * d, D)), "wo": rng.uniform(-.5, .5, (D, hq * d))}
pos = np.tile(np.arange(P, P + s), (b, 1))
mask = np.ones((b, P + s), dtype=bool); mask[1, 0] = False
kw = dict(attention_mask=mask, past_keys=rng.uniform(-1, 1, (b, hkv, P, d)),
          past_values=rng.uniform(-1, 1, (b, hkv, P, d)))
def call(backend, mode="fast"):
    return np.stack([attention.forward(X, W, pos, attention.Config(hq, hkv, d, True, enc), **kw, backend=backend,
                                       mode=mode) for enc in ("rope", "alibi")])
"""


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_forward_matches_cpu(target):
    assert_cuda_matches_cpu(target, _SETUP, tolerance=8 * 2.0**-53)


_BACKWARD = """
import json
import numpy as np
from numba import config
from reference.attention import Config, backward
""" + _SETUP + """
g = rng.uniform(-1, 1, (b, s, D))
g[0, 1] = 0.0
mask[1, :P + 1] = False  # row 1's first query sees no key (kw holds this mask)
cases = [(Config(hq, hkv, d, True, "rope"), W, pos),
         (Config(hq, hkv, d, False, "t5", num_buckets=8, max_distance=16),
          dict(W, rel_bias=rng.uniform(-2, 2, (8, hq))), pos + 7)]
rel, within = [], []
for c, w, p in cases:
    cuda = backward.vjp(g, X, w, p, c, **kw, backend="cuda")
    cpu = backward.vjp(g, X, w, p, c, **kw, backend="cpu")
    golden = backward.vjp(g, X, w, p, c, **kw, mode="golden")
    bound = backward.fast_bound(g, X, w, p, c, **kw)
    for r in backward.roles(c):
        rel.append(float(np.max(np.abs(cuda[r] - cpu[r])) / np.max(np.abs(cpu[r]))))
        within.append(bool(np.all(np.abs(cuda[r] - golden[r]) <= bound[r] + np.spacing(np.abs(golden[r])))))
print(json.dumps({"simulated": bool(config.ENABLE_CUDASIM), "rel": rel, "within": within}))
"""


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_backward_is_within_the_bound_and_matches_cpu(target):
    """Two tiny cases (RoPE, GQA, causal, a KV cache, a row that sees no key, a zero cotangent
    row; T5 bidirectional): every role (T5's table included) within fast_bound of golden mode, and
    within 16 u of the cpu backend relative to the role's largest element (measured: at most 5 u
    under the simulator, whose cuda.fma is unfused, so its Dot2 misses the products' errors)."""
    res = run_script(_BACKWARD, target_env(target))
    assert res["simulated"] == (target == "simulator")
    assert len(res["within"]) == 11 and all(res["within"]), res
    assert max(res["rel"]) <= 16 * 2.0**-53, res


def test_kernels_compile_to_ptx():
    """Every kernel of PTX_SIGNATURES compiles for sm_80 and sm_90 without atomics (each thread
    owns its outputs); the Dot2 kernels take the products' errors by FMA and keep the products
    themselves as mul.rn (never contracted); the T5 scatter adds plain float64 terms."""
    kernels = ptx_report("reference.attention.cuda_kernels")
    names = ["project_kernel", "attend_kernel", "softmax_backward_kernel", "query_backward_kernel",
             "key_value_backward_kernel", "t5_scatter_kernel"]
    assert [k["kernel"] for k in kernels] == names * 2, kernels
    for k in kernels:
        sums = k["add"] if k["kernel"] == "t5_scatter_kernel" else k["fma"] and k["mul_rn"]
        assert sums and not k["atomic"], k
