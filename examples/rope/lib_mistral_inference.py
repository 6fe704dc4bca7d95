"""mistral-inference's RoPE, ``precompute_freqs_cis`` + ``apply_rotary_emb`` (mistral_inference.rope),
graded as its ``Transformer`` uses them: a dense complex64 table ``precompute_freqs_cis(head_dim,
end, rope_theta)`` indexed at the tokens' positions, and ``apply_rotary_emb(xq, xk, freqs_cis)`` on
tokens flattened to [tokens, heads, head_dim]. Graded at mistral_inference 1.6.0.

Installed with ``pip install --no-deps mistral_inference`` (its dependencies pull xformers and
another numpy); ``mistral_inference.rope`` needs only torch, so it is imported as its users import
it (the package's model modules need simple_parsing / xformers and are not imported).

The table is theta_i = 1 / theta ** (arange(0, d, 2) / d) in float32, angles outer(arange(end),
theta) in float32, ``torch.polar`` to complex64; the rotation multiplies the pairs (2i, 2i+1) as
complex numbers in float32 and casts back: interleaved layout, the whole head, no scaling (the
library has only rope_theta). The table is dense up to the largest position: past LIMIT positions
(2^18: 128 MiB at head_dim 128) the adapter raises Unsupported rather than allocate it.

Adapters: ``apply`` (rope.apply: x as its xq), ``apply_qk`` (rope.apply_qk). Needs
``mistral_inference`` (pip install --no-deps); the tests skip without it.
"""

from mistral_inference.rope import apply_rotary_emb, precompute_freqs_cis

from conformance import Unsupported

LIBRARY = "mistral_inference"
SURVEY = [("rope.apply", "apply"), ("rope.apply_qk", "apply_qk")]
SURVEY_NOTES = {
    "rope.apply": "mistral-inference rotates pairs (2i, 2i+1) of the whole head with no scaling, from a dense table: "
                  "the half-layout, partial, scaled and past-2^18-position cases are unsupported.",
    "rope.apply_qk": "mistral-inference rotates pairs (2i, 2i+1) of the whole head with no scaling: the other cases "
                     "are unsupported.",
}

LIMIT = 1 << 18  # positions the dense table may hold here


def _freqs(positions, spec):
    if spec.layout != "interleaved":
        raise Unsupported("mistral-inference rotates pairs (2i, 2i+1): interleaved layout only")
    if spec.rotary_dim != spec.head_dim:
        raise Unsupported("mistral-inference rotates the whole head only")
    if spec.scaling:
        raise Unsupported("mistral-inference has rope_theta only, no scaling")
    if getattr(spec, "tensor_layout", "bshd") != "bshd":
        raise Unsupported("x [batch, seq, heads, head_dim] only")
    end = int(positions.max()) + 1 if positions.numel() else 1
    if end > LIMIT:
        raise Unsupported(f"mistral-inference's dense table would need {end} rows (more than 2^18)")
    table = precompute_freqs_cis(spec.head_dim, end, spec.base).to(positions.device)
    return table[positions.reshape(-1)]  # [tokens, d/2], as Transformer.forward indexes it


def apply_qk(q, k, positions, spec):
    freqs = _freqs(positions, spec)
    b, s = q.shape[:2]
    q_out, k_out = apply_rotary_emb(q.reshape(b * s, *q.shape[2:]), k.reshape(b * s, *k.shape[2:]), freqs)
    return q_out.reshape(q.shape), k_out.reshape(k.shape)


def apply(x, positions, spec):
    return apply_qk(x, x, positions, spec)[0]
