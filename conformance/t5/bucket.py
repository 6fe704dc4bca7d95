"""Protocol ``t5.bucket``: ``fn(relative_positions, spec) -> buckets``, integers like the input.

Graded exactly. At a bucket edge (reference.t5.edges: the exact log position is an integer), the
bucket one lower is what a log computed one ulp low gives: it passes the standard profile with a
note saying so, and fails strict. Dtype-free. The black-box checks (conformance/t5/blackbox.py)
test the properties of every T5 bucket function on relative positions drawn at run time.
"""

from __future__ import annotations

import numpy as np

from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.tensors import (adapter_inputs, argmax_index, check_integer_tensor, distance_curve,
                                      mutation_problems, over_budget)
from conformance.results import Diagnosis
from conformance.t5.spec import spec_of
from conformance.t5 import blackbox
from reference import t5


def reference(r, spec, **changes):
    kw = dict(num_buckets=spec.num_buckets, max_distance=spec.max_distance, bidirectional=spec.bidirectional)
    kw.update(changes)
    return t5.bucket(r, **kw)


def low_precision(r, spec):
    """The buckets with HF's formula evaluated in bfloat16 (8 significant bits)."""
    import math

    import torch

    buckets = spec.num_buckets // 2 if spec.bidirectional else spec.num_buckets
    r = torch.from_numpy(np.asarray(r, dtype=np.int64))
    out = (r > 0).to(torch.long) * buckets if spec.bidirectional else torch.zeros_like(r)
    n = r.abs() if spec.bidirectional else -torch.clamp(r, max=0)
    max_exact = buckets // 2
    x = (torch.log(n.to(torch.bfloat16) / max_exact) / math.log(spec.max_distance / max_exact)
         * (buckets - max_exact)).to(torch.long)
    large = torch.clamp(max_exact + x, max=buckets - 1)
    return (out + torch.where(n < max_exact, n, large)).numpy()


def unclamped(r, spec) -> np.ndarray:
    """HF's formula without the clamp to the direction's last bucket (float64 log): past
    max_distance the log buckets keep counting up (candle's missing ``min(num_buckets - 1)``)."""
    buckets = spec.num_buckets // 2 if spec.bidirectional else spec.num_buckets
    r = np.asarray(r, dtype=np.int64)
    n = np.abs(r) if spec.bidirectional else np.maximum(-r, 0)
    max_exact = buckets // 2
    with np.errstate(divide="ignore"):
        x = np.log(np.maximum(n, 1) / max_exact) / np.log(spec.max_distance / max_exact) * (buckets - max_exact)
    large = max_exact + np.floor(x).astype(np.int64)
    out = (r > 0).astype(np.int64) * buckets if spec.bidirectional else np.zeros_like(r)
    return out + np.where(n < max_exact, n, large)


def clamp_missing(r, out, spec) -> bool:
    """True when the buckets are right below max_distance and, past it, over the direction's last
    bucket as the unclamped formula gives them (within one, for a float log at an edge)."""
    buckets = spec.num_buckets // 2 if spec.bidirectional else spec.num_buckets
    if buckets // 2 < 1 or spec.max_distance <= buckets // 2:
        return False  # no log buckets: nothing to clamp
    n = np.abs(r) if spec.bidirectional else np.maximum(-r, 0)
    far = n >= spec.max_distance
    ref, free = reference(r, spec), unclamped(r, spec)
    near = out[~far] - ref[~far]
    if not np.all((near == 0) | (near == -1)):  # right, or the bucket below at an edge
        return False
    return bool(np.any(out[far] > ref[far])) and bool(np.all(np.abs(out[far] - free[far]) <= 1))


class T5Bucket(Protocol):
    name = "t5.bucket"
    family = "t5"
    signature = "fn(relative_positions, spec) -> buckets (integers)"
    dtype_free = True
    acceptable_note = "a float log one ulp low at a bucket edge"
    curve_axis = "distance"

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> Prepared:
        args, inputs, watched = adapter_inputs(case.arrays, (), ("relative_positions",), dtype, device)
        return Prepared((*args, spec), inputs, watched, None, device)

    def grade(self, case, spec, prepared, value) -> Graded:
        r = prepared.inputs_f64["relative_positions"]
        out, problems = check_integer_tensor(value, "the buckets", r.shape)
        problems += mutation_problems(prepared.watched)
        if out is None:
            return Graded(problems=problems)
        ref = reference(r, spec)
        n = np.abs(r) if spec.bidirectional else np.maximum(-r, 0)
        # No edge lies at or past max_distance (every such distance is clamped to the last bucket).
        limit = min(int(n.max(initial=0)), spec.max_distance)
        at_edge = np.isin(n, t5.edges(num_buckets=spec.num_buckets, max_distance=spec.max_distance,
                                      bidirectional=spec.bidirectional, limit=limit))
        below = (out == ref - 1) & at_edge
        wrong = (out != ref) & ~below
        graded = Graded(problems=problems, output_f64=out.astype(np.float64),
                        max_abs_error=float(np.abs(out - ref).max(initial=0)))
        for profile in ("standard", "strict"):
            ratio = np.where(wrong, 2.0, np.where(below, 0.5 if profile == "standard" else 2.0, 0.0))
            graded.ratio[profile] = float(ratio.max(initial=0))
            graded.worst_index[profile] = argmax_index(ratio) if ratio.size else None
            graded.mismatch[profile] = over_budget(ratio) + ("buckets",)
            # the budget: one bucket below at an edge (standard), none elsewhere
            allowed = np.where(below | at_edge, 1.0 if profile == "standard" else 0.0, 0.0)
            graded.curve[profile] = distance_curve(n, np.abs(out - ref), allowed, ratio, np.ones(n.shape, bool))
            if below.any():
                graded.notes[profile] = [f"at distance(s) {sorted(set(n[below].tolist()))} the exact log position is an "
                                         "integer: the bucket below, from a log one ulp low, is accepted there"]
        return graded

    def blackbox(self, invoker, dtype, device, probe) -> list:
        return blackbox.bucket_checks(invoker, device, dtype=dtype)

    def locate(self, case, spec, prepared, index) -> str:
        return f"relative position {int(prepared.inputs_f64['relative_positions'][index[0]])} (entry {index[0]})"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        r, out = prepared.inputs_f64["relative_positions"], graded.output_f64
        if out is None:
            return []
        candidates = [("bucket-direction", "the relative position taken as query minus key", lambda: reference(-r, spec)),
                      ("bucket-causal-flag", f"{'causal' if spec.bidirectional else 'bidirectional'} bucketing used "
                       f"where the case is {'bidirectional' if spec.bidirectional else 'causal'}",
                       lambda: reference(r, spec, bidirectional=not spec.bidirectional))]
        if spec.bidirectional:
            candidates.append(("bucket-not-halved", f"{spec.num_buckets} buckets per direction instead of "
                               f"{spec.num_buckets // 2}", lambda: reference(r, spec, num_buckets=2 * spec.num_buckets)))
        candidates.append(("bucket-log-precision", "the log position computed in bfloat16: buckets off by one "
                           "away from the edges", lambda: low_precision(r, spec)))
        for code, message, model in candidates:
            if np.array_equal(out, model()):
                return [Diagnosis(code, message)]
        if clamp_missing(r.astype(np.int64), out.astype(np.int64), spec):
            last = spec.num_buckets // 2 if spec.bidirectional else spec.num_buckets
            return [Diagnosis("bucket-clamp-missing", f"no clamp to the last bucket: distances >= "
                              f"{spec.max_distance} get buckets past {last - 1}, the direction's last")]
        return []


PROTOCOL = T5Bucket()
