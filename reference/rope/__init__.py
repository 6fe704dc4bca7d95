"""reference.rope: rotary position embedding (RoPE) in float64.

Public API (the team contract; formulas and sources in complex_form.py, matrix.py and, for the
family-free numerics RoPE is built on and re-exports here, reference/numerics/: rotation.py,
layouts.py, frequencies.py, phase.py):

- inv_freq(rotary_dim, base) / inv_freq_dd(rotary_dim, base): theta_i = base**(-2i/r)
- angles(positions, inv_freq): the plain product m * theta_i
- cos_sin(positions, rotary_dim, base, *, backend, mode): accurate cos/sin table
- apply(x, positions, *, rotary_dim, base, layout, backend, mode): RoPE of x [b, s, h, d]
- rotate_pairs(x, cos, sin, *, layout, rotary_dim): apply given tables (NumPy)
- freqs_cis / apply_complex: the complex (Meta) form
- rotation_matrix(position, rotary_dim, base, layout): dense R_m
- layout_permutation(rotary_dim): half = interleaved[perm]
- frequencies(rotary_dim, base, scaling, seq_len): (inv_freq, attention_factor) by rope_type
- phase (module), re-exported: FrequencyTable, table_from_mp(key, values), ladder(rotary_dim,
  base), cos_sin_table(positions, table, *, backend, mode), rotate_table(x, positions, table, *,
  layout, rotary_dim, backend, mode): the family-free frequency-table code every family reuses

Backends: "cpu" (Numba njit), "cuda" (numba.cuda; simulator with NUMBA_ENABLE_CUDASIM=1),
"numpy" (independent twin). Modes: "fast" (default) and "golden" (correctly rounded). Kernel
modules are imported lazily, so importing this package compiles nothing and never imports
numba.cuda. Never imports torch.

Limits: positions |m| <= 2**53, base in [1, 2**64], table frequencies in [2**-64, 2**20]; other
inputs raise a one-line ValueError naming the argument.

Accuracy (ACCURACY.md, against the mpmath oracle in oracle.py): the angle is reduced exactly
(Payne-Hanek), so fast cos/sin are within 1 ulp of the exact value for every accepted position,
including values next to zeros (tests enforce 1.5 ulp); golden values are the nearest doubles.
Fast apply is within (2 kappa + 2)(1 + 2**-50) ulps of each pair's norm, proven given cos/sin
within kappa ulps (4 for kappa = 1); golden apply outputs are correctly rounded.
"""

from reference.numerics import phase
from reference.numerics.frequencies import ROPE_TYPES, frequencies, inv_freq, inv_freq_dd
from reference.numerics.layouts import layout_permutation, pair_indices, rotate_pairs
from reference.numerics.phase import FrequencyTable, cos_sin_table, ladder, rotate_table, table_from_mp
from reference.numerics.rotation import angles, apply, cos_sin
from reference.numerics.validate import BACKENDS, LAYOUTS, MODES

from .complex_form import apply_complex, freqs_cis
from .matrix import rotation_matrix

__all__ = [
    "BACKENDS",
    "FrequencyTable",
    "LAYOUTS",
    "MODES",
    "ROPE_TYPES",
    "angles",
    "apply",
    "apply_complex",
    "cos_sin",
    "cos_sin_table",
    "freqs_cis",
    "frequencies",
    "inv_freq",
    "inv_freq_dd",
    "ladder",
    "layout_permutation",
    "pair_indices",
    "phase",
    "rotate_table",
    "rotate_pairs",
    "rotation_matrix",
    "table_from_mp",
]
