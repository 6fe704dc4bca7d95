"""CUDA backend of reference.alibi: the bias bit for bit equal to the CPU backend's, under the
simulator (CI) and on a real GPU where there is one."""

import textwrap

import pytest
from cuda_support import TARGETS, ptx_report, run_script, target_env

_SCRIPT = textwrap.dedent(
    """
    import json
    import numpy as np
    from numba import config
    from reference import alibi
    qp, kp = np.array([0, 5, 4095]), np.array([0, 1, 4094, 4095])
    same = all(np.array_equal(alibi.bias(12, qp, kp, causal=c, backend="cuda"),
                              alibi.bias(12, qp, kp, causal=c, backend="cpu")) for c in (True, False))
    print(json.dumps({"simulated": bool(config.ENABLE_CUDASIM), "identical": bool(same)}))
    """
)


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_bias_is_bitwise_equal_to_cpu(target):
    res = run_script(_SCRIPT, target_env(target))
    assert res["simulated"] == (target == "simulator") and res["identical"], res


def test_kernel_compiles_to_ptx():
    assert all(k["mul"] >= 1 for k in ptx_report("reference.numerics.bias.alibi_cuda_kernels"))
