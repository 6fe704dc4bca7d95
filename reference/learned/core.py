"""Learned absolute position embeddings in float64: the row of each position, and the lookup.

Formula: out[b, s, :] = x[b, s, :] + table[row(positions[b, s]), :], one IEEE addition per
element, with

- variant "absolute" (BERT, GPT-2): row = position, for positions 0..N-1;
- variant "roberta" (RoBERTa, fairseq position ids): row = position + padding_idx + 1 for a real
  token at 0-based position p, and row = padding_idx for a padding token, marked -1 in
  ``positions`` (-1 + padding_idx + 1 = padding_idx, so one formula covers both).

Sources: Hugging Face ``GPT2Model`` (``wpe = nn.Embedding(config.max_position_embeddings,
embed_dim)``; ``hidden_states = inputs_embeds + wpe(position_ids)``; GPT-2: 1024 rows),
``BertEmbeddings`` (``position_embeddings`` of ``max_position_embeddings`` = 512 rows, added to the
word and token-type embeddings) and ``RobertaEmbeddings`` (``create_position_ids_from_input_ids``:
``cumsum(input_ids != padding_idx) * mask + padding_idx``, so real tokens count from
padding_idx + 1; RoBERTa-base: padding_idx 1, 514 rows for 512 tokens).

The length wall: a learned table has rows 0..N-1 and nothing past them, so any position whose row
falls outside [0, N) is refused with a one-line ValueError (``_validate.check_positions``),
negative positions other than RoBERTa's -1 marker included (no wrap-around to the last row).

Backends compute the same thing by different code and agree bit for bit (one correctly rounded
float64 addition per element, no fastmath, nothing to contract into an FMA):
- "cpu": a Numba @njit loop (cpu_kernels.py);
- "cuda": a numba.cuda kernel (cuda_kernels.py; simulator with NUMBA_ENABLE_CUDASIM=1);
- "numpy": gather and add (numpy_twin.py).
"""

from __future__ import annotations

import numpy as np

from . import numpy_twin
from ._validate import check_backend, check_positions, check_table, check_x


def rows(positions, num_positions, *, variant="absolute", padding_idx=None) -> np.ndarray:
    """The table row each position reads, int64 of positions' shape (any shape).

    Refuses every position outside the length wall (ValueError naming ``positions``).
    """
    arr = np.asarray(positions)
    pos, offset = check_positions(arr, arr.shape, int(num_positions), variant, padding_idx)
    return pos + offset


def lookup(x, positions, table, *, variant="absolute", padding_idx=None, backend="cpu") -> np.ndarray:
    """x + table[row], float64 [batch, seq, d_model].

    x: [batch, seq, d_model] of any real dtype (converted to float64 first; NaN and Inf
    propagate). positions: integer [batch, seq], each row its own (offsets, padding, decode).
    table: [num_positions, d_model] of any real dtype (converted to float64). variant and
    padding_idx: see the module docstring. Positions past the wall raise ValueError.
    """
    xs = check_x(x)
    tab = check_table(table, xs.shape[2])
    pos, offset = check_positions(positions, xs.shape[:2], tab.shape[0], variant, padding_idx)
    backend = check_backend(backend)
    if backend == "numpy":
        return numpy_twin.lookup(xs, pos, tab, offset)
    return _kernels(backend).lookup(xs, pos, tab, offset)


def _kernels(backend):
    """The kernel module of a Numba backend, imported on first use (importing reference.learned
    compiles nothing and never imports numba.cuda)."""
    if backend == "cpu":
        from . import cpu_kernels  # numba start-up: imported on first use

        return cpu_kernels
    from . import cuda_kernels  # numba start-up: imported on first use

    return cuda_kernels
