"""reference.sinusoidal: sinusoidal absolute position tables (Vaswani, tensor2tensor, fairseq,
Transformer-XL, MAE 2-D) in float64.

Public API (core.py for formulas, sources and shapes):

- table(positions, d_model, *, layout, exponent, base, dims, backend, mode): PE rows
  [..., d_model];
- LAYOUTS ("interleaved", "concatenated"), EXPONENTS ("2i/d", "2i/(d-2)"), DIMS (1, 2).

Angles are reduced exactly by reference.numerics.phase for every |position| <= 2**53; mode="golden"
returns correctly rounded values. Backends "cpu", "cuda", "numpy". Never imports torch.
"""

from ._validate import DIMS, EXPONENTS, LAYOUTS
from .core import table

__all__ = ["DIMS", "EXPONENTS", "LAYOUTS", "table"]
