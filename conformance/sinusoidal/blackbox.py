"""The black-box checks of ``sinusoidal.table``, run on the implementation itself (docs/design.md).

On a small fresh table (d_model 64, base 1e4, positions 0..40 and a few up to 1000), once per
dtype, with the family-free machinery of conformance.core.blackbox; each check uses the spec of
the first variant the implementation accepts (interleaved 2i/d first; conformance.Unsupported
means "try the next"):

    inputs-not-mutated  positions hold the same bits after every call
    shape-preserved     the table is [n, d_model]
    unit-pairs          sin^2 + cos^2 = 1 for each frequency (pairs as the spec's layout places
                        them)
    shift-is-rotation   PE(p + k) = T_k PE(p), T_k the rotations by k w_i read off the
                        implementation's own PE(k): relative positions are linear maps
    position-independence  each position alone gives the row it has in the batch
    determinism         the same call twice gives the same bits

Tolerances, with u = max(u_T, 2**-24) for the returned dtype T and phi_max the largest angle:
unit-pairs 8u; shift-is-rotation 8u + 4 u_a phi_max (u_a = 2**-24: float32 angles at three
positions); position-independence 2u (a row does not depend on its neighbours, but a vectorised
sin may round differently from a scalar one); determinism 0. A failing check carries the closest mutant of conformance.sinusoidal.diagnosis.
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
from conformance.core.tolerance import unit_roundoff
from conformance.results import Diagnosis
from conformance.sinusoidal import diagnosis
from conformance.core.sinusoid_budgets import columns
from conformance.sinusoidal.spec import SinusoidalSpec

FLOAT32 = 2.0**-24
D_MODEL = 64
POSITIONS = tuple(range(41)) + (97, 500, 1000)
SHIFT = 29
SPECS = (("interleaved", "2i/d"), ("concatenated", "2i/(d-2)"), ("concatenated", "2i/d"),
         ("interleaved", "2i/(d-2)"))


def _pairs(rows, spec):
    _, _, kind = columns(spec)
    return rows[..., kind == 0], rows[..., kind == 1]


def table_checks(invoker, protocol, dtype, device) -> list:
    import torch

    pid = f"{protocol}/"
    session = Session(invoker)
    results = []

    def run(p, spec):
        pt = torch.from_numpy(np.array(p, dtype=np.int64)).to(device)
        return session.call(pt, spec, watch=(("positions", pt),))

    pos = np.array(POSITIONS, dtype=np.int64)
    for layout, exponent in SPECS:
        spec = SinusoidalSpec(D_MODEL, layout, exponent)
        base = run(pos, spec)
        if base.kind != "unsupported":
            break
    want = [pos.size, D_MODEL]
    cid = pid + "shape-preserved"
    if base.kind != "ok" or base.out64 is None:
        return [call_failure(cid, dtype, base), mutation_result(pid, dtype, session)]
    got = list(base.out64.shape)
    ok = got == want
    msg = f"table shape {got} for {pos.size} positions (expected {want})"
    results.append(result(cid, dtype, "pass" if ok else "fail", message=msg,
                          diagnoses=[] if ok else [Diagnosis("shape-changed", msg)]))
    if not ok:
        return results + [mutation_result(pid, dtype, session)]
    table = base.out64
    u = max(unit_roundoff(base.value.dtype, default=FLOAT32), FLOAT32)

    def diags(p, out):
        return diagnosis.diagnose_table(p, out, spec, str(base.value.dtype).replace("torch.", ""))

    s, c = _pairs(table, spec)
    residual = max_or_nan(np.abs(s * s + c * c - 1.0))
    verdict = verdict_of(residual, 8 * u)
    results.append(result(pid + "unit-pairs", dtype, verdict, residual, 8 * u, "sin^2 + cos^2 = 1 per frequency",
                          diags(pos, table) if verdict == "fail" else []))

    cid = pid + "shift-is-rotation"
    moved, at_k = run(pos + SHIFT, spec), run(np.array([SHIFT]), spec)
    if moved.kind != "ok" or moved.out64 is None or moved.out64.shape != table.shape:
        results.append(call_failure(cid, dtype, moved) if moved.out64 is None
                       else result(cid, dtype, "error", message="shape differs"))
    elif at_k.kind != "ok" or at_k.out64 is None or at_k.out64.shape != (1, D_MODEL):
        results.append(call_failure(cid, dtype, at_k) if at_k.out64 is None
                       else result(cid, dtype, "error", message="shape differs"))
    else:
        ks, kc = _pairs(at_k.out64[0], spec)
        ms, mc = _pairs(moved.out64, spec)
        residual = max_or_nan(np.maximum(np.abs(s * kc + c * ks - ms), np.abs(c * kc - s * ks - mc)))
        bound = 8 * u + 4 * FLOAT32 * float(pos.max() + SHIFT)
        verdict = verdict_of(residual, bound)
        results.append(result(cid, dtype, verdict, residual, bound,
                              f"PE(p + {SHIFT}) vs the rotation read off PE({SHIFT}) applied to PE(p)",
                              diags(pos + SHIFT, moved.out64) if verdict == "fail" else []))

    cid = pid + "position-independence"
    alone = [run(pos[k:k + 1], spec) for k in (0, 7, pos.size - 1)]
    bad = next((a for a in alone if a.kind != "ok" or a.out64 is None or a.out64.shape != (1, D_MODEL)), None)
    if bad is not None:
        results.append(call_failure(cid, dtype, bad) if bad.out64 is None
                       else result(cid, dtype, "error", message="shape differs"))
    else:
        rows = np.concatenate([a.out64 for a in alone])
        residual = max_or_nan(same_place_diff(rows, table[[0, 7, pos.size - 1]]))
        results.append(result(cid, dtype, verdict_of(residual, 2 * u), residual, 2 * u,
                              "positions 0, 7 and 1000 alone vs in the batch"))

    again = run(pos, spec)
    if again.kind != "ok" or again.out64 is None or again.out64.shape != table.shape:
        results.append(call_failure(pid + "determinism", dtype, again))
    else:
        results.append(determinism_result(pid + "determinism", dtype,
                                          max_or_nan(same_place_diff(again.out64, table)),
                                          "two calls with the same positions"))
    results.insert(0, mutation_result(pid, dtype, session))
    return results
