"""reference.xpos: xPos (Sun et al., "A Length-Extrapolatable Transformer", arXiv 2212.10554) in
float64: RoPE whose pairs are also scaled, the query up and the key down, so that the logit
factor decays with the distance.

    zeta_i = (2i + gamma r) / ((1 + gamma) r),  i = 0..r/2-1,  gamma = 0.4
    q at position m:  zeta_i^((m - c) / B) R_m q,    k at position n:  zeta_i^(-(n - c) / B) R_n k

with B = ``scale_base`` = 512 and a centring c common to q and k. Interleaved pairs by default
(torchscale, rotary-embedding-torch). The logit factor per pair is zeta_i^((m - n) / B): it depends
on m - n only, whatever c, and is below 1 for m > n. Implementations centre differently
(torchscale: c = (L + offset) // 2; rotary-embedding-torch: c = len // 2); the reference's default
is c = 0. Never imports torch.

API: ``zeta(rotary_dim, gamma)``, ``apply(q, k, positions, *, rotary_dim, base, layout, scale_base,
gamma, centre, backend, mode) -> (q_out, k_out)``.
"""

from .core import apply, scale_exponent, zeta

__all__ = ["apply", "scale_exponent", "zeta"]
