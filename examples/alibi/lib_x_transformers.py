"""lucidrains' x-transformers ALiBi, ``AlibiPositionalBias`` (x_transformers.x_transformers),
graded through thin adapters as a user would call it. Graded at x-transformers 2.31.10.

The module computes Press et al.'s slopes in Python floats (``_get_slopes``: the power-of-two
series 2^(-8k/n), and for another head count the series of the power of two below followed by the
even-indexed steps of the one above), stored as a float32 buffer, and
``forward_custom_pos(pos_i, pos_j)`` returns -m |j - i| [heads, sq, sk]: the symmetric form,
which on the causal entries (j <= i) is the causal -m (i - j).

Adapters: ``slopes`` (alibi.slopes: the module's buffer), ``bias`` (alibi.bias:
``forward_custom_pos`` at the case's query and key positions). Needs ``x-transformers`` (the
``test`` extra); the tests skip without it.
"""

from x_transformers.x_transformers import AlibiPositionalBias

LIBRARY = "x-transformers"
SURVEY = [("alibi.slopes", "slopes"), ("alibi.bias", "bias")]


def slopes(spec):
    return AlibiPositionalBias(heads=spec.num_heads).slopes[:, 0, 0]


def bias(q_positions, k_positions, spec):
    module = AlibiPositionalBias(heads=spec.num_heads).to(q_positions.device)
    return module.forward_custom_pos(q_positions, k_positions)  # [heads, sq, sk]
