"""Dynamic NTK scaling: the NTK-aware base recomputed from the current sequence length.

b' = b * (factor * l / L - (factor - 1))**(r / (r - 2)) with l = max(seq_len, L), L the original
context (``original_max_position_embeddings``): nothing changes for seq_len <= L, and the map is
continuous at L. Source: HF ``_compute_dynamic_ntk_parameters`` and jquesnelle/yarn
``LlamaDynamicScaledRotaryEmbedding`` (the YaRN paper's section 3.3 states s = max(1, l / L),
which equals this scale only for factor 1). seq_len None means l = L. Attention factor 1.
"""

import mpmath

from ._params import at_least_one, length
from .ntk import ntk_ratio

REQUIRED = {"factor": at_least_one, "original_max_position_embeddings": length}
OPTIONAL = {}
SOURCE = "https://github.com/huggingface/transformers/blob/main/src/transformers/modeling_rope_utils.py"


def frequencies(theta, r, base, params, seq_len):
    big_l = params["original_max_position_embeddings"]
    ell = max(int(seq_len or 0), big_l)
    s = mpmath.mpf(params["factor"])
    scale = s * ell / big_l - (s - 1)
    return [t * q for t, q in zip(theta, ntk_ratio(scale, r))], mpmath.mpf(1)
