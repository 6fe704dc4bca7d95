"""CUDA backend of reference.kerple: within the fast bound of the CPU backend, golden identical,
under the simulator (CI) and on a real GPU where there is one; the kernel compiles to PTX."""


import pytest
from cuda_support import TARGETS, assert_cuda_matches_cpu, ptx_report

_SETUP = """
from reference import kerple
qp, kp = np.array([0, 5, 4095]), np.array([0, 1, 4094, 4095])
def call(backend, mode="fast"):
    return np.concatenate([kerple.bias(qp, kp, "log", [0.37, 0.004], [0.43, 0.9], backend=backend, mode=mode),
                           kerple.bias(qp, kp, "power", [0.21, 0.6], [1.37, 3.0], backend=backend, mode=mode)])
"""


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_bias_matches_cpu(target):
    assert_cuda_matches_cpu(target, _SETUP, tolerance=16 * 2.0**-53)


def test_kernel_compiles_to_ptx():
    assert all(k["mul"] >= 1 for k in ptx_report("reference.numerics.bias.kerple_cuda_kernels"))
