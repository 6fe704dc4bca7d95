"""Why an xpos.apply output fails: an overflow from a missing centring, rows past batch row 0 left
as given (a fused kernel launched over one row at a batched decode step), pairs of the other
layout (at their own fitted centring), the key scaled the wrong way, or other gamma / scale base
(fitted from the query's scales)."""

from __future__ import annotations

import dataclasses

import numpy as np

from conformance.core.tensors import torch_dtype
from conformance.results import Diagnosis
from conformance.xpos.rotation import fit_centre, pair_norms, reference
from reference import xpos

TOL = 1e-2


def _rel(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def _log_scales(x_out, x_in, spec):
    """log(|out pair| / |in pair|) [b, s, h, r/2]: the scale applied (rotations keep norms)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(pair_norms(x_out, spec) / pair_norms(x_in, spec))


def layout_swapped(q, k, qo, ko, pos, spec) -> list:
    """[Diagnosis] when the outputs are the other layout's xPos (its own centring fitted, since
    any common c is correct) far better than the case's own at the centring found."""
    if spec.rotary_dim < 4:
        return []  # one pair: both layouts pair the same two features
    other = dataclasses.replace(spec, layout="half" if spec.layout == "interleaved" else "interleaved")
    own_c, other_c = fit_centre(q, k, qo, ko, pos, spec) or 0.0, fit_centre(q, k, qo, ko, pos, other) or 0.0
    own = max(_rel(a, b) for a, b in zip((qo, ko), reference(q, k, pos, spec, own_c)))
    miss = max(_rel(a, b) for a, b in zip((qo, ko), reference(q, k, pos, other, other_c)))
    if miss <= TOL and miss < 0.1 * own:
        pairs = "(j, j + r/2)" if other.layout == "half" else "(2i, 2i + 1)"
        return [Diagnosis("layout-swapped", f"pairs follow the {other.layout} layout {pairs}, not the case's "
                          f"{spec.layout} layout (centring c = {other_c:g} for them)")]
    return []


def diagnose(spec, prepared, graded, dtype) -> list:
    import torch

    q, k, pos = (prepared.inputs_f64[r] for r in ("q", "k", "positions"))
    if graded.output_f64 is None:
        return []
    qo, ko = graded.output_f64
    if not (np.all(np.isfinite(qo)) and np.all(np.isfinite(ko))):
        centre = float(np.round(np.mean(pos)))
        centred = reference(q, k, pos, spec, centre)
        limit = float(torch.finfo(torch_dtype(dtype)).max)
        if all(np.max(np.abs(x)) < limit for x in centred):
            bad = np.unique(pos[np.any(~np.isfinite(np.stack([qo, ko])), axis=(0, 3, 4))])
            return [Diagnosis("centring-missing", f"the outputs overflow at positions {bad[:4].tolist()}: "
                              f"zeta^(-m/B) without centring exceeds {dtype}'s range there; centre the exponent "
                              f"(any common c cancels in q . k, e.g. c = {centre:g})")]
        return []
    if q.shape[0] > 1 and max(_rel(qo[1:], q[1:]), _rel(ko[1:], k[1:])) <= 1e-3 < _rel(qo[:1], q[:1]):
        return [Diagnosis("batch-row-zero-only", f"only batch row 0 is rotated and scaled: rows 1.. of q and k "
                          f"come back as given (batch of {q.shape[0]} rows)")]
    swapped = layout_swapped(q, k, qo, ko, pos, spec)
    if swapped:
        return swapped
    lnz = np.log(xpos.zeta(spec.rotary_dim, spec.gamma))
    aq = _log_scales(qo, q, spec)
    ok = np.abs(lnz) >= 0.05
    # The centring seen from the query alone: log scale = (m - c) ln zeta / B.
    centre_q = float(np.nanmedian((pos[..., None, None] - aq * spec.scale_base / lnz)[..., ok]))
    _, kr = reference(q, k, pos, spec, centre_q)
    k_as_query, _ = reference(k, k, pos, spec, centre_q)
    if _rel(ko, k_as_query) <= TOL and _rel(ko, k_as_query) < 0.1 * _rel(ko, kr):
        return [Diagnosis("scale-direction", "the key is scaled by zeta^(+(n - c)/B), like the query, instead of "
                          "zeta^(-(n - c)/B): the logit factor no longer depends on m - n alone")]
    # Other gamma or scale base: the slope of the query's log scale against the position.
    m = np.broadcast_to(pos[..., None, None], aq.shape).astype(np.float64)
    if np.ptp(pos) > 0:
        slopes = []
        for i in range(lnz.size):
            a, x = aq[..., i].reshape(-1), m[..., i].reshape(-1)
            keep = np.isfinite(a)
            slopes.append(np.polyfit(x[keep], a[keep], 1)[0] if keep.sum() > 1 else np.nan)
        slopes = np.array(slopes)
        rho = slopes[ok] * spec.scale_base / lnz[ok]
        if np.all(np.isfinite(rho)) and np.ptp(rho) <= TOL * np.max(np.abs(rho)) and abs(np.mean(rho) - 1) > TOL:
            return [Diagnosis("scale-parameters", f"scale base {spec.scale_base / np.mean(rho):.4g} used instead of "
                              f"{spec.scale_base:g} (the query's scale exponent grows {np.mean(rho):.3g} times as fast)")]
        z0 = float(np.exp(slopes[0] * spec.scale_base))
        gamma = z0 / (1 - z0) if 0 < z0 < 1 else np.nan
        if np.isfinite(gamma) and abs(gamma - spec.gamma) > TOL * spec.gamma:
            fitted = np.log(xpos.zeta(spec.rotary_dim, gamma)) / spec.scale_base
            if np.nanmax(np.abs(fitted[ok] - slopes[ok]) / np.abs(fitted[ok])) <= 0.05:
                return [Diagnosis("scale-parameters", f"gamma {gamma:.3g} used instead of {spec.gamma:g} "
                                  f"(zeta_0 = {z0:.4g})")]
    return []
