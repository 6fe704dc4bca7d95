"""reference.rope: rotary position embedding (RoPE) in float64.

Public API (the team contract; see core.py, layouts.py, complex_form.py, matrix.py,
theta.py for formulas and sources):

- inv_freq(rotary_dim, base) / inv_freq_dd(rotary_dim, base): theta_i = base**(-2i/r)
- angles(positions, inv_freq): the plain product m * theta_i
- cos_sin(positions, rotary_dim, base, *, backend): accurate cos/sin table
- apply(x, positions, *, rotary_dim, base, layout, backend): RoPE of x [b, s, h, d]
- rotate_pairs(x, cos, sin, *, layout, rotary_dim): apply given tables (NumPy)
- freqs_cis / apply_complex: the complex (Meta) form
- rotation_matrix(position, rotary_dim, base, layout): dense R_m
- layout_permutation(rotary_dim): half = interleaved[perm]
- frequencies(rotary_dim, base, scaling, seq_len): (inv_freq, attention_factor) by rope_type

Backends: "cpu" (Numba njit), "cuda" (numba.cuda; simulator with NUMBA_ENABLE_CUDASIM=1),
"numpy" (independent twin). Kernel modules are imported lazily, so importing this package
compiles nothing and never imports numba.cuda. Never imports torch.

Accuracy (ACCURACY.md, measured against the mpmath oracle in oracle.py): cos/sin within 1.005 ulp
and apply within 1.94 ulps of each pair's norm over 620,000 / 103,104 sampled values at
positions |m| <= 2**24, rotary_dim <= 256, base 1e4..1e6 (the plain float64 product m * theta is
off by up to 1.8e-9 there). Tests enforce 1.5 ulp and 2.5 pair-ulps.
"""

from ._validate import BACKENDS, LAYOUTS
from .complex_form import apply_complex, freqs_cis
from .core import angles, apply, cos_sin
from .theta import ROPE_TYPES, frequencies, inv_freq, inv_freq_dd
from .layouts import layout_permutation, pair_indices, rotate_pairs
from .matrix import rotation_matrix

__all__ = [
    "BACKENDS",
    "LAYOUTS",
    "ROPE_TYPES",
    "angles",
    "apply",
    "apply_complex",
    "cos_sin",
    "freqs_cis",
    "frequencies",
    "inv_freq",
    "inv_freq_dd",
    "layout_permutation",
    "pair_indices",
    "rotate_pairs",
    "rotation_matrix",
]
