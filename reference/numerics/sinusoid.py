"""Sinusoidal position tables in float64: PE(p) for integer positions, 1-D and 2-D; family-free (the
sinusoidal family exports ``table`` as its API, Transformer-XL builds its R from it).

Formula (Vaswani et al. 2017, "Attention Is All You Need", sec. 3.5): for frequencies
w_i = base**(-e_i) (sinusoid_frequencies.py) each row holds sin(p w_i) and cos(p w_i), placed by the
layout (sinusoid_layouts.py). A 2-D table (MAE ``get_2d_sincos_pos_embed``,
https://github.com/facebookresearch/mae/blob/main/util/pos_embed.py) concatenates two 1-D tables of
width d_model / 2: the first for coordinate 0, the second for coordinate 1. MAE builds its grid
with ``np.meshgrid(grid_w, grid_h)``, so its coordinate 0 is the column (w) and coordinate 1 the row
(h) of token h * W + w.

The angles p w_i are reduced exactly by phase.py (the frequency-table code), for every
|p| <= 2**53, on the backends "cpu" (Numba), "cuda" (numba.cuda) and "numpy" (the independent
twin). mode "golden": every value the float64 nearest to the exact sin / cos; "fast": within 1 ulp
(reference/rope/ACCURACY.md). Placing the values is data movement only.
"""

from __future__ import annotations

import numpy as np

from . import phase
from . import sinusoid_frequencies as frequencies
from . import sinusoid_layouts as layouts
from .sinusoid_validate import (
    DIMS,
    EXPONENTS,
    LAYOUTS,
    check_backend,
    check_base,
    check_choice,
    check_d_model,
    check_mode,
    check_positions,
)

__all__ = ["DIMS", "EXPONENTS", "LAYOUTS", "table", "table_1d"]


def table_1d(positions, d_model, layout, exponent, base, backend, mode) -> np.ndarray:
    """PE rows float64 [*positions.shape, d_model] for validated arguments."""
    tab = frequencies.table(d_model, layout, exponent, base)
    if backend == "cpu":
        return _table_cpu(positions, tab, d_model, layout, mode)
    cos, sin = phase.cos_sin_table(positions, tab, backend=backend, mode=mode)
    return layouts.arrange(cos, sin, d_model, layout)


def _table_cpu(positions, tab, d, layout, mode) -> np.ndarray:
    """The cpu backend's table in one pass: RoPE's cos/sin row kernels store each value straight
    into its column (cpu_kernels.cos_sin_columns; bit for bit phase.cos_sin_table's values placed by
    layouts.arrange, without a second pass over the table). Golden values the kernel cannot
    certify are settled exactly as phase.cos_sin_table settles them."""
    from . import cpu_kernels  # numba start-up: imported on first use

    m = phase.check_positions(positions)  # phase.cos_sin_table's shape rules (a scalar gives [1])
    flat = m.reshape(-1)
    out = np.empty((flat.size, d))
    cols, zero_from = layouts.column_plan(d, layout)
    flags = cpu_kernels.cos_sin_columns(flat, tab.limbs, out, cols, mode == "golden")
    out[:, zero_from:] = 0.0
    if flags.any():
        rows = np.nonzero(flags.any(axis=1))[0]
        c = np.zeros((rows.size, tab.count))
        s = np.zeros((rows.size, tab.count))
        phase._fix_cos_sin(c, s, flags[rows], flat[rows], tab)
        s0, ds, ns, c0, dc, nc = cols
        for r, i in zip(*np.nonzero(flags[rows])):
            if i < ns:
                out[rows[r], s0 + i * ds] = s[r, i]
            if i < nc:
                out[rows[r], c0 + i * dc] = c[r, i]
    return out.reshape(m.shape + (d,))


def table(positions, d_model, *, layout="interleaved", exponent="2i/d", base=10000.0, dims=1,
          backend="cpu", mode="fast") -> np.ndarray:
    """The sinusoidal table at the given positions, float64.

    positions: integers [...] (dims=1) or coordinates [..., 2] (dims=2); |p| <= 2**53.
    Returns [..., d_model]. layout: "interleaved" | "concatenated"; exponent: "2i/d" | "2i/(d-2)"
    (sinusoid_frequencies.py); base > 1. dims=2: two 1-D tables of d_model / 2, each with this layout and
    exponent rule at its own width, for coordinate 0 then coordinate 1.
    """
    dims = check_choice(dims, "dims", DIMS)
    layout = check_choice(layout, "layout", LAYOUTS)
    exponent = check_choice(exponent, "exponent", EXPONENTS)
    d = check_d_model(d_model, exponent, dims)
    b = check_base(base)
    pos = check_positions(positions, dims)
    backend = check_backend(backend)
    mode = check_mode(mode)
    if dims == 1:
        return table_1d(pos, d, layout, exponent, b, backend, mode)
    half = d // 2
    return np.concatenate([table_1d(pos[..., k], half, layout, exponent, b, backend, mode)
                           for k in (0, 1)], axis=-1)
