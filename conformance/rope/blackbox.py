"""RoPE's black-box identity checks, run on the implementation itself (docs/design.md).

The golden vectors test values at chosen points; these checks test properties every correct RoPE
has, on a small fresh input (a handful of calls, once per dtype), with the family-free machinery
of conformance.core.blackbox. For ``rope.apply``:

    norm-per-pair         ||R_m x|_p - |x|_p| / |x|_p over pairs p of the declared layout
    shift-invariance      <R_{m+s} q, R_{n+s} k> = <R_m q, R_n k> (row 0 shifted by 1, row 1 by 1000)
    linearity             f(u + 2v) = f(u) + 2 f(v), u and v with disjoint support (u + 2v exact)
    position-zero         f(x, 0) = x
    inputs-not-mutated    x and positions hold the same bits after every call
    dtype-preserved       the output has x's dtype
    shape-preserved       the output has x's shape
    non-contiguous        strided x and positions give the same result as contiguous ones
    batch-independence    each batch row alone gives the same result as in the batch
    batch-independence-decode   at a continuous-batching decode shape [5, 1, 3, 64] (one token
                          per row, rows at 0 and 131071 among them): the rows in reverse order give
                          the same rows (a row treated specially, e.g. row 0, moves and shows)
    non-contiguous-decode strided x and positions at that decode shape vs contiguous
    determinism           the same call twice gives the same bits

The inputs hold positions up to 70000; an implementation that raises Unsupported for them (a
short cos/sin cache) is checked at positions up to 4000 instead, so that a check is skipped only
when the implementation supports neither.

``rope.cache`` gets shape, unit circle (cos^2 + sin^2 = 1), position zero, angle addition
(cos/sin at m + s from m and s), inputs-not-mutated and determinism; ``rope.frequencies`` gets
shape, a geometric ladder starting at theta_0 = 1, and determinism.

Tolerances. With u the unit roundoff of the dtype under test (2**-8 bfloat16, 2**-11 float16,
2**-24 float32, 2**-53 float64), u_eff = max(u, 2**-24) because mainstream implementations build
float32 cos/sin tables even for float64 inputs, and a = 2**-24 the float32 angle rounding:

    norm-per-pair      8 u_eff relative to the pair norm (cos/sin, two products and a sum rounded
                       in the dtype: at most about 3 u * sqrt(2) * sqrt(2) |x_p| = 6 u |x_p|)
    shift-invariance   16 u_eff + 8 a phi_max relative to sum_p |q_p| |k_p| (four rotated
                       vectors; float32 angles err by up to 2 a |phi| each; phi_max = largest angle)
    linearity          32 u_eff relative to the largest |x| of the token's head (three outputs, the
                       combined input up to twice as large)
    position-zero      2 u_eff (cos 0 = 1 and sin 0 = 0 are exact: the result should be exact)
    non-contiguous, batch-independence   4 u_eff (normally bit-identical)
    determinism, inputs-not-mutated      0 (bit-identical)

Measured headroom (examples/rope/hf_rotate_half.py, meta_complex.py, gptj_rotate_every_two.py in
float64, float32, float16 and bfloat16, CPU): the largest residual / bound was 0.28 for
norm-per-pair, 0.07 shift-invariance, 0.04 linearity, 0.41 position-zero (float64 input through
Meta's float32 computation) and 0 for the bit-identity checks.

A failing check carries diagnoses where a code applies: the check's own (input-mutated,
dtype-changed, shape-changed, not-deterministic, non-finite, raised, crashed, timeout) and, for
the numeric checks, what conformance.rope.diagnosis says about the failing output (e.g.
layout-swapped, attention-factor, pair-angle-mismatch, position-offset).
"""

from __future__ import annotations

import math

import numpy as np

from conformance.core.blackbox import (
    Session,
    call_failure,
    determinism_result,
    max_or_nan,
    mutation_result,
    nonfinite,
    result,
    same_place_diff,
    verdict_of,
)
from conformance.core.tensors import as_number, dtype_name, type_name
from conformance.core.tolerance import unit_roundoff
from conformance.results import Diagnosis
from conformance.rope import diagnosis
from conformance.rope.spec import RopeSpec
from reference.rope import pair_indices

FLOAT32_ANGLE = 2.0**-24
SEED = 20260522
HEAD_DIM = 64
HEADS = 3
BASE = 500000.0  # Llama 3's; not 1e4, so that a hard-coded 10000 shows in the frequency checks
# Row 0: a prefill from 0; row 1: scattered positions up to 70000 (past 2**16: float16 overflow,
# cos/sin caches of 4096 rows).
POSITIONS = ((0, 1, 2, 3, 4, 5), (7, 100, 1000, 4095, 4097, 70000))
# Used instead when the implementation raises Unsupported for POSITIONS (a short cos/sin cache):
# a check is skipped only when the implementation supports neither.
SHORT_POSITIONS = ((0, 1, 2, 3, 4, 5), (7, 100, 1000, 2047, 2049, 4000))
# A continuous-batching decode step: one token per row, each row at its own position (0 and
# 131071, the last of a 128K context, among them); SHORT_ for a short cos/sin cache.
DECODE_POSITIONS = (4095, 131071, 0, 70000, 7)
SHORT_DECODE_POSITIONS = (4095, 2047, 0, 4000, 7)
SHIFT_POSITIONS = ((0, 1, 2, 3, 4, 5), (10, 20, 30, 40, 50, 60))
SHIFTS = (1, 1000)  # per batch row


def _u_eff(dtype) -> float:
    return max(unit_roundoff(dtype, default=FLOAT32_ANGLE), FLOAT32_ANGLE)


# --------------------------------------------------------------------------------------------
# rope.apply
# --------------------------------------------------------------------------------------------


def _apply_spec(layout="half"):
    return RopeSpec(head_dim=HEAD_DIM, rotary_dim=HEAD_DIM, base=BASE,
                    layout=layout if layout in ("half", "interleaved") else "half",
                    scaling=None, seq_len=len(POSITIONS[0]))


def apply_checks(invoker, protocol, dtype, device, layout) -> list:
    import torch

    spec = _apply_spec(layout)
    name = dtype_name(dtype)
    u = _u_eff(dtype)
    pid = f"{protocol}/"
    rng = np.random.default_rng(SEED)
    x64 = torch.from_numpy(rng.standard_normal((2, len(POSITIONS[0]), HEADS, HEAD_DIM))).to(dtype)
    x64 = x64.to(torch.float64).numpy()  # the values the implementation sees, exactly
    pos = np.array(POSITIONS, dtype=np.int64)
    first, second = pair_indices(spec.rotary_dim, spec.layout)
    session = Session(invoker)
    results = []

    def run(x, p):
        xt = torch.from_numpy(np.array(x)).to(device=device, dtype=dtype)
        pt = torch.from_numpy(np.array(p, dtype=np.int64)).to(device)
        return session.call(xt, pt, spec, watch=(("x", xt), ("positions", pt)))

    def unusable(cid, *calls_and_inputs):
        """The result of a check whose calls gave nothing comparable (None when all did)."""
        for call, x in calls_and_inputs:
            if call.kind == "ok" and call.out64 is not None and call.out64.shape == np.shape(x):
                continue
            if call.kind != "ok" or call.problem:
                return call_failure(cid, dtype, call)
            return result(cid, dtype, "error", message=f"output shape {list(call.out64.shape)} differs from "
                           f"the input's {list(np.shape(x))}")
        return None

    def add(cid, residual, bound, message, diagnoses=lambda: []):
        verdict = verdict_of(residual, bound)
        results.append(result(cid, dtype, verdict, residual, bound, message,
                               diagnoses() if verdict == "fail" else []))

    def explained(outs, ins, x, p, out):
        """Diagnoses of a failing numeric check: non-finite output, then the closest mutant."""
        nf = nonfinite(np.concatenate(outs), np.concatenate(ins))
        return ([nf] if nf else []) + (diagnosis.diagnose_apply(x, p, out, spec, name) if out is not None else [])

    def row_scale(x):
        s = np.max(np.abs(x), axis=-1, keepdims=True)
        return np.where(s > 0, s, 1.0)

    base = run(x64, pos)
    if base.kind == "unsupported":
        pos = np.array(SHORT_POSITIONS, dtype=np.int64)
        base = run(x64, pos)
    base_ok = unusable("", (base, x64)) is None
    base_out = base.out64 if base_ok else None

    # dtype and shape, from the base call.
    if base.kind != "ok" or base.problem.startswith("returned"):
        results.append(call_failure(pid + "dtype-preserved", dtype, base))
        results.append(call_failure(pid + "shape-preserved", dtype, base))
    else:
        got = base.value.dtype
        msg = f"returned {dtype_name(got)} for {name} input"
        ok = got == dtype
        results.append(result(pid + "dtype-preserved", dtype, "pass" if ok else "fail", message=msg,
                               diagnoses=[] if ok else [Diagnosis("dtype-changed", msg)]))
        got_shape = list(base.value.shape)
        msg = f"returned shape {got_shape} for input {list(x64.shape)}"
        ok = got_shape == list(x64.shape)
        results.append(result(pid + "shape-preserved", dtype, "pass" if ok else "fail", message=msg,
                               diagnoses=[] if ok else [Diagnosis("shape-changed", msg)]))

    # |R_m x| = |x| for every pair of the declared layout.
    cid = pid + "norm-per-pair"
    bad = unusable(cid, (base, x64))
    if bad:
        results.append(bad)
    else:
        nx = np.hypot(x64[..., first], x64[..., second])
        no = np.hypot(base.out64[..., first], base.out64[..., second])
        keep = nx >= 1e-3 * np.sqrt(np.mean(nx * nx))
        with np.errstate(invalid="ignore"):
            residual = max_or_nan(np.abs(no - nx)[keep] / nx[keep])
        add(cid, residual, 8.0 * u, f"max relative change of a pair's norm ({spec.layout} layout)",
            lambda: explained([base.out64], [x64], x64, pos, base_out))

    # <R_(m+s) q, R_(n+s) k> = <R_m q, R_n k>, all token pairs of a row, per head.
    cid = pid + "shift-invariance"
    ps = np.array(SHIFT_POSITIONS, dtype=np.int64)
    shifted = ps + np.array(SHIFTS, dtype=np.int64)[:, None]
    s0, s1 = run(x64, ps), run(x64, shifted)
    bad = unusable(cid, (s0, x64), (s1, x64))
    if bad:
        results.append(bad)
    else:
        sc0 = np.einsum("bmhd,bnhd->bhmn", s0.out64, s0.out64)
        sc1 = np.einsum("bmhd,bnhd->bhmn", s1.out64, s1.out64)
        norm = np.einsum("bmhd,bnhd->bhmn", np.abs(x64), np.abs(x64))
        with np.errstate(invalid="ignore", divide="ignore"):
            residual = max_or_nan(np.abs(sc1 - sc0) / np.where(norm > 0, norm, 1.0))
        phi_max = float(np.max(np.abs(shifted)))  # theta_0 = 1
        add(cid, residual, 16.0 * u + 8.0 * FLOAT32_ANGLE * phi_max,
            f"<R_(m+s) q, R_(n+s) k> vs <R_m q, R_n k> for shifts {SHIFTS[0]} and {SHIFTS[1]}",
            lambda: explained([s0.out64, s1.out64], [x64, x64], x64, ps, s0.out64))

    # f(u + 2v) = f(u) + 2 f(v); u, v hold the two elements of each pair (u + 2v is exact).
    cid = pid + "linearity"
    mask = np.zeros(HEAD_DIM, dtype=bool)
    mask[first] = True
    xu, xv = np.where(mask, x64, 0.0), np.where(mask, 0.0, x64)
    xw = xu + 2.0 * xv
    cu, cv, cw = run(xu, pos), run(xv, pos), run(xw, pos)
    bad = unusable(cid, (cu, xu), (cv, xv), (cw, xw))
    if bad:
        results.append(bad)
    else:
        with np.errstate(invalid="ignore"):
            residual = max_or_nan(np.abs(cw.out64 - (cu.out64 + 2.0 * cv.out64)) / row_scale(xw))
        add(cid, residual, 32.0 * u, "f(u + 2v) vs f(u) + 2 f(v) (u, v: the two elements of each pair)",
            lambda: explained([cu.out64, cv.out64, cw.out64], [xu, xv, xw], x64, pos, base_out))

    # f(x, 0) = x.
    cid = pid + "position-zero"
    zeros = np.zeros_like(pos)
    cz = run(x64, zeros)
    bad = unusable(cid, (cz, x64))
    if bad:
        results.append(bad)
    else:
        with np.errstate(invalid="ignore"):
            residual = max_or_nan(np.abs(cz.out64 - x64) / row_scale(x64))
        add(cid, residual, 2.0 * u, "f(x, positions = 0) vs x",
            lambda: explained([cz.out64], [x64], x64, zeros, cz.out64))

    # Strided x ([b, s, h, d] viewed from [b, h, s, d]) and strided positions.
    cid = pid + "non-contiguous"
    if session.fatal is None:
        b, s, h, d = x64.shape
        xt = torch.empty((b, h, s, d), dtype=dtype, device=device).transpose(1, 2)
        xt.copy_(torch.from_numpy(x64).to(device=device, dtype=dtype))
        pt = torch.empty((b, 2 * s), dtype=torch.int64, device=device)[:, ::2]
        pt.copy_(torch.from_numpy(pos).to(device))
        cn = session.call(xt, pt, spec, watch=(("x", xt), ("positions", pt)))
    else:
        cn = session.skipped()
    bad = unusable(cid, (cn, x64), (base, x64))
    if bad:
        results.append(bad)
    else:
        add(cid, max_or_nan(same_place_diff(cn.out64, base.out64) / row_scale(x64)), 4.0 * u,
            "strided x [b, s, h, d] (from [b, h, s, d]) and strided positions vs contiguous")

    # Each batch row alone.
    cid = pid + "batch-independence"
    rows = [run(x64[k:k + 1], pos[k:k + 1]) for k in range(x64.shape[0])]
    bad = unusable(cid, *[(c, x64[k:k + 1]) for k, c in enumerate(rows)], (base, x64))
    if bad:
        results.append(bad)
    else:
        alone = np.concatenate([c.out64 for c in rows])
        add(cid, max_or_nan(same_place_diff(alone, base.out64) / row_scale(x64)), 4.0 * u,
            "each batch row alone vs the same row in the batch",
            lambda: diagnosis.diagnose_apply(x64, pos, base_out, spec, name))

    # Both again at a continuous-batching decode shape: DECODE_POSITIONS.shape[0] rows of one
    # token each, rows far apart (a fused kernel may take another path there: the bug of
    # rotating only batch row 0 shows only at this shape).
    dx = torch.from_numpy(rng.standard_normal((len(DECODE_POSITIONS), 1, HEADS, HEAD_DIM))).to(dtype)
    dx = dx.to(torch.float64).numpy()
    dpos = np.array(DECODE_POSITIONS, dtype=np.int64)[:, None]
    dbase = run(dx, dpos)
    if dbase.kind == "unsupported":
        dpos = np.array(SHORT_DECODE_POSITIONS, dtype=np.int64)[:, None]
        dbase = run(dx, dpos)
    dbase_out = dbase.out64 if unusable("", (dbase, dx)) is None else None
    # One call with the rows in reverse order: every row must come back as in the first call
    # (a row treated specially, as row 0 by a kernel launched over one row, moves and shows).
    cid = pid + "batch-independence-decode"
    drev = run(dx[::-1], dpos[::-1])
    bad = unusable(cid, (drev, dx), (dbase, dx))
    if bad:
        results.append(bad)
    else:
        add(cid, max_or_nan(same_place_diff(drev.out64[::-1], dbase.out64) / row_scale(dx)), 4.0 * u,
            f"decode shape {list(dx.shape)}: the rows in reverse order vs in order",
            lambda: diagnosis.diagnose_apply(dx, dpos, dbase_out, spec, name))
    cid = pid + "non-contiguous-decode"
    if session.fatal is None:
        b, s, h, d = dx.shape
        xt = torch.empty((b, h, s, d), dtype=dtype, device=device).transpose(1, 2)
        xt.copy_(torch.from_numpy(dx).to(device=device, dtype=dtype))
        pt = torch.empty((b, 2), dtype=torch.int64, device=device)[:, ::2]
        pt.copy_(torch.from_numpy(dpos).to(device))
        cn = session.call(xt, pt, spec, watch=(("x", xt), ("positions", pt)))
    else:
        cn = session.skipped()
    bad = unusable(cid, (cn, dx), (dbase, dx))
    if bad:
        results.append(bad)
    else:
        add(cid, max_or_nan(same_place_diff(cn.out64, dbase.out64) / row_scale(dx)), 4.0 * u,
            f"decode shape {list(dx.shape)}: strided x and positions vs contiguous")

    # The same call twice.
    cid = pid + "determinism"
    again = run(x64, pos)
    bad = unusable(cid, (again, x64), (base, x64))
    if bad:
        results.append(bad)
    else:
        residual = max_or_nan(same_place_diff(again.out64, base.out64))
        results.append(determinism_result(cid, dtype, residual, "two calls with the same inputs"))

    results.insert(0, mutation_result(pid, dtype, session))
    return results


# --------------------------------------------------------------------------------------------
# rope.cache and rope.frequencies
# --------------------------------------------------------------------------------------------


def _pair(value):
    import torch

    if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, torch.Tensor) for v in value):
        return [v.detach().to("cpu", torch.float64).numpy() for v in value]
    return None


def cache_checks(invoker, protocol, dtype, device) -> list:
    import torch

    spec = _apply_spec()
    pid = f"{protocol}/"
    session = Session(invoker)
    pos = np.array(POSITIONS, dtype=np.int64)
    shift = 37
    want = pos.shape + (spec.rotary_dim // 2,)

    def run(p):
        pt = torch.from_numpy(np.array(p, dtype=np.int64)).to(device)
        call = session.call(pt, spec, watch=(("positions", pt),))
        tables = _pair(call.value) if call.kind == "ok" else None
        if call.kind == "ok" and tables is None:
            call.problem = f"returned {type_name(call.value)}, not a (cos, sin) pair of tensors"
        u = max(_u_eff(call.value[0].dtype), _u_eff(dtype)) if tables else _u_eff(dtype)
        return call, tables, u

    base, tb, u = run(pos)
    if base.kind == "unsupported":
        pos = np.array(SHORT_POSITIONS, dtype=np.int64)
        base, tb, u = run(pos)
    results = []
    cid = pid + "shape-preserved"
    if tb is None:
        results.append(call_failure(cid, dtype, base))
        results.append(mutation_result(pid, dtype, session))
        return results
    shapes = [list(t.shape) for t in tb]
    ok = all(list(t.shape) == list(want) for t in tb)
    msg = f"cos, sin shapes {shapes} for positions {list(pos.shape)} (expected {list(want)} each)"
    results.append(result(cid, dtype, "pass" if ok else "fail", message=msg,
                           diagnoses=[] if ok else [Diagnosis("shape-changed", msg)]))
    if not ok:
        results.append(mutation_result(pid, dtype, session))
        return results
    cos, sin = tb

    def diags():
        return diagnosis.diagnose_cache(pos, (cos, sin), spec, dtype_name(dtype))

    residual = max_or_nan(np.abs(cos * cos + sin * sin - 1.0))
    bound = 8.0 * u
    verdict = verdict_of(residual, bound)
    results.append(result(pid + "unit-circle", dtype, verdict, residual, bound, "cos^2 + sin^2 = 1",
                           diags() if verdict == "fail" else []))

    cz, tz, _ = run(np.zeros_like(pos))
    if tz is None or any(t.shape != tuple(want) for t in tz):
        results.append(call_failure(pid + "position-zero", dtype, cz) if tz is None
                       else result(pid + "position-zero", dtype, "error", message="shape differs"))
    else:
        residual = max_or_nan(np.maximum(np.abs(tz[0] - 1.0), np.abs(tz[1])))
        verdict = verdict_of(residual, 2.0 * u)
        results.append(result(pid + "position-zero", dtype, verdict, residual, 2.0 * u,
                               "cos = 1 and sin = 0 at position 0",
                               diagnosis.diagnose_cache(np.zeros_like(pos), tz, spec, dtype_name(dtype))
                               if verdict == "fail" else []))

    cs, ts, _ = run(pos + shift)
    cc, tc, _ = run(np.full_like(pos, shift))
    failed = next(((c, t) for c, t in ((cs, ts), (cc, tc)) if t is None or t[0].shape != tuple(want)), None)
    if failed is not None:
        results.append(call_failure(pid + "angle-addition", dtype, failed[0]) if failed[1] is None
                       else result(pid + "angle-addition", dtype, "error", message="shape differs"))
    else:
        c_add = cos * tc[0] - sin * tc[1]
        s_add = sin * tc[0] + cos * tc[1]
        residual = max_or_nan(np.maximum(np.abs(ts[0] - c_add), np.abs(ts[1] - s_add)))
        bound = 16.0 * u + 8.0 * FLOAT32_ANGLE * float(np.max(pos + shift))
        verdict = verdict_of(residual, bound)
        results.append(result(pid + "angle-addition", dtype, verdict, residual, bound,
                               f"cos/sin at m + {shift} from those at m and at {shift}",
                               diags() if verdict == "fail" else []))

    again, ta, _ = run(pos)
    if ta is None or any(a.shape != b.shape for a, b in zip(ta, tb)):
        results.append(call_failure(pid + "determinism", dtype, again) if ta is None
                       else result(pid + "determinism", dtype, "error", message="shape differs"))
    else:
        residual = max_or_nan([max_or_nan(np.abs(np.nan_to_num(a) - np.nan_to_num(b))) for a, b in zip(ta, tb)])
        results.append(determinism_result(pid + "determinism", dtype, residual, "two calls with the same positions"))
    results.insert(0, mutation_result(pid, dtype, session))
    return results


def frequency_checks(invoker, protocol, dtype, device) -> list:
    import torch

    spec = _apply_spec()
    pid = f"{protocol}/"
    session = Session(invoker)
    half = spec.rotary_dim // 2

    def run():
        call = session.call(spec, spec.seq_len)
        if call.kind != "ok":
            return call, None, None
        v = call.value
        if not (isinstance(v, (tuple, list)) and len(v) == 2):
            call.problem = f"returned {type_name(v)}, not (inv_freq, attention_factor)"
            return call, None, None
        if isinstance(v[0], torch.Tensor):
            inv = v[0].detach().to("cpu", torch.float64).numpy()
        else:
            inv = np.asarray(v[0], dtype=np.float64)
        af = as_number(v[1])  # the protocol's own reading of the attention factor
        return call, inv, math.nan if af is None else af

    base, inv, af = run()
    results = []
    if inv is None:
        results.append(call_failure(pid + "shape-preserved", dtype, base))
        return results
    ok = inv.shape == (half,)
    msg = f"inv_freq shape {list(inv.shape)} (expected [{half}])"
    results.append(result(pid + "shape-preserved", dtype, "pass" if ok else "fail", message=msg,
                           diagnoses=[] if ok else [Diagnosis("shape-changed", msg)]))
    if ok:
        u = _u_eff(base.value[0].dtype) if isinstance(base.value[0], torch.Tensor) else FLOAT32_ANGLE
        with np.errstate(divide="ignore", invalid="ignore"):
            q = inv[1:] / inv[:-1]
        target = float(spec.base) ** (-2.0 / spec.rotary_dim)
        residual = max(abs(float(inv[0]) - 1.0), max_or_nan(np.abs(q / target - 1.0)))
        bound = 8.0 * u
        verdict = verdict_of(residual, bound)
        results.append(result(pid + "geometric-ladder", dtype, verdict, residual, bound,
                               "theta_0 = 1 and theta_(i+1) / theta_i = base**(-2/r) (no scaling)",
                               diagnosis.diagnose_frequencies((inv, af), spec, dtype_name(dtype))
                               if verdict == "fail" else []))
    again, inv2, af2 = run()
    if inv2 is None or inv2.shape != inv.shape:
        results.append(call_failure(pid + "determinism", dtype, again) if inv2 is None
                       else result(pid + "determinism", dtype, "error", message="shape differs"))
    else:
        residual = max(max_or_nan(np.abs(inv2 - inv)), abs(af2 - af) if np.isfinite(af) else 0.0)
        results.append(determinism_result(pid + "determinism", dtype, residual, "two calls with the same spec"))
    return results
