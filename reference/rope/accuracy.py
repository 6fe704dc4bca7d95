"""Measure the float64 RoPE reference against the mpmath oracle (oracle.py).

``measure_cos_sin`` samples configurations (rotary_dim even in [2, 256], base log-uniform in
[1e4, 1e6]) and positions (uniform, log-uniform magnitude, and powers of two +- 1, both signs,
up to ``max_position``), and returns the largest error in ulps of the exact value for each
backend and for the naive float64 path cos(fl(m * fl(theta_i))).

``measure_apply`` does the same for apply outputs, in ulps of each pair's input norm.

Run ``python -m reference.rope.accuracy [--configs N] [--max-log2 K] [--backends cpu numpy]``
to print the numbers recorded in ACCURACY.md.
"""

import argparse
import math

import mpmath
import numpy as np

from . import oracle
from .core import apply, cos_sin
from .theta import inv_freq


def sample_positions(rng, count, max_position):
    """int64 positions: a third uniform, a third log-uniform in magnitude, the rest 2**k +- 1."""
    top = int(max_position)
    uni = rng.integers(-top, top + 1, size=count // 3)
    mag = np.exp(rng.uniform(0.0, math.log(top), size=count // 3)).astype(np.int64)
    mag = np.minimum(mag, top) * rng.choice([-1, 1], size=mag.size)
    k = rng.integers(0, int(math.log2(top)) + 1, size=count - uni.size - mag.size)
    edge = (2**k + rng.integers(-1, 2, size=k.size)) * rng.choice([-1, 1], size=k.size)
    return np.clip(np.concatenate([uni, mag, edge]), -top, top).astype(np.int64)


def sample_configs(rng, count, max_dim=256):
    """``count`` (rotary_dim, base) pairs: rotary_dim even in [2, max_dim], base log-uniform in
    [1e4, 1e6]."""
    dims = 2 * rng.integers(1, max_dim // 2 + 1, size=count)
    bases = np.exp(rng.uniform(math.log(1e4), math.log(1e6), size=count))
    return [(int(d), float(b)) for d, b in zip(dims, bases)]


def measure_cos_sin(
    configs=6, positions=24, pairs=8, max_position=2**24, seed=0, backends=("cpu", "numpy")
):
    """Max error of cos and sin per backend (and "naive"), over the sampled values.

    Returns {"samples": N, "max_ulp": {backend: ...}, "max_abs_in_2^-53": {backend: ...}};
    N counts cos and sin values separately; "naive" is cos/sin(fl(m * inv_freq)).
    """
    rng = np.random.default_rng(seed)
    worst = {name: 0.0 for name in (*backends, "naive")}
    worst_abs = dict(worst)
    samples = 0
    for r, base in sample_configs(rng, configs):
        pos = sample_positions(rng, positions, max_position)
        pick = rng.choice(r // 2, size=min(pairs, r // 2), replace=False)
        ce, se = oracle.cos_sin_exact(pos, r, base)
        ce = [[row[i] for i in pick] for row in ce]
        se = [[row[i] for i in pick] for row in se]
        tables = {name: cos_sin(pos, r, base, backend=name) for name in backends}
        naive_angle = pos.astype(np.float64)[:, None] * inv_freq(r, base)
        tables["naive"] = (np.cos(naive_angle), np.sin(naive_angle))
        for name, (c, s) in tables.items():
            err_c = oracle.ulp_error(c[:, pick], ce)
            err_s = oracle.ulp_error(s[:, pick], se)
            worst[name] = max(worst[name], float(err_c.max()), float(err_s.max()))
            abs_c = oracle.abs_error(c[:, pick], ce)
            abs_s = oracle.abs_error(s[:, pick], se)
            worst_abs[name] = max(worst_abs[name], float(abs_c.max()), float(abs_s.max()))
        samples += 2 * pos.size * pick.size
    return {
        "samples": samples,
        "max_ulp": worst,
        # absolute error in units of 2**-53 (half an ulp of 1), the scale the design doc uses
        "max_abs_in_2^-53": {k: v * 2.0**53 for k, v in worst_abs.items()},
    }


def measure_apply(
    configs=3, tokens=4, heads=2, max_position=2**24, seed=1, backends=("cpu", "numpy")
):
    """Max error of apply per backend in ulps of the pair norm, with layouts and partial rotary."""
    rng = np.random.default_rng(seed)
    worst = {name: 0.0 for name in backends}
    samples = 0
    for k, (r, base) in enumerate(sample_configs(rng, configs)):
        layout = ("half", "interleaved")[k % 2]
        d = r + 2 * int(rng.integers(0, 3))
        x = rng.standard_normal((1, tokens, heads, d))
        pos = sample_positions(rng, tokens, max_position).reshape(1, tokens)
        exact = oracle.apply_exact(x, pos, rotary_dim=r, base=base, layout=layout)
        for name in backends:
            out = apply(x, pos, rotary_dim=r, base=base, layout=layout, backend=name)
            err = oracle.pair_ulp_error(out, exact, x, rotary_dim=r, layout=layout)
            worst[name] = max(worst[name], float(err.max()))
        samples += x.size
    return {"samples": samples, **worst}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=40)
    parser.add_argument("--positions", type=int, default=60)
    parser.add_argument("--pairs", type=int, default=16)
    parser.add_argument("--max-log2", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backends", nargs="+", default=["cpu", "numpy"])
    args = parser.parse_args(argv)
    with mpmath.workprec(oracle.PREC_BITS):
        cs = measure_cos_sin(
            args.configs, args.positions, args.pairs, 2**args.max_log2, args.seed, args.backends
        )
        ap = measure_apply(
            max(2, args.configs // 4), 8, 2, 2**args.max_log2, args.seed + 1, args.backends
        )
    print(f"cos/sin, |m| <= 2**{args.max_log2}: {cs}")
    print(f"apply (ulps of pair norm): {ap}")


if __name__ == "__main__":
    main()
