"""CUDA backend of reference.fire: within the fast bound's scale of the CPU backend, golden
identical, under the simulator (CI) and on a real GPU where there is one; compiles to PTX."""

import textwrap

import pytest
from cuda_support import TARGETS, assert_cuda_matches_cpu, run_script

_SETUP = """
from reference import fire
rng = np.random.default_rng(2)
w = {"c": 0.1, "L_multiplier": 2.0 ** -7, "W1": rng.uniform(-1, 1, (4, 1)), "b1": rng.uniform(-1, 1, 4),
     "W2": rng.uniform(-0.2, 0.2, (2, 4)), "b2": rng.uniform(-0.2, 0.2, 2)}
qp, kp = np.array([0, 3, 4095]), np.array([0, 2, 4095])
def call(backend, mode="fast"):
    return fire.bias(qp, kp, w, backend=backend, mode=mode)
"""


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_bias_matches_cpu(target):
    assert_cuda_matches_cpu(target, _SETUP, tolerance=32 * 2.0**-53)


def test_kernel_compiles_to_ptx():
    script = textwrap.dedent(
        """
        import json
        from numba import cuda
        from reference.fire import cuda_kernels as K
        ok = []
        for cc in ((8, 0), (9, 0)):
            for fn, sig in K.PTX_SIGNATURES:
                ptx, _ = cuda.compile_ptx(fn, sig, cc=cc)
                ok.append("fma.rn.f64" in ptx or "add.rn.f64" in ptx or "add.f64" in ptx)
        print(json.dumps(ok))
        """
    )
    assert all(run_script(script))
