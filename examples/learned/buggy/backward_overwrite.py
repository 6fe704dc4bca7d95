"""Bug: a hand-written lookup whose backward scatters the cotangent into the table's gradient by
assignment (``grad_table[ids] = g``) instead of accumulating it (``index_add_`` /
``index_put_(..., accumulate=True)``): a row read by several tokens (the same position in several
batch rows) keeps one token's gradient instead of their sum. The forward and x's gradient are
right; rows read once are right too.

Expected diagnosis under --grad: ``backward-overwrite`` (learned's family code).
"""

import torch

from conformance import Unsupported

# What posref must report for this file, graded as <file>:lookup on the learned.lookup catalog
# with --grad (tests/test_family_contract.py checks it).
CODE = "backward-overwrite"
PROTOCOL = "learned.lookup"
OPTIONS = {"grad": True, "cases": "learned.lookup/bert-base/*", "fresh": False}


class Lookup(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, ids, table):
        ctx.save_for_backward(ids)
        ctx.num_rows = table.shape[0]
        return x + table[ids]

    @staticmethod
    def backward(ctx, grad):
        (ids,) = ctx.saved_tensors
        grad_table = grad.new_zeros((ctx.num_rows, grad.shape[-1]))
        # BUG: assignment, not accumulation (needs grad_table.index_add_(0, ids.flatten(), ...)).
        grad_table[ids.reshape(-1)] = grad.reshape(-1, grad.shape[-1])
        return grad, None, grad_table


def lookup(x, positions, table, spec):
    if spec.variant != "absolute":
        raise Unsupported("variant: absolute only")
    if bool((positions < 0).any()) or bool((positions >= spec.num_positions).any()):
        raise IndexError("positions: outside the table")
    return Lookup.apply(x, positions, table)
