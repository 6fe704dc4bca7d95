"""RoBERTa style: position ids from the padding mask as ``create_position_ids_from_input_ids``
builds them, then a functional embedding lookup (``F.embedding``) added to x.

Hugging Face RoBERTa (after fairseq's ``make_positions``) numbers real tokens from
padding_idx + 1 and gives padding tokens padding_idx::

    mask = input_ids.ne(padding_idx)
    incremental = (torch.cumsum(mask, dim=1) + past_key_values_length) * mask
    position_ids = incremental + padding_idx

Here the 0-based positions of the real tokens are given (the cumulative count minus one, past
tokens included) and padding is marked -1, so ``incremental`` is ``(positions + 1) * mask``. For
BERT / GPT-2 (variant "absolute") the position ids are the positions themselves. F.embedding
raises an IndexError for any id outside the table: the length wall.
"""

import torch.nn.functional as F


def create_position_ids(positions, padding_idx):
    mask = positions.ne(-1).long()
    if bool((positions < -1).any()):
        raise ValueError("positions: only -1 (padding) may be negative")
    return (positions + 1) * mask + padding_idx


def lookup(x, positions, table, spec):
    if spec.variant == "roberta":
        ids = create_position_ids(positions, spec.padding_idx)
    else:
        ids = positions
    return x + F.embedding(ids, table)
