"""Bug: RoBERTa's position ids built the BERT way, without padding_idx + 1.

A RoBERTa port that reuses BERT's ``position_ids = arange(seq_len)`` for the real tokens (and
only sends padding to row padding_idx): the first real token reads row 0 instead of row 2, every
real token two rows early.

Adapter: lookup.
Expected diagnosis: ``position-offset`` ("rows shifted by -2: RoBERTa's padding_idx + 1 = 2 is
missing"); RoBERTa's wall case at position 512 also returns a value (row 512 exists), which
gives ``length-wall-missing`` there.
"""

import torch.nn.functional as F

# What posref must report for this file, graded as <file>:lookup on the learned.lookup catalog
# (tests/test_family_contract.py checks it).
CODE = "position-offset"
PROTOCOL = "learned.lookup"


def lookup(x, positions, table, spec):
    ids = positions
    if spec.variant == "roberta":
        ids = positions.masked_fill(positions.eq(-1), spec.padding_idx)  # BUG: no + padding_idx + 1
    return x + F.embedding(ids, table)
