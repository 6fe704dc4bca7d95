"""Training style: the position table is a trainable parameter read with ``F.embedding``, as
``nn.Embedding`` does in a model being trained (GPT-2's ``wpe``, BERT's ``position_embeddings``,
RoBERTa's with ``padding_idx``), no ``torch.no_grad``: gradients reach x and the table.

For RoBERTa (variant "roberta") the lookup passes ``padding_idx`` as HF's
``RobertaEmbeddings.position_embeddings = nn.Embedding(..., padding_idx=pad)`` does, so the
padding row's gradient stays 0 (posref accepts that convention and notes it). Real tokens at
0-based position p read row p + padding_idx + 1, padding tokens (marked -1) row padding_idx.
F.embedding raises an IndexError for any row outside the table: the length wall.
"""

import torch.nn.functional as F


def position_ids(positions, spec):
    if spec.variant == "absolute":
        return positions
    if bool((positions < -1).any()):
        raise ValueError("positions: negative positions other than the padding marker -1")
    return (positions + spec.padding_idx + 1).masked_fill(positions.eq(-1), spec.padding_idx)


def lookup(x, positions, table, spec):
    pad = spec.padding_idx if spec.variant == "roberta" else None
    return x + F.embedding(position_ids(positions, spec), table, padding_idx=pad)
