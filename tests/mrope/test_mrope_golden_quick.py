"""M-RoPE golden mode on the cpu (issue 31: phase.rotate_streams' certified quick phase) is bit for
bit the value-by-value mpmath path (the numpy backend's golden mode), with a constant text stream,
position 0, huge positions and the tail past rotary_dim."""

import numpy as np
import pytest

from reference import mrope
from tests.rope.test_stream_kernels_golden import stress_x


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_golden_cpu_is_the_mpmath_path_bit_for_bit(layout):
    rng = np.random.default_rng(313)
    x = stress_x(rng, (1, 7, 2, 14))
    pos = rng.integers(0, 5000, size=(3, 1, 7))
    pos[0] = 0
    pos[1, 0, 3], pos[2, 0, 4] = 2**45, 2**21 + 1
    got = mrope.apply(x, pos, mrope_section=[2, 2, 2], rotary_dim=12, layout=layout, mode="golden")
    want = mrope.apply(x, pos, mrope_section=[2, 2, 2], rotary_dim=12, layout=layout, mode="golden",
                       backend="numpy")
    assert got.tobytes() == want.tobytes()
