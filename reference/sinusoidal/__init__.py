"""reference.sinusoidal: sinusoidal absolute position tables (Vaswani, tensor2tensor, fairseq,
Transformer-XL, MAE 2-D) in float64.

Public API (re-exported from the family-free reference/numerics/sinusoid.py, which Transformer-XL
shares; formulas, sources and shapes there, frequency rules in sinusoid_frequencies.py, column
layouts in sinusoid_layouts.py):

- table(positions, d_model, *, layout, exponent, base, dims, backend, mode): PE rows
  [..., d_model];
- LAYOUTS ("interleaved", "concatenated"), EXPONENTS ("2i/d", "2i/(d-2)"), DIMS (1, 2).

Angles are reduced exactly by reference.numerics.phase for every |position| <= 2**53; mode="golden"
returns correctly rounded values. Backends "cpu", "cuda", "numpy". Never imports torch.
"""

from reference.numerics.sinusoid import DIMS, EXPONENTS, LAYOUTS, table

__all__ = ["DIMS", "EXPONENTS", "LAYOUTS", "table"]
