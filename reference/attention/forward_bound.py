"""The fast forward's error bound (``reference.attention.fast_bound``), a module of its own because it
is built from the backward's forward factors (backward.forward_factors, whose derivation it shares)
and backward.py imports core.py: here both are imported at the top, with no cycle."""

from __future__ import annotations

import numpy as np

from .backward import U, _bias_error, _stages, forward_factors, gamma
from .core import check_config


def fast_bound(hidden, weights, positions, config, *, attention_mask=None, past_keys=None,
               past_values=None) -> np.ndarray:
    """float64 [b, s, D]: the bound on |forward(mode="fast") - exact| per element, every backend:
    rho N + u |out| + 2^-1074 with N = (sum_j P_hij |v_gj|) |W_o|^T the output evaluated on
    magnitudes (|v| <= |X| |W_v|^T, the cache as |past|) and rho = (1 + r_o)(1 + gamma(hq d) + u) - 1,
    r_o the relative factor of o = P v from backward.forward_factors (projections gamma(D) + u,
    RoPE's per-pair bound, the logits' absolute error E_z amplified by exp: expm1(2 max E_z), exp
    and the softmax sums, the weighted sum gamma(n) + u), then the output projection's hq d terms.

    The error is not a few ulps of max|out|: a logit z carries an absolute error of order u |q| |k|
    / sqrt(d), which exp turns into a relative error of the weights, and the output projection may
    cancel (|out| << N). Measured (tests/attention/test_attention_audit.py): with the tests' uniform
    weights, 4.6 (cpu) and 11 to 17 (numpy) u max|out| once the logits reach about 10; the bound
    holds with room to spare."""
    st = _stages(hidden, weights, positions, config, attention_mask, past_keys, past_values)
    c = check_config(config)
    X, W = np.abs(st["X"]), st["W"]
    b, s, D = X.shape
    hq, hkv, d = c.num_heads, c.num_kv_heads, c.head_dim
    P = st["keys"].shape[1] - s
    mv = (X @ np.abs(W["wv"]).T).reshape(b, s, hkv, d)
    mvals = np.concatenate([np.abs(st["values"][:, :P]), mv], axis=1)[:, :, np.arange(hq) // c.group]
    mo = np.einsum("bhij,bjhe->bihe", st["p"], mvals).reshape(b, s, hq * d)
    N = mo @ np.abs(W["wo"]).T
    *_, r_o = forward_factors(st, c, u=U, a=U, t=U, angle=U, bias_error=_bias_error(st, c, U))
    rho = (1.0 + r_o) * (1.0 + gamma(hq * d, U) + U) - 1.0
    return rho * N + U * np.abs(st["out"]) + 2.0**-1074
