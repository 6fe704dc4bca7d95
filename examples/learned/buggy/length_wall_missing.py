"""Bug: positions past the table are clamped to its last row instead of raising.

A common "fix" for ``IndexError: index out of range in self`` on long prompts:
``position_ids.clamp(max=num_positions - 1)``. Every token past the wall silently gets the last
row's embedding, so the model runs on with wrong positions (the hard length wall of learned
tables, docs/design.md).

Adapter: lookup.
Expected diagnosis: ``length-wall-missing`` on the wall cases (and the black-box length-wall
check: "clamped to the table's edge").
"""

import torch.nn.functional as F

# What posref must report for this file, graded as <file>:lookup on the learned.lookup catalog
# (tests/test_family_contract.py checks it).
CODE = "length-wall-missing"
PROTOCOL = "learned.lookup"


def lookup(x, positions, table, spec):
    if spec.variant == "roberta":
        ids = (positions + 1) * positions.ne(-1).long() + spec.padding_idx
    else:
        ids = positions
    ids = ids.clamp(0, spec.num_positions - 1)  # BUG: no error past the wall
    return x + F.embedding(ids, table)
