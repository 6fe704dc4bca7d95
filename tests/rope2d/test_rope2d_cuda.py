"""CUDA backend of reference.rope2d (RoPE's phase kernels): fast outputs agree with the CPU backend's,
golden ones are identical, under the simulator (CI) and on a real GPU where there is one."""

import textwrap

import pytest
from cuda_support import TARGETS, assert_cuda_matches_cpu

SETUP = textwrap.dedent(
    """
    from reference import rope2d
    x = np.random.default_rng(0).standard_normal((1, 3, 1, 16))
    coords = np.array([[[-1, -1], [3, 1], [13, 6]]])
    def call(**kw):
        return rope2d.apply(x, coords, cls_tokens=1, **kw)
    """
)


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_matches_cpu(target):
    assert_cuda_matches_cpu(target, SETUP)
