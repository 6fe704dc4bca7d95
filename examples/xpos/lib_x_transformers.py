"""lucidrains' x-transformers xPos, ``RotaryEmbedding(dim, use_xpos=True, scale_base)`` +
``apply_rotary_pos_emb`` (x_transformers.x_transformers), as its ``Attention`` layer uses them:
q rotated and scaled by the module's scale, k by its reciprocal. Graded at x-transformers 2.31.10.

The module builds theta_i = base^(-2i/r) and zeta_i = (2i + 0.4 r) / (1.4 r) in float32 (gamma is
fixed at 0.4), the angles at the given positions (any, per batch row), interleaved pairs
(2i, 2i+1), the first r features rotated (partial rotary), and the scale zeta_i^((m - c) / B)
with the centring c = (max position + 1) // 2 common to the call.

Adapter: ``apply`` (xpos.apply). Needs ``x-transformers`` (the ``test`` extra); the tests skip
without it.
"""

from x_transformers.x_transformers import RotaryEmbedding, apply_rotary_pos_emb

from conformance import Unsupported

LIBRARY = "x-transformers"
SURVEY = [("xpos.apply", "apply")]
SURVEY_NOTES = {"xpos.apply": "x-transformers rotates pairs (2i, 2i+1) with gamma fixed at 0.4: the half-layout "
                              "and other-gamma cases are unsupported."}


def apply(q, k, positions, spec):
    if spec.layout != "interleaved":
        raise Unsupported("x-transformers pairs (2i, 2i+1): interleaved layout only")
    if spec.gamma != 0.4:
        raise Unsupported("x-transformers fixes xPos's gamma at 0.4")
    if spec.rotary_dim < 4:
        raise Unsupported("x-transformers cannot be built with dim 2 (its NTK rescaling divides by dim - 2)")
    rotary = RotaryEmbedding(spec.rotary_dim, use_xpos=True, scale_base=spec.scale_base, base=spec.base)
    rotary = rotary.to(q.device)
    freqs, scale = rotary(positions)  # [b, s, r] each
    q_out = apply_rotary_pos_emb(q.transpose(1, 2), freqs, scale)  # the library wants [b, h, s, d]
    k_out = apply_rotary_pos_emb(k.transpose(1, 2), freqs, scale ** -1)
    return q_out.transpose(1, 2), k_out.transpose(1, 2)
