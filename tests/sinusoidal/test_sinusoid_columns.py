"""The cpu sinusoidal table in one pass (issue 31): RoPE's cos/sin row kernels store into the
table's columns (cpu_kernels.cos_sin_columns). Bit for bit what phase.cos_sin_table followed by
layouts.arrange gives, in fast and golden mode, every layout and width parity; golden values the
kernel leaves uncertain are settled exactly as phase.cos_sin_table settles them."""

from __future__ import annotations

import numpy as np
import pytest

from reference.numerics import cpu_kernels, phase, sinusoid
from reference.numerics import sinusoid_frequencies as frequencies
from reference.numerics import sinusoid_layouts as layouts

POSITIONS = np.concatenate([np.arange(-3, 40), [2**21, 2**21 + 1, 2**40 + 7, -(2**53), 2**53]]).astype(np.int64)


def _two_pass(positions, d, layout, exponent, mode):
    tab = frequencies.table(d, layout, exponent, 10000.0)
    cos, sin = phase.cos_sin_table(positions, tab, backend="cpu", mode=mode)
    return layouts.arrange(cos, sin, d, layout)


@pytest.mark.parametrize("layout", ["interleaved", "concatenated"])
@pytest.mark.parametrize("d", [2, 5, 64, 129])
@pytest.mark.parametrize("mode", ["fast", "golden"])
def test_one_pass_table_equals_cos_sin_then_arrange(layout, d, mode):
    for exponent in ("2i/d", "2i/(d-2)") if d > 2 else ("2i/d",):
        got = sinusoid.table(POSITIONS.reshape(-1, 4), d, layout=layout, exponent=exponent, mode=mode)
        assert got.tobytes() == _two_pass(POSITIONS.reshape(-1, 4), d, layout, exponent, mode).tobytes()


@pytest.mark.parametrize("layout,d", [("interleaved", 9), ("concatenated", 9)])
def test_uncertain_golden_values_are_settled_like_cos_sin_table(monkeypatch, layout, d):
    original = cpu_kernels.cos_sin_columns
    last = layouts.frequency_count(d, layout) - 1  # interleaved, odd d: a sine without its cosine
    picked = [(0, 0), (3, last), (5, 2), (7, 1)]  # (row, frequency)

    def spoiled(positions, limbs, out, cols, golden):
        flags = original(positions, limbs, out, cols, golden)
        for t, i in picked:  # as if the kernel could not certify these: flagged, garbage written
            flags[t, i] = 3
            out[t, :] = np.nan
        return flags

    monkeypatch.setattr(cpu_kernels, "cos_sin_columns", spoiled)
    pos = POSITIONS[:12]
    got = sinusoid.table(pos, d, layout=layout, mode="golden")
    want = _two_pass(pos, d, layout, "2i/d", "golden")
    # the flagged values are settled; the rest of the spoiled rows stays NaN (only flags are redone)
    for t, i in picked:
        s0, ds, ns, c0, dc, nc = layouts.column_plan(d, layout)[0]
        if i < ns:
            assert got[t, s0 + i * ds] == want[t, s0 + i * ds]
        if i < nc:
            assert got[t, c0 + i * dc] == want[t, c0 + i * dc]
    untouched = [t for t in range(pos.size) if t not in {p[0] for p in picked}]
    assert got[untouched].tobytes() == want[untouched].tobytes()
