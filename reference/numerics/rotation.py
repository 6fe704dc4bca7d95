"""The rotation by a frequency ladder (RoPE's, reused by every rotary family) in float64: angles, the
cos/sin table and apply, dispatched to a backend; reference.rope exports them as its public API.

Source: Su et al., RoFormer (arXiv 2104.09864) eq. 15 / eq. 34: pair i of the token at
position m turns by the angle m * theta_i, (a, b) -> (a cos - b sin, a sin + b cos), with
theta_i = base**(-2i/r). Layouts and partial rotary: see layouts.py.

``cos_sin`` and ``apply`` are thin wrappers over the family-free frequency-table code in
phase.py (``phase.ladder`` builds the table, ``phase.cos_sin_table`` / ``phase.rotate_table``
evaluate it). Backends compute the same thing by different code:
- "cpu": Numba @njit kernels (cpu_kernels.py): a vectorised float reduction for |m| <= 2**21,
  ddmath.py (integer Payne-Hanek reduction) beyond, one pass over x for apply;
- "cuda": numba.cuda.jit kernels (cuda_kernels.py) over the same ddmath functions;
- "numpy": the vectorised twin (numpy_twin.py): float chunks and an error-free summation.
Accuracy (ACCURACY.md): the reduction is exact for every accepted position |m| <= 2**53, so
fast-mode cos/sin are within 1 ulp (measured, including values next to zeros), and golden mode
returns the correctly rounded value.
"""

import numpy as np

from . import phase
from .validate import (
    check_backend,
    check_layout,
    check_mode,
    check_positions,
    as_x,
    check_x,
    resolve_rotary_dim,
)
from .frequencies import scaled_table


def angles(positions, inv_freq):
    """m * theta_i as the plain float64 product, shape [..., r/2] (positions [...], inv_freq [r/2]).

    This is the *naive* angle (rounded once, never reduced): fine for display and for building
    mutants, but cos_sin does not use it (its error grows like m * ulp(theta)).
    """
    m = check_positions(positions)
    freq = np.asarray(inv_freq)
    if freq.ndim != 1 or freq.dtype.kind not in "fiu":
        raise ValueError(f"inv_freq: must be a 1-D real array, got shape {freq.shape}")
    return m.astype(np.float64)[..., None] * freq.astype(np.float64)


def cos_sin(positions, rotary_dim, base=10000.0, *, scaling=None, seq_len=None, backend="cpu", mode="fast"):
    """(cos, sin) of m * theta_i, each float64 [..., r/2] for positions of any shape [...].

    theta_i = base**(-2i/r); positions |m| <= 2**53; base in [1, 2**64].
    scaling, seq_len: a scaling in HF form (theta.frequencies, scaling/); the table is then the
    scaled theta'_i, and cos and sin are multiplied by the attention factor f, as HF's rotary
    embedding returns them (f cos, f sin).
    mode "fast": within 1 ulp of the exact value (measured; 1.5 enforced by tests; 1.5 ulp more
    when f != 1). mode "golden": each value the float64 nearest to the exact (f) cos/sin.
    """
    m = check_positions(positions)
    backend = check_backend(backend)
    mode = check_mode(mode)
    table, factor = scaled_table(rotary_dim, base, scaling, seq_len)
    if factor(64) == 1:
        return phase._cos_sin(m, table, backend, mode)
    return phase.scaled_cos_sin(m, table, factor, backend, mode)


def apply(x, positions, *, rotary_dim=None, base=10000.0, layout="half", scaling=None, seq_len=None,
          backend="cpu", mode="fast"):
    """RoPE of x at the given positions, float64 [batch, seq, heads, head_dim].

    x: [batch, seq, heads, head_dim] of any real dtype (converted to float64 first; NaN and Inf
    propagate). positions: int64 [batch, seq], arbitrary per row. rotary_dim: None means
    head_dim; elements past rotary_dim are copied bit-identically (partial rotary).
    mode "fast": each output within (2 kappa + 2)(1 + 2**-50) ulps of its pair's norm
    sqrt(a**2 + b**2), proven given cos/sin within kappa ulps (4 pair-ulps for kappa = 1; the
    largest error found by sampling is 2.2, ACCURACY.md). mode "golden": each output the float64
    nearest to the exact a c - b s (a s + b c). scaling, seq_len: as in cos_sin; the rotated
    pairs are then multiplied by the attention factor (the pass-through tail is not).
    """
    out = as_x(x)
    r = resolve_rotary_dim(rotary_dim, out.shape[3])
    layout = check_layout(layout)
    m = check_positions(positions, out.shape[:2])
    backend = check_backend(backend)
    mode = check_mode(mode)
    table, factor = scaled_table(r, base, scaling, seq_len)
    if factor(64) == 1:
        # shared: out may be the caller's x (no copy); the cpu backend reads it once and writes
        # a new array (one pass over memory)
        return phase._rotate(out, m, table, r, layout, backend, mode, shared=True)
    return phase.scaled_rotate(check_x(x), m, table, factor, r, layout, backend, mode)
