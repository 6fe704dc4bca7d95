"""Independent mpmath formulas of the RoPE scaling types, for certifying golden values.

Written apart from scaling/ on purpose (a second reading of the same sources, in another form):
each type is stated here through the scaled *base* or the *wavelength* where the sources do, so a
slip in one implementation shows up as a certification failure. Sources: see scaling/<type>.py.
Returns (theta' list of mpf, attention factor mpf) at the current mpmath precision.
"""

from __future__ import annotations

import mpmath


def _ladder(base, r):
    return [base ** (-mpmath.mpf(2 * i) / r) for i in range(r // 2)]


def _ntk_base(base, scale, r):
    return base * scale ** (mpmath.mpf(r) / (r - 2))


def _mscale(s, m=1):
    return 1 + mpmath.mpf(m) * mpmath.log(s) / 10 if s > 1 else mpmath.mpf(1)


def exact(scaling, rotary_dim, base, seq_len):
    r = int(rotary_dim)
    b = mpmath.mpf(float(base))
    p = {k: v for k, v in dict(scaling or {}).items() if k not in ("rope_type", "type")}
    kind = (scaling or {}).get("rope_type") or (scaling or {}).get("type") or "default"
    one = mpmath.mpf(1)
    n = int(seq_len or 0)
    if kind == "default":
        return _ladder(b, r), one
    if kind == "linear":
        return [t / mpmath.mpf(p["factor"]) for t in _ladder(b, r)], one
    if kind == "ntk":
        return _ladder(_ntk_base(b, mpmath.mpf(p["factor"]), r), r), one
    big_l = p["original_max_position_embeddings"]
    if kind == "dynamic":
        s = mpmath.mpf(p["factor"])
        ell = max(n, big_l)
        return _ladder(_ntk_base(b, s * ell / big_l - s + 1, r), r), one
    if kind == "length":
        shrink = mpmath.mpf(big_l) / n if n > big_l else one
        return [t * shrink for t in _ladder(b, r)], one
    if kind == "llama3":
        s = mpmath.mpf(p["factor"])
        lo, hi = mpmath.mpf(p["low_freq_factor"]), mpmath.mpf(p["high_freq_factor"])
        out = []
        for t in _ladder(b, r):
            ratio = big_l * t / (2 * mpmath.pi)  # L / wavelength
            if ratio > hi:
                out.append(t)
            elif ratio < lo:
                out.append(t / s)
            else:
                w = (ratio - lo) / (hi - lo)
                out.append(t * (w + (1 - w) / s))
        return out, one
    if kind == "yarn":
        s = mpmath.mpf(p["factor"])

        def dim_of(n_rot):  # solves 2 pi b**(2i/r) = L / n_rot for i
            return mpmath.log(big_l / (2 * mpmath.pi * n_rot)) / mpmath.log(b) * r / 2

        lo, hi = dim_of(mpmath.mpf(p.get("beta_fast", 32))), dim_of(mpmath.mpf(p.get("beta_slow", 1)))
        if p.get("truncate", True):
            lo, hi = mpmath.floor(lo), mpmath.ceil(hi)
        lo, hi = max(lo, mpmath.mpf(0)), min(hi, mpmath.mpf(r - 1))  # mpf: int / int is a float
        hi = hi + mpmath.mpf("0.001") if hi == lo else hi
        thetas = [t * (1 - (1 - 1 / s) * min(1, max(0, (i - lo) / (hi - lo))))
                  for i, t in enumerate(_ladder(b, r))]
        if "attention_factor" in p:
            factor = mpmath.mpf(p["attention_factor"])
        elif p.get("mscale") and p.get("mscale_all_dim"):  # both given and non-zero, as HF tests
            factor = _mscale(s, p["mscale"]) / _mscale(s, p["mscale_all_dim"])
        else:
            factor = _mscale(s)
        return thetas, factor
    if kind == "longrope":
        ext = p["long_factor"] if n > big_l else p["short_factor"]
        thetas = [t / mpmath.mpf(float(e)) for t, e in zip(_ladder(b, r), ext)]
        if "attention_factor" in p:
            return thetas, mpmath.mpf(p["attention_factor"])
        s = mpmath.mpf(p["factor"]) if "factor" in p else mpmath.mpf(p.get("max_position_embeddings", big_l)) / big_l
        return thetas, (mpmath.sqrt(1 + mpmath.log(s) / mpmath.log(big_l)) if s > 1 else one)
    raise ValueError(f"scaling: unknown rope_type {kind!r}")
