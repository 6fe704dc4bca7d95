"""An attention layer around ``torch.nn.functional.scaled_dot_product_attention``, as users write
one: nn.Linear-style projections, RoPE on q and k (HF rotate_half, float32 tables; YaRN's
frequencies and attention factor as HF's ``_compute_yarn_parameters``), or an additive bias
(ALiBi, KERPLE, FIRE's MLP, T5's bucketed table; computed in float32 and passed, with the causal
and padding masks, as SDPA's additive attn_mask), or no encoding; the KV cache concatenated in
front; GQA by repeating kv heads (HF repeat_kv); o_proj.

Adapter: ``forward`` (attention.forward).
"""

import math

import torch
import torch.nn.functional as F

from conformance import Unsupported


def yarn_inv_freq(dim, base, scaling):
    """HF's _compute_yarn_parameters: blend interpolated and extrapolated frequencies by a ramp."""
    factor, old = scaling["factor"], scaling["original_max_position_embeddings"]
    beta_fast, beta_slow = scaling.get("beta_fast", 32), scaling.get("beta_slow", 1)
    attention_factor = scaling.get("attention_factor") or (0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0)

    def correction_dim(rotations):
        return (dim * math.log(old / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if scaling.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    extrapolation_factor = 1 - ramp
    inv_freq = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor
    return inv_freq, attention_factor


def rope_tables(positions, spec):
    """cos, sin [b, s, rotary_dim] in float32 (attention factor included), as HF's rotary embedding."""
    dim = spec.rotary_dim
    scaling = dict(spec.scaling or {})
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "default":
        inv_freq, factor = 1.0 / (spec.base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)), 1.0
    elif kind == "yarn":
        inv_freq, factor = yarn_inv_freq(dim, spec.base, scaling)
    else:
        raise Unsupported(f"rope_type {kind!r} is not implemented by this example")
    freqs = positions[..., None].float() * inv_freq.to(positions.device)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * factor, emb.sin() * factor


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x, cos, sin, spec):
    """x [b, h, s, d]; cos, sin [b, s, r]: the first r features turn, the rest pass through."""
    r = spec.rotary_dim
    cos, sin = cos[:, None].to(x.dtype), sin[:, None].to(x.dtype)
    rot, rest = x[..., :r], x[..., r:]
    return torch.cat((rot * cos + rotate_half(rot) * sin, rest), dim=-1)


def alibi_slopes(n):
    def power_of_2(c):
        start = 2 ** (-(2 ** -(math.log2(c) - 3)))
        return [start * start**i for i in range(c)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    c = 2 ** math.floor(math.log2(n))
    return power_of_2(c) + alibi_slopes(2 * c)[0::2][: n - c]


def repeat_kv(x, groups):
    return x if groups == 1 else x.repeat_interleave(groups, dim=1)


def allowed_keys(b, s, past, spec, device):
    """bool [b, 1, s, past + s]: causal (key slot <= past + query index) and not padding."""
    K = past + s
    allowed = torch.ones(b, 1, s, K, dtype=torch.bool, device=device)
    if spec.causal:
        slot = torch.arange(K, device=device)
        allowed = allowed & (slot[None, :] <= past + torch.arange(s, device=device)[:, None])
    if spec.attention_mask is not None:
        allowed = allowed & spec.attention_mask[:, None, None, :]
    return allowed


def kerple_bias(dist, spec):
    """[b, h, s, K]: -r1 log(1 + r2 |i - j|) or -r1 |i - j|^r2 (KERPLE's Megatron code, with its clamps)."""
    r1 = torch.tensor(spec.kerple_r1, dtype=torch.float32, device=dist.device).clamp(min=1e-2)[None, :, None, None]
    r2 = torch.tensor(spec.kerple_r2, dtype=torch.float32, device=dist.device).clamp(min=1e-2)
    if spec.kerple_variant == "power":
        r2 = r2.clamp(max=2.0)
    r2 = r2[None, :, None, None]
    n = dist.abs()[:, None]
    return -r1 * torch.log(1 + r2 * n) if spec.kerple_variant == "log" else -r1 * n.pow(r2)


def fire_bias(q_positions, k_positions, weights):
    """[b, h, s, K]: FIRE's MLP of log(|c (i - j)| + 1) / (log(|c max(i, L)| + 1) + eps), L = |L_mult 512|."""
    w = {n: weights[n].float() for n in ("c", "L_multiplier", "W1", "b1", "W2", "b2")}
    psi = lambda x: torch.log(torch.abs(w["c"] * x) + 1)  # noqa: E731
    L = torch.abs(w["L_multiplier"] * 512.0)
    rel = (q_positions[:, :, None] - k_positions[:, None, :]).float()
    norm = psi(torch.maximum(q_positions.float(), L)) + 1e-6
    x = (psi(rel) / norm[:, :, None])[..., None]  # [b, s, K, 1]
    hidden = torch.relu(F.linear(x, w["W1"], w["b1"]))
    return F.linear(hidden, w["W2"], w["b2"]).permute(0, 3, 1, 2)


def t5_bucket(relative, spec):
    """HF T5Attention._relative_position_bucket (bidirectional when not causal)."""
    buckets, bidirectional = spec.num_buckets, not spec.causal
    out = torch.zeros_like(relative)
    if bidirectional:
        buckets //= 2
        out += (relative > 0).to(torch.long) * buckets
        n = relative.abs()
    else:
        n = -torch.clamp(relative, max=0)
    max_exact = buckets // 2
    large = max_exact + (torch.log(n.float() / max_exact) / math.log(spec.max_distance / max_exact)
                         * (buckets - max_exact)).to(torch.long)
    large = torch.clamp(large, max=buckets - 1)
    return out + torch.where(n < max_exact, n, large)


def t5_bias(q_positions, k_positions, weights, spec):
    """[b, h, s, K]: rel_bias[bucket(j - i)], the table as HF's relative_attention_bias embedding."""
    rel = k_positions[:, None, :] - q_positions[:, :, None]
    return F.embedding(t5_bucket(rel, spec), weights["rel_bias"]).permute(0, 3, 1, 2).float()


def additive_mask(allowed, q_positions, k_positions, spec, dtype, weights=None):
    """0 / -inf from ``allowed``, plus the encoding's bias: ALiBi -m_h (p_i - p_j) (|p_i - p_j| if
    not causal), KERPLE, FIRE or T5 (these two read their learned weights from ``weights``)."""
    mask = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, float("-inf"))
    dist = (q_positions[:, :, None] - k_positions[:, None, :]).float()
    if spec.encoding == "alibi":
        m = torch.tensor(alibi_slopes(spec.num_heads), dtype=torch.float32, device=allowed.device)
        dist = dist if spec.causal else dist.abs()
        mask = mask + (-m[None, :, None, None] * dist[:, None]).to(dtype)
    elif spec.encoding == "kerple":
        mask = mask + kerple_bias(dist, spec).to(dtype)
    elif spec.encoding in ("fire", "t5"):
        if weights is None:
            raise Unsupported(f"the {spec.encoding} bias needs its learned weights")
        bias = fire_bias(q_positions, k_positions, weights) if spec.encoding == "fire" else \
            t5_bias(q_positions, k_positions, weights, spec)
        mask = mask + bias.to(dtype)
    return mask


def project(hidden, weights, spec):
    """q [b, hq, s, d], k, v [b, hkv, s, d]."""
    b, s, _ = hidden.shape
    hq, hkv, d = spec.num_heads, spec.num_kv_heads, spec.head_dim
    q = F.linear(hidden, weights["wq"]).view(b, s, hq, d).transpose(1, 2)
    k = F.linear(hidden, weights["wk"]).view(b, s, hkv, d).transpose(1, 2)
    v = F.linear(hidden, weights["wv"]).view(b, s, hkv, d).transpose(1, 2)
    return q, k, v


def encode(q, k, positions, spec):
    if spec.encoding != "rope":
        return q, k
    if spec.layout != "half":
        raise Unsupported("rotate_half pairs (j, j + r/2): half layout only")
    cos, sin = rope_tables(positions, spec)
    return apply_rope(q, cos, sin, spec), apply_rope(k, cos, sin, spec)


def with_cache(k, v, spec):
    if spec.past_keys is None:
        return k, v, 0
    return torch.cat((spec.past_keys, k), dim=2), torch.cat((spec.past_values, v), dim=2), spec.past_keys.shape[2]


def output(q, k, v, mask, weights, spec, scale=None):
    b, hq, s, d = q.shape
    groups = hq // spec.num_kv_heads
    scale = spec.scale if scale is None else scale  # T5's layer is unscaled: SDPA's default would be wrong
    out = F.scaled_dot_product_attention(q, repeat_kv(k, groups), repeat_kv(v, groups), attn_mask=mask, scale=scale)
    return F.linear(out.transpose(1, 2).reshape(b, s, hq * d), weights["wo"])


def forward(hidden, weights, positions, spec, scale=None):
    """The layer; ``scale`` replaces spec.scale (for the buggy examples beside this file)."""
    b, s, _ = hidden.shape
    q, k, v = project(hidden, weights, spec)
    q, k = encode(q, k, positions, spec)
    k, v, past = with_cache(k, v, spec)
    k_positions = torch.cat((torch.arange(past, device=positions.device).expand(b, past), positions), dim=1)
    allowed = allowed_keys(b, s, past, spec, hidden.device)
    return output(q, k, v, additive_mask(allowed, positions, k_positions, spec, q.dtype, weights), weights, spec,
                  scale)
