"""CUDA backend of reference.attention: within a few ulps of the CPU backend (relative to the
largest output), golden identical, under the simulator (CI) and on a real GPU where there is one;
both kernels compile to PTX for sm_80 and sm_90."""

import textwrap

import pytest
from cuda_support import TARGETS, assert_cuda_matches_cpu, run_script

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


def test_kernels_compile_to_ptx():
    script = textwrap.dedent(
        """
        import json
        from types import SimpleNamespace
        from unittest import mock
        from numba import cuda
        from reference.attention import cuda_kernels as K
        ok = []
        for cc in ((8, 0), (9, 0)):
            patch = None
            if not cuda.is_available():  # device functions ask for the current device's cc
                patch = mock.patch("numba.cuda.dispatcher.get_current_device",
                                   lambda: SimpleNamespace(compute_capability=cc))
                patch.start()
            for fn, sig in K.PTX_SIGNATURES:
                ptx, _ = cuda.compile_ptx(fn, sig, cc=cc)
                # the exact product errors are FMAs; the products themselves are mul.rn
                ok.append("fma.rn.f64" in ptx and "mul.rn.f64" in ptx)
            if patch is not None:
                patch.stop()
        print(json.dumps(ok))
        """
    )
    res = run_script(script)
    assert len(res) == 4 and all(res)
