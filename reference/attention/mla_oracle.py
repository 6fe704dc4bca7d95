"""mpmath oracle of MLA's attention (attention.mla), written apart from mla.py for certification.

A second reading of the formula in another form: the rope features turned as the complex product
(a + i b) e^(i m theta) f (RoFormer, arXiv 2104.09864, eq. 12) with frequencies and attention
factor from reference.numerics.scaling_oracle (itself written apart from scaling/), the logit as
the sum of its two parts (q_nope . k_nope + q_pe' . k_pe') times the scale written out from
DeepSeek's yarn_get_mscale (1 + mscale_all_dim ln(s) / 10)^2 / sqrt(d_nope + d_rope), and the
softmax as exp(z - logsumexp(z)). Returns object arrays of mpf at the caller's precision.
"""

from __future__ import annotations

import mpmath
import numpy as np

from reference.attention.oracle import _rotate
from reference.numerics.scaling_oracle import exact as scaling_exact


def scale_exact(params):
    """The logit scale of a case's parameters (d_nope, d_rope, scaling), as an mpf."""
    sc = params.get("scaling") or {}
    kind = sc.get("rope_type") or sc.get("type") or "default"
    c = 1 / mpmath.sqrt(int(params["d_nope"]) + int(params["d_rope"]))
    all_dim = sc.get("mscale_all_dim") or 0
    if kind != "default" and all_dim and float(sc["factor"]) > 1:
        c *= (1 + mpmath.mpf(float(all_dim)) * mpmath.log(mpmath.mpf(float(sc["factor"]))) / 10) ** 2
    return c


def forward_exact(q_nope, q_pe, k_nope, k_pe, v, positions, params):
    """object [b, s, h, d_v] of mpf: the exact output."""
    r = int(params["d_rope"])
    layout = params.get("layout", "interleaved")
    freqs, factor = scaling_exact(params.get("scaling"), r, float(params["base"]), None)
    c = scale_exact(params)
    causal = bool(params["causal"])
    mp = np.vectorize(lambda x: mpmath.mpf(float(x)), otypes=[object])
    qn, qp, kn, kp, vv = (mp(np.asarray(a, dtype=np.float64)) for a in (q_nope, q_pe, k_nope, k_pe, v))
    b, s, h, dv = vv.shape
    out = np.empty((b, s, h, dv), dtype=object)
    for bi in range(b):
        pos = [int(p) for p in positions[bi]]
        kr = [_rotate(list(kp[bi, j, 0]), pos[j], freqs, factor, r, layout) for j in range(s)]
        for hh in range(h):
            for i in range(s):
                qr = _rotate(list(qp[bi, i, hh]), pos[i], freqs, factor, r, layout)
                seen = [j for j in range(s) if not causal or j <= i]
                z = [(mpmath.fsum(x * y for x, y in zip(qn[bi, i, hh], kn[bi, j, hh]))
                      + mpmath.fsum(x * y for x, y in zip(qr, kr[j]))) * c for j in seen]
                lse = mpmath.log(mpmath.fsum(mpmath.exp(t) for t in z))
                w = [mpmath.exp(t - lse) for t in z]
                for e in range(dv):
                    out[bi, i, hh, e] = mpmath.fsum(wj * vv[bi, j, hh, e] for wj, j in zip(w, seen))
    return out
