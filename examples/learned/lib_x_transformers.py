"""lucidrains' x-transformers ``AbsolutePositionalEmbedding`` (x_transformers.x_transformers), added
to x as its ``TransformerWrapper`` adds it (``x = token_emb + pos_emb(x, pos=pos)``). Graded at
x-transformers 2.31.10.

The module looks the positions up in an ``nn.Embedding(max_seq_len, dim)`` (row = position:
variant "absolute"; a position outside the table raises) and multiplies the rows by a fixed
dim^-0.5. A trained checkpoint's effective table is weight * dim^-0.5; the adapter loads the
case's table as the weight and sets that factor (the module's plain ``scale`` attribute) to 1, so
the table graded is the effective one and the lookup and the addition are the library's. RoBERTa's
offset rows are not what the module reads: Unsupported.

Adapter: ``lookup`` (learned.lookup). Needs ``x-transformers`` (the ``test`` extra); the tests skip
without it.
"""

import torch
from x_transformers.x_transformers import AbsolutePositionalEmbedding

from conformance import Unsupported

LIBRARY = "x-transformers"
SURVEY = [("learned.lookup", "lookup")]
SURVEY_NOTES = {"learned.lookup": "AbsolutePositionalEmbedding reads row = position: the RoBERTa-variant cases are "
                                  "unsupported."}


def lookup(x, positions, table, spec):
    if spec.variant != "absolute":
        raise Unsupported("AbsolutePositionalEmbedding reads row = position (variant absolute) only")
    module = AbsolutePositionalEmbedding(spec.d_model, spec.num_positions).to(device=x.device, dtype=x.dtype)
    module.scale = 1.0  # the fixed dim^-0.5 is folded into the graded (effective) table
    with torch.no_grad():
        module.emb.weight.copy_(table)
        return x + module(x, pos=positions)
