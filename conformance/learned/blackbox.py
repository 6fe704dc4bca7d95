"""The black-box checks of ``learned.lookup``, run on the implementation itself (docs/design.md).

The golden vectors test values at chosen points; these checks test properties every correct
learned lookup has, on small fresh inputs (a 64-row table, d_model 16, a handful of calls once
per dtype), with the family-free machinery of conformance.core.blackbox:

    inputs-not-mutated  x, positions and table hold the same bits after every call
    dtype-preserved     the output has x's dtype
    shape-preserved     the output has x's shape
    zero-input-row      f(0, p, T) = T[p]: adding zero returns the table row itself
    batch-independence  each batch row alone gives the same result as in the batch
    length-wall         position N (one token of a batch), and -1, must raise; for the roberta
                        variant (when the implementation supports it) the position whose row is N
                        (any exception counts, conformance.Unsupported included)
    determinism         the same call twice gives the same bits

Inputs are N(0, 1) values rounded to 8 significant bits (exactly representable in bfloat16,
float16 and float32), so every correct path, a float32 intermediate included, is exact on them.

Tolerances, with u_eff = max(u_T, 2^-24) (u_T the unit roundoff of the dtype under test):

    zero-input-row       u_eff relative to max |T| (0 + t = t exactly; measured 0)
    batch-independence   u_eff relative to max(|x| + |T|) per token (normally bit-identical)
    determinism, inputs-not-mutated   0 (bit-identical)
    length-wall          every call must raise; returning a value fails with
                         ``length-wall-missing`` and says what came back (clamped, wrapped, zeros)

A failing zero-input-row carries the closest shifted-row mutant (``position-offset``) when one
explains it: with x = 0 the output is the row that was read.
"""

from __future__ import annotations

import numpy as np

from conformance.core.blackbox import (
    Session,
    call_failure,
    determinism_result,
    max_or_nan,
    mutation_result,
    result,
    same_place_diff,
    verdict_of,
)
from conformance.core.tensors import dtype_name
from conformance.core.tolerance import unit_roundoff
from conformance.results import Diagnosis
from conformance.learned import diagnosis
from conformance.learned.spec import LearnedSpec

FLOAT32 = 2.0**-24
SEED = 20260601
NUM_POSITIONS = 64
D_MODEL = 16
PADDING_IDX = 1
# Row 0: a prefill from 0; row 1: scattered positions up to the last row (63) and back to 0.
POSITIONS = ((0, 1, 2, 3, 4, 5), (7, 30, 62, 63, 0, 63))
ROBERTA_POSITIONS = ((0, 1, 2, 3, 4, 5), (-1, -1, 0, 1, 60, 61))  # 61 reads row 63, the last


def _u_eff(dtype) -> float:
    return max(unit_roundoff(dtype, default=FLOAT32), FLOAT32)


def _representable(rng, shape) -> np.ndarray:
    """N(0, 1) values rounded to 8 significant bits, never below 2^-6 in magnitude."""
    v = rng.standard_normal(shape)
    m, e = np.frexp(v)
    v = np.ldexp(np.rint(m * 256.0) / 256.0, e)
    return np.where(np.abs(v) < 2.0**-6, np.copysign(2.0**-6, v), v)


def _spec(variant="absolute"):
    return LearnedSpec(num_positions=NUM_POSITIONS, d_model=D_MODEL, variant=variant,
                       padding_idx=PADDING_IDX if variant == "roberta" else None)


def lookup_checks(invoker, protocol, dtype, device) -> list:
    import torch

    spec = _spec()
    name = dtype_name(dtype)
    u = _u_eff(dtype)
    pid = f"{protocol}/"
    rng = np.random.default_rng(SEED)
    pos = np.array(POSITIONS, dtype=np.int64)
    x64 = _representable(rng, pos.shape + (D_MODEL,))
    table64 = _representable(rng, (NUM_POSITIONS, D_MODEL))
    session = Session(invoker)
    results = []

    def run(x, p, table=table64, s=spec):
        xt = torch.from_numpy(np.array(x, dtype=np.float64)).to(device=device, dtype=dtype)
        pt = torch.from_numpy(np.array(p, dtype=np.int64)).to(device)
        tt = torch.from_numpy(np.array(table, dtype=np.float64)).to(device=device, dtype=dtype)
        return session.call(xt, pt, tt, s, watch=(("x", xt), ("positions", pt), ("table", tt)))

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

    base = run(x64, pos)

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

    # f(0, p, T) = T[p].
    cid = pid + "zero-input-row"
    zeros = np.zeros_like(x64)
    cz = run(zeros, pos)
    bad = unusable(cid, (cz, zeros))
    if bad:
        results.append(bad)
    else:
        scale = float(np.max(np.abs(table64)))
        with np.errstate(invalid="ignore"):
            residual = max_or_nan(same_place_diff(cz.out64, table64[pos]) / scale)
        add(cid, residual, u, "f(0, positions, table) vs table[positions]",
            lambda: diagnosis.diagnose_lookup(zeros, pos, table64, cz.out64, spec, name))

    # Each batch row alone.
    cid = pid + "batch-independence"
    rows = [run(x64[k:k + 1], pos[k:k + 1]) for k in range(x64.shape[0])]
    bad = unusable(cid, *[(c, x64[k:k + 1]) for k, c in enumerate(rows)], (base, x64))
    if bad:
        results.append(bad)
    else:
        alone = np.concatenate([c.out64 for c in rows])
        scale = np.max(np.abs(x64) + np.max(np.abs(table64)), axis=-1, keepdims=True)
        add(cid, max_or_nan(same_place_diff(alone, base.out64) / scale), u,
            "each batch row alone vs the same row in the batch",
            lambda: diagnosis.diagnose_lookup(x64, pos, table64, base.out64, spec, name))

    results.append(_wall_check(pid + "length-wall", dtype, run, x64, table64, base))

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


def _wall_check(cid, dtype, run, x64, table64, base):
    """Every call with a position outside the table must raise (see the module docstring). Only
    meaningful when the same call with valid positions (``base``) returned a value."""
    if base.kind != "ok":
        return call_failure(cid, dtype, base)

    n = NUM_POSITIONS
    absolute = _spec()
    roberta = _spec("roberta")
    past = np.array(POSITIONS, dtype=np.int64)
    past[1, -1] = n  # one token of the batch at N, the rest valid
    negative = np.array(POSITIONS, dtype=np.int64)
    negative[0, 0] = -1
    attempts = [(absolute, past, f"position {n} (one token of a batch) in a {n}-row table"),
                (absolute, negative, "position -1 in an absolute lookup")]
    # The roberta variant, when the implementation supports it (a valid call returns a value).
    rpos = np.array(ROBERTA_POSITIONS, dtype=np.int64)
    probe = run(x64, rpos, table64, roberta)
    if probe.kind == "ok":
        rpast = rpos.copy()
        rpast[1, -1] = n - PADDING_IDX - 1
        attempts.append((roberta, rpast, f"roberta position {n - PADDING_IDX - 1} (row {n}) with "
                                         f"padding_idx {PADDING_IDX}"))
    returned, errors, raised = [], [], 0
    for spec, p, what in attempts:
        call = run(x64, p, table64, spec)
        if call.kind in ("raised", "unsupported"):
            raised += 1
        elif call.kind == "ok":
            how = (diagnosis.describe_wall(x64, p, table64, call.out64, spec)
                   if call.out64 is not None else "returned a value")
            returned.append(f"{what}: {how}")
        else:
            errors.append(call)
    if returned:
        msg = "no error past the wall; " + "; ".join(returned)
        return result(cid, dtype, "fail", float(len(returned)), 0.0, msg,
                      [Diagnosis("length-wall-missing", msg)])
    if errors:
        return call_failure(cid, dtype, errors[0])
    return result(cid, dtype, "pass", 0.0, 0.0,
                  f"raised for all {raised} calls with a position outside the table")
