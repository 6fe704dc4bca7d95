"""GPT-2 / BERT style: the position table as an ``nn.Embedding`` module, added to x.

This is how Hugging Face ``GPT2Model`` (``self.wpe = nn.Embedding(max_position_embeddings,
embed_dim)``, ``hidden_states = inputs_embeds + self.wpe(position_ids)``) and ``BertEmbeddings``
(``position_embeddings``) add learned absolute positions: an embedding lookup of the position ids,
then one addition in the model dtype. The given table is loaded into the module
(``nn.Embedding.from_pretrained``). nn.Embedding raises an IndexError for an id outside
[0, num_positions), so the length wall comes for free.

RoBERTa's position ids (variant "roberta") are built as in RoBERTa: a real token at 0-based
position p reads row p + padding_idx + 1, a padding token (marked -1) reads row padding_idx.
"""

import torch
from torch import nn


def position_ids(positions, spec):
    """The rows the model's embedding reads."""
    if spec.variant == "absolute":
        return positions
    if spec.variant == "roberta":
        if bool((positions < -1).any()):
            raise ValueError("positions: negative positions other than the padding marker -1")
        pad = positions.eq(-1)
        return (positions + spec.padding_idx + 1).masked_fill(pad, spec.padding_idx)
    raise ValueError(f"unknown variant {spec.variant!r}")


def lookup(x, positions, table, spec):
    wpe = nn.Embedding.from_pretrained(table, freeze=True)  # keeps the table's dtype and device
    with torch.no_grad():
        return x + wpe(position_ids(positions, spec))
