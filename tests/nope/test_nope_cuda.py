"""CUDA backend of reference.nope: the copy bit for bit equal to the input, under the simulator
(CI) and on a real GPU where there is one; the kernel compiles to PTX."""

import textwrap

import pytest
from cuda_support import TARGETS, ptx_report, run_script, target_env

_SCRIPT = textwrap.dedent(
    """
    import json
    import numpy as np
    from numba import config
    from reference import nope
    x = np.arange(24.0).reshape(1, 3, 2, 4) - 7.5
    x[0, 0, 0, 0] = -0.0
    out = nope.apply(x, np.array([[0, 8191, 131071]]), backend="cuda")
    print(json.dumps({"simulated": bool(config.ENABLE_CUDASIM),
                      "identical": bool(np.array_equal(out.view(np.int64), x.view(np.int64)))}))
    """
)


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_copy_is_bitwise_equal(target):
    res = run_script(_SCRIPT, target_env(target))
    assert res["simulated"] == (target == "simulator") and res["identical"], res


def test_kernel_compiles_to_ptx():
    assert ptx_report("reference.nope.cuda_kernels")  # one entry point per kernel and target
