"""RoPE in float64: angles, the cos/sin table and apply, dispatched to a backend.

Source: Su et al., RoFormer (arXiv 2104.09864) eq. 15 / eq. 34: pair i of the token at
position m turns by the angle m * theta_i, (a, b) -> (a cos - b sin, a sin + b cos), with
theta_i = base**(-2i/r). Layouts and partial rotary: see layouts.py.

Backends compute the same thing by different code:
- "cpu": Numba @njit kernels (cpu_kernels.py) over the double-double angle of ddmath.py;
- "cuda": numba.cuda.jit kernels (cuda_kernels.py) over the same ddmath functions;
- "numpy": the vectorised twin (numpy_twin.py) that reduces in turns with exact products.
Accuracy (measured, see ACCURACY.md): cos/sin within about 1 ulp of the exact value for
positions |m| <= 2**31 and any rotary_dim/base in the tested range; larger |m| up to 2**53 is
accepted and degrades gracefully (theta's double-double error times m).
"""

import numpy as np

from . import numpy_twin
from ._validate import (
    check_backend,
    check_base,
    check_layout,
    check_positions,
    check_rotary_dim,
    check_x,
    resolve_rotary_dim,
)
from .theta import inv_freq_dd
from .layouts import _rotate_in_place


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


def cos_sin(positions, rotary_dim, base=10000.0, *, backend="cpu"):
    """(cos, sin) of m * theta_i, each float64 [..., r/2] for positions of any shape [...].

    Accurate to about 1 ulp (double-double angle reduced modulo 2*pi).
    """
    r = check_rotary_dim(rotary_dim)
    b = check_base(base)
    m = check_positions(positions)
    backend = check_backend(backend)
    if backend == "numpy":
        return numpy_twin.cos_sin(m, r, b)
    hi, lo = inv_freq_dd(r, b)
    c, s = _kernels(backend).cos_sin(m.reshape(-1), hi, lo)
    return c.reshape(m.shape + (r // 2,)), s.reshape(m.shape + (r // 2,))


def apply(x, positions, *, rotary_dim=None, base=10000.0, layout="half", backend="cpu"):
    """RoPE of x at the given positions, float64 [batch, seq, heads, head_dim].

    x: [batch, seq, heads, head_dim] of any real dtype (converted to float64 first; NaN and Inf
    propagate). positions: int64 [batch, seq], arbitrary per row. rotary_dim: None means
    head_dim; elements past rotary_dim are copied bit-identically (partial rotary).
    """
    out = check_x(x)
    r = resolve_rotary_dim(rotary_dim, out.shape[3])
    b = check_base(base)
    layout = check_layout(layout)
    m = check_positions(positions, out.shape[:2])
    backend = check_backend(backend)
    if backend == "numpy":
        c, s = numpy_twin.cos_sin(m, r, b)
        return _rotate_in_place(out, c, s, r, layout)
    hi, lo = inv_freq_dd(r, b)
    return _kernels(backend).apply(out, m, hi, lo, 0 if layout == "half" else 1)


def _kernels(backend):
    """The kernel module of a Numba backend, imported on first use (so importing reference.rope
    compiles nothing and never imports numba.cuda)."""
    if backend == "cpu":
        from . import cpu_kernels

        return cpu_kernels
    from . import cuda_kernels

    return cuda_kernels
