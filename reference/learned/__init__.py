"""reference.learned: learned absolute position embeddings (BERT, GPT-2, RoBERTa) in float64.

Public API (see core.py for the formula, sources and shapes):

- lookup(x, positions, table, *, variant, padding_idx, backend): x + table[row], float64
  [batch, seq, d_model];
- rows(positions, num_positions, *, variant, padding_idx): the row each position reads;
- position_range(num_positions, variant, padding_idx): the accepted positions (the length wall);
- VARIANTS ("absolute": row = position; "roberta": row = position + padding_idx + 1, padding
  marked -1 reads row padding_idx), BACKENDS, PADDING_MARKER.

Every position whose row falls outside the table is refused with a one-line ValueError naming
``positions`` (the hard length wall). Backends: "cpu" (Numba njit), "cuda" (numba.cuda; simulator
with NUMBA_ENABLE_CUDASIM=1), "numpy"; they agree bit for bit. Kernel modules are imported lazily.
Never imports torch.
"""

from ._validate import BACKENDS, PADDING_MARKER, VARIANTS, position_range
from .core import lookup, rows

__all__ = ["BACKENDS", "PADDING_MARKER", "VARIANTS", "lookup", "position_range", "rows"]
