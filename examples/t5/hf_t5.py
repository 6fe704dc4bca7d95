"""T5's relative position buckets as Hugging Face's ``T5Attention._relative_position_bucket``
computes them (float32 log), written for the protocol.

Adapter: ``bucket`` (t5.bucket).
"""

import math

import torch


def bucket(relative_positions, spec, log_dtype=torch.float32, sign=1, bidirectional=None, num_buckets=None,
           clamp=True):
    r = sign * relative_positions
    bidirectional = spec.bidirectional if bidirectional is None else bidirectional
    num_buckets = spec.num_buckets if num_buckets is None else num_buckets
    out = torch.zeros_like(r)
    if bidirectional:
        num_buckets //= 2
        out += (r > 0).to(torch.long) * num_buckets
        r = torch.abs(r)
    else:
        r = -torch.min(r, torch.zeros_like(r))
    max_exact = num_buckets // 2
    is_small = r < max_exact
    large = max_exact + (
        torch.log(r.to(log_dtype) / max_exact) / math.log(spec.max_distance / max_exact) * (num_buckets - max_exact)
    ).to(torch.long)
    if clamp:  # distances past max_distance share the last bucket
        large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return out + torch.where(is_small, r, large)
