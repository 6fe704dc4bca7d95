"""Why a gaussian_rope.apply output fails: the kernel first, then the rotation.

1. The amplitude: each candidate kernel mistake (missing, K of the token index instead of the
   position, amplitudes or widths swapped, one Gaussian term only) gives a per-token amplitude
   A(m); the one whose A(m) R_m x explains the output far better than K(m) R_m x is reported as
   ``kernel-mismatch``. Failing a named candidate, an amplitude fitted per token that departs from
   K(m) while the rotation itself matches is reported with the measured values.
2. The rotation: with K(m) divided out (tokens where K underflows are left out), the output goes
   through RoPE's diagnosis: layout, pair angles (seed document 002's own code), positions,
   frequencies. It is reached as the rope.apply protocol's public ``diagnose`` hook through the
   registry (conformance.core.registry), never by importing the rope family's modules.
"""

from __future__ import annotations

import numpy as np

from conformance.core import registry, rotation_reference
from conformance.core.protocol import Graded, Prepared
from conformance.gaussian_rope.kernel import amplitude
from conformance.results import Diagnosis
from reference import gaussian_rope

TINY = 1e-30  # tokens whose K(m) is below this carry no usable information about the rotation
EXPLAINS = 1e-2  # a candidate must fit to this relative residual...
BETTER = 0.1  # ...and ten times better than the case's kernel


def _candidates(spec, positions):
    k = dict(spec.kernel)
    index = np.broadcast_to(np.arange(positions.shape[1]), positions.shape)
    yield "the kernel is missing (K = 1)", np.ones(positions.shape)
    yield ("K is evaluated at the token index (arange(seq)) instead of the position",
           gaussian_rope.kernel(index, k))
    if k["a1"] != k["a2"]:
        yield (f"amplitudes swapped (a1 = {k['a2']:g}, a2 = {k['a1']:g})",
               gaussian_rope.kernel(positions, {**k, "a1": k["a2"], "a2": k["a1"]}))
    if k["s1"] != k["s2"]:
        yield (f"widths swapped (s1 = {k['s2']:g}, s2 = {k['s1']:g})",
               gaussian_rope.kernel(positions, {**k, "s1": k["s2"], "s2": k["s1"]}))
    yield "only the first Gaussian term (a2 term dropped)", gaussian_rope.kernel(positions, {**k, "a2": 0.0})
    yield "exp(-m^2 / s^2) without the factor 2", gaussian_rope.kernel(
        positions, {**k, "s1": k["s1"] / np.sqrt(2.0), "s2": k["s2"] / np.sqrt(2.0)})


def _rel(out, model):
    """||out - model|| / ||model||: how well a model of the output explains it."""
    return float(np.sqrt(np.sum((out - model) ** 2)) / max(np.sqrt(np.sum(model ** 2)), 1e-300))


def diagnose(spec, prepared, graded, dtype) -> list:
    x, pos, out = prepared.inputs_f64["x"], prepared.inputs_f64["positions"], graded.output_f64
    if out is None or not np.all(np.isfinite(out)):
        return []
    rot = rotation_reference.apply(x, pos, spec, spec.layout)  # R_m x, no kernel
    amp = amplitude(pos, spec)
    rope_apply = registry.get("rope.apply")
    expected = amp[:, :, None, None] * rot
    base = _rel(out, expected)
    candidates = list(_candidates(spec, pos))
    for message, cand in candidates:  # over every token: an underflowed K is a kernel too
        fit = _rel(out, cand[:, :, None, None] * rot)
        if fit <= EXPLAINS and fit <= BETTER * base:
            return [Diagnosis("kernel-mismatch", message)]
    valid = amp > TINY
    if not valid.any():
        return []
    sel = valid[:, :, None, None] & np.ones(out.shape, dtype=bool)

    def rotation(amplitude):
        """RoPE's diagnosis of the output with this amplitude divided out (tokens where it is
        unusable look correct)."""
        ok = valid & (amplitude > TINY)
        unscaled = np.where(ok[:, :, None, None], out / np.where(ok, amplitude, 1.0)[:, :, None, None], rot)
        return rope_apply.diagnose(None, spec, Prepared((), {"x": x, "positions": pos}),
                                   Graded(output_f64=unscaled), dtype)

    found = rotation(amp)
    if found:
        return found
    for message, cand in candidates:  # two mistakes at once: a kernel one and a rotation one
        found = rotation(cand)
        if found and not any(d.code == "attention-factor" for d in found):
            return [Diagnosis("kernel-mismatch", message)] + found
    # A per-token amplitude that departs from K(m) while the rotation matches.
    dots = np.sum((out * rot).reshape(out.shape[0], out.shape[1], -1), axis=-1)
    norms = np.sum((rot * rot).reshape(rot.shape[0], rot.shape[1], -1), axis=-1)
    fitted = np.where(norms > 0, dots / np.where(norms > 0, norms, 1.0), np.nan)
    resid = _rel(out[sel], (fitted[:, :, None, None] * rot)[sel])
    dev = np.where(valid, np.abs(fitted - amp) / np.where(valid, amp, 1.0), 0.0)
    if resid <= EXPLAINS and np.nanmax(dev) > EXPLAINS:
        b, s = np.unravel_index(int(np.nanargmax(dev)), dev.shape)
        return [Diagnosis("kernel-mismatch", f"the output's amplitude at position {int(pos[b, s])} is "
                          f"{fitted[b, s]:.4g}, the case's kernel gives K = {amp[b, s]:.4g}")]
    return []
