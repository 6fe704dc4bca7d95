"""The black-box checks of ``t5.bucket``, run on the implementation itself (docs/design.md).

The golden vectors test buckets at chosen distances; an implementation that looks its inputs up
(in the shipped vectors, or in the runner's memory) passes those without computing anything. These
checks call it on relative positions drawn at run time (from a seed the message quotes) and test
properties every correct T5 bucket function has, whatever its float log's rounding (Raffel et al.
2020, section 2.1; Hugging Face's ``T5Attention._relative_position_bucket``). With B the buckets
of one direction (num_buckets // 2 bidirectional, num_buckets causal), max_exact = B // 2,
n = |r| (bidirectional) or max(-r, 0) (causal), and the direction's offset o = B [r > 0]
(bidirectional) or 0 (causal), for every drawn r:

    range        0 <= f(r) < num_buckets, and o <= f(r) < o + B
    exact        n < max_exact  =>  f(r) = o + n
    log-start    n >= max_exact  =>  f(r) >= o + max_exact
    clamp        n >= max_distance  =>  f(r) = o + B - 1 (the direction's last bucket)
    monotone     within a direction, f(r) - o is non-decreasing in n
    sign split   bidirectional: r > 0 gives the upper half; causal: r > 0 gives bucket 0

They are exact (integers): a float log one ulp low at a bucket edge changes a bucket by one inside
the log region, which keeps every property. ``bucket-properties-<encoder|decoder|drawn>`` report
one verdict per configuration (T5's encoder and decoder, and one drawn), with the number of entries that break a
property as the residual (bound 0); ``inputs-not-mutated`` and ``determinism`` are the generic ones.
"""

from __future__ import annotations

import secrets

import numpy as np

from conformance.core.blackbox import Session, call_failure, determinism_result, mutation_result, result
from conformance.results import Diagnosis
from conformance.t5.spec import T5Spec

ID = "t5.bucket/"


def draw_positions(seed: int, spec: T5Spec) -> np.ndarray:
    """int64 relative positions for ``spec``: every r with |r| <= max_exact + 2 (the exact region
    and its end), 48 drawn in [-4 max_distance, 4 max_distance] and 8 drawn far past max_distance,
    both signs; shuffled."""
    rng = np.random.default_rng(seed)
    half = spec.num_buckets // 2 if spec.bidirectional else spec.num_buckets
    near = np.arange(-(half // 2 + 2), half // 2 + 3)
    mid = rng.integers(-4 * spec.max_distance, 4 * spec.max_distance + 1, size=48)
    far = rng.integers(4 * spec.max_distance, 2**20, size=8) * rng.choice([-1, 1], size=8)
    r = np.concatenate([near, mid, far, [spec.max_distance, -spec.max_distance]]).astype(np.int64)
    return rng.permutation(r)


def violations(r: np.ndarray, out: np.ndarray, spec: T5Spec) -> list:
    """[(property, number of entries that break it, first offending r)] for the properties in the
    module docstring; [] when they all hold."""
    half = spec.num_buckets // 2 if spec.bidirectional else spec.num_buckets
    max_exact = half // 2
    n = np.abs(r) if spec.bidirectional else np.maximum(-r, 0)
    offset = np.where(r > 0, half, 0) if spec.bidirectional else np.zeros_like(r)
    local = out - offset
    broken = {
        "range": (out < 0) | (out >= spec.num_buckets) | (local < 0) | (local >= half),
        "exact": (n < max_exact) & (local != n),
        "log-start": (n >= max_exact) & (local < max_exact),
        "clamp": (n >= spec.max_distance) & (local != half - 1),
        "sign split": (r > 0) & (out != 0) if not spec.bidirectional else np.zeros_like(r, dtype=bool),
    }
    monotone = np.zeros_like(r, dtype=bool)
    for side in ((r > 0), ~(r > 0)) if spec.bidirectional else ((r <= 0),):
        idx = np.flatnonzero(side)
        order = idx[np.argsort(n[idx], kind="stable")]
        drops = np.flatnonzero(np.diff(local[order]) < 0)
        monotone[order[drops + 1]] = True
    broken["monotone"] = monotone
    return [(name, int(bad.sum()), int(r[np.flatnonzero(bad)[0]])) for name, bad in broken.items() if bad.any()]


def configurations(seed: int) -> list:
    """[(name, spec)]: T5's encoder and decoder configurations, and one drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    num_buckets, bidirectional = int(rng.choice([8, 16, 64])), bool(rng.integers(0, 2))
    max_exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
    # max_distance must exceed max_exact (reference.numerics.bias.t5.check_config)
    max_distance = int(rng.choice([d for d in (20, 64, 256) if d > max_exact]))
    drawn = T5Spec(num_buckets, max_distance, bidirectional)
    return [("encoder", T5Spec(32, 128, True)), ("decoder", T5Spec(32, 128, False)), ("drawn", drawn)]


def _label(spec: T5Spec) -> str:
    return (f"num_buckets {spec.num_buckets}, max_distance {spec.max_distance}, "
            f"{'bidirectional' if spec.bidirectional else 'causal'}")


def bucket_checks(invoker, device: str, seed=None, dtype="float32") -> list:
    """The IdentityResults of the checks above. The adapter gets int64 positions whatever the run's
    dtype; the results carry ``dtype`` (the run's first, as for every dtype-free protocol)."""
    import torch

    seed = secrets.randbelow(2**31) if seed is None else int(seed)
    session = Session(invoker)
    out = []
    first = None
    for k, (name, spec) in enumerate(configurations(seed)):
        r = draw_positions(seed + k, spec)
        t = torch.from_numpy(r.copy()).to(device)
        call = session.call(t, spec, watch=[("relative_positions", t)])
        cid = ID + "bucket-properties-" + name
        if call.kind != "ok" or call.problem:
            out.append(call_failure(cid, dtype, call))
            continue
        value = call.value
        if tuple(value.shape) != r.shape or value.is_floating_point() or value.is_complex():
            out.append(result(cid, dtype, "fail", message=f"{_label(spec)}: returned {value.dtype} "
                              f"{list(value.shape)}, expected integers of shape {list(r.shape)}",
                              diagnoses=[Diagnosis("shape-changed", "the buckets are not integers of the input's shape")]))
            continue
        got = call.out64.astype(np.int64)
        if first is None:
            first = (t, spec, got)
        found = violations(r, got, spec)
        where = f"{_label(spec)}, {r.size} relative positions drawn from seed {seed + k}"
        if not found:
            out.append(result(cid, dtype, "pass", 0, 0, f"range, exact region, log start, clamp, monotone "
                              f"and sign split hold ({where})"))
            continue
        count = sum(c for _, c, _ in found)
        text = "; ".join(f"{name} broken at {c} entr{'y' if c == 1 else 'ies'} (first r = {x})" for name, c, x in found)
        diagnoses = [Diagnosis("bucket-clamp-missing", f"distances >= {spec.max_distance} do not all get the "
                               f"direction's last bucket ({where})")] if any(f[0] == "clamp" for f in found) else []
        out.append(result(cid, dtype, "fail", count, 0, f"{text} ({where})", diagnoses))
    if first is not None:
        t, spec, got = first
        again = session.call(t, spec, watch=[("relative_positions", t)])
        if again.kind == "ok" and not again.problem and again.out64 is not None and again.out64.shape == got.shape:
            residual = float(np.abs(again.out64 - got).max(initial=0))
            out.append(determinism_result(ID + "determinism", dtype, residual, "two identical calls"))
        else:
            out.append(call_failure(ID + "determinism", dtype, again))
    out.append(mutation_result(ID, dtype, session))
    return out
