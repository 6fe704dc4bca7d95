"""Measure the float64 RoPE reference against the mpmath oracle (oracle.py).

``measure_cos_sin`` samples configurations (rotary_dim even in [2, 256], base log-uniform in
[1e4, 1e6]) and positions (uniform, log-uniform magnitude, powers of two +- 1, both signs, up to
``max_position``, plus ``near_zero`` adversarial positions per configuration: continued-fraction
convergent denominators q of 2 theta_i / pi, where m theta_i comes closest to a multiple of
pi/2 and cos or sin nearly vanishes). It returns the largest fast-mode error in ulps of the exact
value for each backend and for the naive float64 path cos(fl(m * fl(theta_i))), and the number of
golden-mode values that differ from the nearest double.

``measure_apply`` does the same for apply outputs: fast-mode error in ulps of each pair's input
norm, golden-mode mismatches against the correctly rounded result.

Run ``python -m reference.rope.accuracy [--configs N] [--max-log2 K] [--near-zero Z]
[--backends cpu numpy]`` to print the numbers recorded in ACCURACY.md.
"""

import argparse
import math

import mpmath
import numpy as np

from reference.numerics.frequencies import inv_freq
from reference.numerics.phase import ladder
from reference.numerics.rotation import apply, cos_sin

from . import oracle


def sample_positions(rng, count, max_position):
    """int64 positions: a third uniform, a third log-uniform in magnitude, the rest 2**k +- 1."""
    top = int(max_position)
    uni = rng.integers(-top, top + 1, size=count // 3)
    mag = np.exp(rng.uniform(0.0, math.log(top), size=count // 3)).astype(np.int64)
    mag = np.minimum(mag, top) * rng.choice([-1, 1], size=mag.size)
    k = rng.integers(0, int(math.log2(top)) + 1, size=count - uni.size - mag.size)
    edge = (2**k + rng.integers(-1, 2, size=k.size)) * rng.choice([-1, 1], size=k.size)
    return np.clip(np.concatenate([uni, mag, edge]), -top, top).astype(np.int64)


def near_zero_positions(rng, rotary_dim, base, pairs, count, max_position):
    """``count`` int64 positions (random signs) where m theta_i is closest to a multiple of pi/2
    for one of ``pairs``: the largest convergent denominators q <= max_position of 2 theta_i / pi
    (oracle.near_zero_positions), theta_i taken from the table at 400 bits."""
    if count <= 0:
        return np.zeros(0, dtype=np.int64)
    thetas = ladder(rotary_dim, base).mp_values(400)
    pool = []
    for i in pairs:
        pool.extend(oracle.near_zero_positions(thetas[int(i)], max_position)[-6:])
    pick = rng.choice(len(pool), size=min(count, len(pool)), replace=False)
    out = np.array([pool[k] for k in pick], dtype=np.int64)
    return out * rng.choice([-1, 1], size=out.size)


def sample_configs(rng, count, max_dim=256):
    """``count`` (rotary_dim, base) pairs: rotary_dim even in [2, max_dim], base log-uniform in
    [1e4, 1e6]."""
    dims = 2 * rng.integers(1, max_dim // 2 + 1, size=count)
    bases = np.exp(rng.uniform(math.log(1e4), math.log(1e6), size=count))
    return [(int(d), float(b)) for d, b in zip(dims, bases)]


def _golden_mismatches(values, exact, settle):
    """Count values != nearest double of exact; a mismatch is re-checked with ``settle()``
    (the oracle's precision-raising rounding) before it counts."""
    want = np.vectorize(oracle.nearest_double, otypes=[np.float64])(np.asarray(exact, dtype=object))
    bad = np.argwhere(values != want)
    if bad.size == 0:
        return 0
    settled = settle()
    return int(sum(values[tuple(ix)] != settled[tuple(ix)] for ix in bad))


def measure_cos_sin(
    configs=6,
    positions=24,
    pairs=8,
    max_position=2**24,
    seed=0,
    backends=("cpu", "numpy"),
    near_zero=0,
    golden=False,
):
    """Max fast-mode error of cos and sin per backend (and "naive"), over the sampled values.

    Returns {"samples": N, "max_ulp": {backend: ...}, "max_abs_in_2^-53": {backend: ...},
    "golden_mismatches": {backend: count} (only with golden=True), "min_abs": smallest |value|};
    N counts cos and sin values separately; "naive" is cos/sin(fl(m * inv_freq)).
    """
    rng = np.random.default_rng(seed)
    worst = {name: 0.0 for name in (*backends, "naive")}
    worst_abs = dict(worst)
    mismatches = {name: 0 for name in backends}
    samples = 0
    min_abs = 1.0
    for r, base in sample_configs(rng, configs):
        pick = rng.choice(r // 2, size=min(pairs, r // 2), replace=False)
        pos = np.concatenate(
            [
                sample_positions(rng, positions, max_position),
                near_zero_positions(rng, r, base, pick, near_zero, max_position),
            ]
        )
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
        c0, s0 = tables[backends[0]]
        min_abs = min(min_abs, float(np.abs(c0[:, pick]).min()), float(np.abs(s0[:, pick]).min()))
        if golden:
            settled = []

            def settle(k):
                if not settled:
                    settled.extend(oracle.cos_sin_nearest(pos, r, base, pairs=pick))
                return settled[k]

            for name in backends:
                cg, sg = cos_sin(pos, r, base, backend=name, mode="golden")
                mismatches[name] += _golden_mismatches(cg[:, pick], ce, lambda: settle(0))
                mismatches[name] += _golden_mismatches(sg[:, pick], se, lambda: settle(1))
        samples += 2 * pos.size * pick.size
    out = {
        "samples": samples,
        "max_ulp": worst,
        # absolute error in units of 2**-53 (half an ulp of 1), the scale the design doc uses
        "max_abs_in_2^-53": {k: v * 2.0**53 for k, v in worst_abs.items()},
        "min_abs": min_abs,
    }
    if golden:
        out["golden_mismatches"] = mismatches
    return out


def measure_apply(
    configs=3, tokens=4, heads=2, max_position=2**24, seed=1, backends=("cpu", "numpy"),
    golden=False,
):
    """Max fast-mode error of apply per backend in ulps of the pair norm (layouts and partial
    rotary included); with golden=True also "golden_mismatches" per backend."""
    rng = np.random.default_rng(seed)
    worst = {name: 0.0 for name in backends}
    mismatches = {name: 0 for name in backends}
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
        if golden:
            settled = []

            def settle():
                if not settled:
                    settled.append(
                        oracle.apply_nearest(x, pos, rotary_dim=r, base=base, layout=layout)
                    )
                return settled[0]

            for name in backends:
                out = apply(
                    x, pos, rotary_dim=r, base=base, layout=layout, backend=name, mode="golden"
                )
                mismatches[name] += _golden_mismatches(out, exact, settle)
        samples += x.size
    res = {"samples": samples, **worst}
    if golden:
        res["golden_mismatches"] = mismatches
    return res


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=40)
    parser.add_argument("--positions", type=int, default=60)
    parser.add_argument("--pairs", type=int, default=16)
    parser.add_argument("--max-log2", type=int, default=24)
    parser.add_argument("--near-zero", type=int, default=0)
    parser.add_argument("--golden", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backends", nargs="+", default=["cpu", "numpy"])
    args = parser.parse_args(argv)
    with mpmath.workprec(oracle.PREC_BITS):
        cs = measure_cos_sin(
            args.configs,
            args.positions,
            args.pairs,
            2**args.max_log2,
            args.seed,
            args.backends,
            args.near_zero,
            args.golden,
        )
        ap = measure_apply(
            max(2, args.configs // 4),
            8,
            2,
            2**args.max_log2,
            args.seed + 1,
            args.backends,
            args.golden,
        )
    print(f"cos/sin, |m| <= 2**{args.max_log2}: {cs}")
    print(f"apply (ulps of pair norm): {ap}")


if __name__ == "__main__":
    main()
