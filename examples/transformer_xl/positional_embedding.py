"""Transformer-XL's position table R as ``PositionalEmbedding`` builds it (kimiyoung/transformer-xl
pytorch/mem_transformer.py; the function is mem_transformer_style.py's, next door): inv_freq =
1 / 10000^(arange(0, d_model, 2) / d_model) in float32, R = [sin | cos] of pos_seq x inv_freq.

Graded as a sinusoidal.table (``--model transfo-xl-wt103``: the distances 0 .. clamp_len the model
feeds). The module builds only that table: 1-D, [sin | cos], exponent 2i/d at base 10000 and an
even d_model; other specs are Unsupported.

Adapter: ``table`` (sinusoidal.table).
"""

from pathlib import Path

from conformance import Unsupported
from conformance.loader import load_target

HERE = Path(__file__).resolve().parent
positional_embedding = load_target(f"{HERE / 'mem_transformer_style.py'}:positional_embedding")


def table(positions, spec):
    if (spec.dims, spec.layout, spec.exponent, spec.base) != (1, "concatenated", "2i/d", 10000.0) or spec.d_model % 2:
        raise Unsupported("Transformer-XL's PositionalEmbedding: 1-D [sin | cos], 10000^(-2c/d), even d_model only")
    return positional_embedding(positions.float(), spec.d_model)
