"""Explain a failing RoPE output: the closest mutant of the reference names the fault.

For a failing output y this module builds *mutants* of the float64 reference, each the output of a
known bug (other layout, negated angles, shifted or ignored positions, another base, the wrong
frequency exponent, low-precision angles, mismatched pair angles, rotary_dim confusion, a constant
scale, a position scaling that the case does not have), and asks conformance.core.mutants's
``closest_mutant`` which one explains y (over at most MAX_TOKENS tokens x MAX_HEADS heads, evenly
sampled). The noise floor F is the typical rms deviation of a *correct* implementation: rounding
in the dtype (0.5 u_T per element, measured) plus float32 angles (2**-23 |m theta|, twice their
rms). Mutants are listed more specific first, so that e.g. base**(-i/d) (which equals the base
sqrt(base) with the right exponent) is reported as ``frequency-exponent``, not ``wrong-base``.
When no mutant matches exactly, a statistical test still names low-precision angles: an angle
error that is far above the dtype's rounding, grows with |m theta| and has no consistent sign.

The frequency mutants (exponent, rotary_dim, scaling, base, a uniform ratio) are built once, by
``frequency_ladders``, and turned into outputs by each protocol (apply: rotated x; cache: the
cos/sin table; frequencies: inv_freq itself).

Continuous parameters are fitted, not only enumerated: the base from the effective frequencies
(log theta_i linear in i), a uniform frequency ratio, a constant output scale (least squares),
and a position offset (effective positions recovered coarse-to-fine from low to high frequency).

The implementation's *effective frequency per pair* is recovered from its output
(``recover_effective_frequency``): per pair the phase of out * conj(x) (as complex numbers in
the declared layout), summed over heads, unwrapped across the positions sorted by |m| with the
reference frequency as prior, and fitted as phase = theta * m. Where the smallest non-zero |m|
makes that unambiguous, the first pair that departs from the reference and its ratio are added to
the message.

The codes are RoPE's (conformance/rope/__init__.py, FAMILY.codes); the runner's output
validation owns the core codes (input-mutated, dtype-changed, ...). Non-finite output elements
are ignored here.

Shapes (rope.apply): x, output [batch, seq, heads, head_dim] float64; positions int64 [batch, seq].
numpy only; never imports torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from conformance.core.mutants import Mutant, closest_mutant, rms, round_to
from conformance.core.tolerance import unit_roundoff as _unit_roundoff
from conformance.results import Diagnosis
from conformance.core.rotation_reference import frequencies as reference_frequencies
from reference import rope
from reference.numerics import scaling as scaling_types
from reference.rope import cos_sin, pair_indices, rotate_pairs

# Upper bound on the work: the diagnosis looks at most this many tokens and heads.
MAX_TOKENS = 96
MAX_HEADS = 4

COMMON_BASES = (1e4, 5e4, 1e5, 5e5, 1e6, 1e7)
SCALING_FACTORS = (2.0, 4.0, 8.0, 16.0)
OFFSETS = (1, -1, 2, -2, 3, -3, 4, -4)
# Fitted frequency mutants (base, frequency ratio) need at least this many values to mean anything.
MIN_VALUES_TO_FIT = 8
# A recovered frequency counts only where it is unambiguous for any true frequency up to this many
# times the reference's (capped at pi).
RELIABLE_RATIO = 16.0
# Codes whose mutants change the frequencies: their message gets the effective-frequency note.
FREQUENCY_CODES = ("rotation-reversed", "wrong-base", "frequency-exponent", "rotary-dim-mismatch",
                   "scaling-mismatch")


def unit_roundoff(dtype) -> float:
    """u_T of the dtype; float32's for a dtype the tolerance model does not know."""
    return _unit_roundoff(dtype, default=2.0**-24)


# --------------------------------------------------------------------------------------------
# Frequencies and rotations (float64)
# --------------------------------------------------------------------------------------------


def ladder(rotary_dim: int, base: float, denominator: float, *, step: float = 2.0, start: float = 0.0):
    """theta_i = base ** (-(step * i + start) / denominator), i = 0..rotary_dim/2-1 (float64).

    step 2, start 0, denominator r is RoFormer's theta_i = base**(-2i/r); the other settings are
    the exponent bugs (step 1: base**(-i/r); start 2: 1-based pair index; denominator head_dim).
    """
    i = np.arange(rotary_dim // 2, dtype=np.float64)
    return np.power(float(base), -(step * i + start) / float(denominator))


def rotate_elementwise(x, phi, *, rotate: str, expand: str, rotary_dim: int, scale=1.0):
    """x * C + rotate(x) * S with per-feature angles built from the pair angles phi.

    rotate: "half" (rotate_half: [-x2, x1]) or "interleaved" (rotate_every_two);
    expand: "cat" (feature j uses pair j mod r/2, HF's cat(freqs, freqs)) or "repeat"
    (feature j uses pair j // 2, GPT-J's repeat_interleave). The matching combinations are
    the two correct layouts; the crossed ones are the pair-angle-mismatch bugs.
    x [b, s, h, d], phi [b, s, r/2]; returns float64 [b, s, h, d] (tail copied).
    """
    r = rotary_dim
    out = np.array(x, dtype=np.float64, copy=True)
    xr = out[..., :r].copy()
    j = np.arange(r)
    idx = j % (r // 2) if expand == "cat" else j // 2
    ang = phi[..., idx][:, :, None, :]
    if rotate == "half":
        rot = np.concatenate([-xr[..., r // 2 :], xr[..., : r // 2]], axis=-1)
    else:
        rot = np.empty_like(xr)
        rot[..., 0::2] = -xr[..., 1::2]
        rot[..., 1::2] = xr[..., 0::2]
    out[..., :r] = scale * (xr * np.cos(ang) + rot * np.sin(ang))
    return out


def _tables(x, c, s, layout, rotary_dim, scale=1.0):
    """x rotated with the given cos and sin tables [b, s, r/2] (not necessarily of one angle)."""
    return rotate_pairs(x, scale * c, scale * s, layout=layout, rotary_dim=rotary_dim)


# The two orders of the rotary features that swap one pair layout's storage for the other's:
# evens first, then odds (de-interleaved) and its inverse (re-interleaved).
def evens_first(rotary_dim: int) -> np.ndarray:
    return np.concatenate([np.arange(0, rotary_dim, 2), np.arange(1, rotary_dim, 2)])


def permuted_mutants(reference, rotary_dim) -> list:
    """output-permuted: the reference with its rotary features in the other layout's order."""
    r = int(rotary_dim)
    deinterleave = evens_first(r)
    out = []
    for perm, what in ((deinterleave, "returned de-interleaved: the even features first, then the odd ones "
                        "(rotated in interleaved pairs, stored as DeepSeek-V3's Hugging Face port permutes "
                        "q_pe and k_pe)"),
                       (np.argsort(deinterleave), "returned interleaved: feature 2i holds feature i and "
                        f"2i+1 feature i + {r // 2} (rotated in half pairs, stored in the interleaved order)")):
        def permuted(perm=perm):
            y = reference.copy()
            y[..., :r] = reference[..., perm]
            return y

        out.append(Mutant("output-permuted", f"every value right but in another feature slot: the rotary "
                          f"features {what}", permuted, kind="layout"))
    return out


def _rotate(x, phi, layout, rotary_dim, scale=1.0, table_dtype=None):
    """x rotated by the angles phi [b, s, r/2]; table_dtype rounds the cos/sin tables first."""
    c, s = np.cos(phi), np.sin(phi)
    if table_dtype is not None:
        c, s = round_to(c, table_dtype), round_to(s, table_dtype)
    return rotate_pairs(x, scale * c, scale * s, layout=layout, rotary_dim=rotary_dim)


# --------------------------------------------------------------------------------------------
# Effective frequencies and positions recovered from an output
# --------------------------------------------------------------------------------------------


def _wrap(a):
    return (a + np.pi) % (2.0 * np.pi) - np.pi


def _pair_products(x, output, layout, rotary_dim):
    """out_pair * conj(x_pair) as complex [b, s, h, r/2]; zero where anything is non-finite."""
    first, second = pair_indices(rotary_dim, layout)
    zin = x[..., first] + 1j * x[..., second]
    zout = output[..., first] + 1j * output[..., second]
    prod = zout * np.conj(zin)
    prod[~np.isfinite(prod)] = 0.0
    return prod


@dataclass
class EffectiveFrequency:
    """theta per pair recovered from an output (NaN where the data says nothing).

    theta     float64 [r/2]
    reliable  bool [r/2]: the smallest non-zero |m| used made the phase unambiguous
    min_abs_position  the smallest non-zero |m| in the data (0 when there is none)
    max_abs_position  the largest |m| (the fit's lever arm: theta's error is ~ phase noise / it)
    """

    theta: np.ndarray
    reliable: np.ndarray
    min_abs_position: int
    max_abs_position: int = 0


def recover_effective_frequency(x, positions, output, *, layout, rotary_dim, prior=None):
    """The implementation's frequency per pair, fitted from its output.

    For pair i and each distinct non-zero position m, w = sum over tokens at m and heads of
    out_pair * conj(x_pair) has phase m * theta_i (mod 2 pi) for a rotation by m * theta_i.
    Positions are taken in order of increasing |m|; each phase is unwrapped to the branch closest
    to the current estimate (the prior, e.g. the reference theta, for the first) and theta is
    refitted by weighted least squares through the origin. x, output [b, s, h, d]; positions
    [b, s]; returns EffectiveFrequency.
    """
    x = np.asarray(x, dtype=np.float64)
    output = np.asarray(output, dtype=np.float64)
    m = np.asarray(positions, dtype=np.int64)
    half = rotary_dim // 2
    prod = _pair_products(x, output, layout, rotary_dim).sum(axis=2)  # [b, s, r/2]
    flat_m = m.reshape(-1)
    flat_w = prod.reshape(-1, half)
    uniq = np.unique(flat_m[flat_m != 0])
    theta = np.full(half, np.nan)
    reliable = np.zeros(half, dtype=bool)
    if uniq.size == 0:
        return EffectiveFrequency(theta, reliable, 0)
    w = np.stack([flat_w[flat_m == u].sum(axis=0) for u in uniq])  # [n_pos, r/2]
    order = np.argsort(np.abs(uniq), kind="stable")
    uniq, w = uniq[order].astype(np.float64), w[order]
    prior = None if prior is None else np.asarray(prior, dtype=np.float64)
    for i in range(half):
        weights = np.abs(w[:, i])
        if not np.any(weights > 0):
            continue
        phases = np.angle(w[:, i])
        est = prior[i] if prior is not None else 0.0
        num = den = 0.0
        for mk, ph, wk in zip(uniq, phases, weights):
            if wk <= 0:
                continue
            total = est * mk + _wrap(ph - est * mk)
            num += wk * mk * total
            den += wk * mk * mk
            est = num / den
        theta[i] = est
        # Unambiguous when the nearest alias of the first phase, est +- 2 pi / |m1|, lies outside
        # the plausible range |theta| <= min(pi, RELIABLE_RATIO * theta_prior).
        first = abs(uniq[np.argmax(weights > 0)])
        plausible = np.pi if prior is None else min(np.pi, RELIABLE_RATIO * abs(prior[i]))
        reliable[i] = 2.0 * np.pi / first > abs(est) + plausible
    return EffectiveFrequency(theta, reliable, int(abs(uniq[0])), int(np.max(np.abs(uniq))))


def frequency_departure(effective: EffectiveFrequency, theta_ref, *, rtol=2e-3, phase_noise=2.0**-6):
    """(first pair index, ratio theta_eff / theta_ref) where a reliable pair departs, or None.

    A pair departs when |ratio - 1| exceeds rtol and the phase noise (radians; default about 4
    bfloat16 roundings) over the largest |m|, relative to theta_ref: a slow pair seen only at
    small positions has too little phase to tell.
    """
    ref = np.asarray(theta_ref, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = effective.theta / ref
        tol = np.maximum(rtol, phase_noise / (max(effective.max_abs_position, 1) * np.abs(ref)))
    bad = effective.reliable & np.isfinite(ratio) & (np.abs(ratio - 1.0) > tol)
    if not np.any(bad):
        return None
    i = int(np.argmax(bad))
    return i, float(ratio[i])


def recover_effective_positions(x, positions, output, *, layout, rotary_dim, theta):
    """The position each token was rotated by, assuming the frequencies theta: float64 [b, s].

    Coarse to fine: start from the given position, correct it with the lowest frequency (its
    phase is unambiguous for offsets up to pi / theta_min), then unwrap each higher frequency
    against the running estimate and refit m by least squares over the pairs used so far.
    """
    prod = _pair_products(np.asarray(x, float), np.asarray(output, float), layout, rotary_dim).sum(axis=2)
    m0 = np.asarray(positions, dtype=np.float64)
    theta = np.asarray(theta, dtype=np.float64)
    order = np.argsort(theta, kind="stable")  # lowest frequency first
    est = m0.copy()
    num = np.zeros_like(m0)
    den = np.zeros_like(m0)
    for i in order:
        if not theta[i] > 0:
            continue
        wk = np.abs(prod[..., i])
        ph = np.angle(prod[..., i])
        total = est * theta[i] + _wrap(ph - est * theta[i])
        num += wk * theta[i] * total
        den += wk * theta[i] ** 2
        with np.errstate(divide="ignore", invalid="ignore"):
            est = np.where(den > 0, num / den, est)
    return est


def fit_base(effective: EffectiveFrequency, rotary_dim: int) -> Optional[float]:
    """Base b' with theta_i = b'**(-2i/r) fitted to the reliable pairs i >= 1 (log-linear)."""
    i = np.arange(rotary_dim // 2, dtype=np.float64)
    ok = effective.reliable & (i >= 1) & np.isfinite(effective.theta) & (effective.theta > 0)
    if np.count_nonzero(ok) < 2:
        return None
    a = 2.0 * i[ok] / rotary_dim
    ln_b = -np.sum(a * np.log(effective.theta[ok])) / np.sum(a * a)
    if not np.isfinite(ln_b) or ln_b <= 0 or ln_b > 100:
        return None
    return float(np.exp(ln_b))


# --------------------------------------------------------------------------------------------
# Mutants and scoring
# --------------------------------------------------------------------------------------------


def _subsample(x, positions, output):
    """Keep at most MAX_TOKENS tokens (evenly spaced, as [1, n, h, d]) and MAX_HEADS heads.

    Returns x, positions, output, and the sequence index of each kept token.
    """
    b, s = positions.shape
    n = b * s
    keep = np.unique(np.linspace(0, n - 1, min(n, MAX_TOKENS)).round().astype(np.int64))
    heads = min(x.shape[2], MAX_HEADS)
    bi, si = keep // s, keep % s
    xs = x[bi, si][None, :, :heads, :]
    ys = output[bi, si][None, :, :heads, :]
    ps = positions[bi, si][None, :]
    return xs, ps, ys, si


def _fmt_base(b):
    if b >= 1e4 and abs(b - round(b, -3)) <= 1e-6 * b:
        return f"{b:.0f}"
    return f"{b:.6g}"


# --------------------------------------------------------------------------------------------
# rope.apply
# --------------------------------------------------------------------------------------------


def apply_mutants(x, positions, output, spec, *, seq_index=None, row0=None, batch_index=None,
                  full_positions=None):
    """(reference output, list of Mutant, recovered effective frequencies, reference theta) for
    one rope.apply input (see module docstring). batch_index [b, s]: the batch row each token
    comes from and full_positions [B, S] the whole case's positions, when x is a subsample (the
    shape mutants: batch row 0 only, positions from the heads axis, an unrotated tile tail)."""
    r, d, base = int(spec.rotary_dim), int(spec.head_dim), float(spec.base)
    layout = spec.layout
    other = "interleaved" if layout == "half" else "half"
    theta, af = reference_frequencies(spec)
    m = np.asarray(positions, dtype=np.int64)
    mf = m.astype(np.float64)
    b, s = m.shape
    seq_index = np.broadcast_to(np.arange(s), (b, s)) if seq_index is None else seq_index
    if row0 is None and b > 1 and not np.all(m == m[:1]):
        row0 = np.broadcast_to(mf[:1], (b, s))
    phi = mf[..., None] * theta

    if spec.scaling is None:
        c, sn = cos_sin(m, r, base, backend="numpy")
        reference = rotate_pairs(x, af * c, af * sn, layout=layout, rotary_dim=r)
    else:
        reference = _rotate(x, phi, layout, r, af)

    def rot(angles, *, lay=layout, scale=af, rd=r, tables=None):
        return lambda: _rotate(x, angles() if callable(angles) else angles, lay, rd, scale, tables)

    def with_theta(th, scale=af):
        return rot(lambda: mf[..., None] * th, scale=scale)

    mutants: list[Mutant] = []
    add = mutants.append

    # Structure of the pairs.
    if r >= 4:
        add(Mutant("layout-swapped", f"pairs follow the {other} layout, not the declared {layout} layout",
                   rot(phi, lay=other), kind="layout"))
    add(Mutant("rotation-reversed", "pairs are rotated by -m*theta (the sine has the wrong sign)",
               rot(-phi)))
    if r >= 4:
        for rot_kind, expand in (("half", "repeat"), ("interleaved", "cat")):
            note = ("rotate_half with repeat-interleaved cos/sin" if rot_kind == "half"
                    else "rotate_every_two with cat(freqs, freqs) cos/sin")
            add(Mutant("pair-angle-mismatch",
                       f"the two elements of a pair are rotated by different angles ({note})",
                       (lambda rk=rot_kind, ex=expand: rotate_elementwise(
                           x, phi, rotate=rk, expand=ex, rotary_dim=r, scale=af)), kind="layout"))

    # Tables fed where the angles are expected (Megatron's cos(cos theta)): position 0 turns by
    # cos 0 = 1 radian instead of staying put.
    add(Mutant("cos-sin-as-angles", "cos and sin fed where the angles are expected: every pair turns by "
               "cos(m*theta) radians (cos(cos(m*theta)), sin(cos(m*theta))), so position 0 is not the identity",
               rot(np.cos(phi))))
    add(Mutant("cos-sin-as-angles", "cos and sin fed where the angles are expected: cos(cos(m*theta)) and "
               "sin(sin(m*theta)) applied, so position 0 is not the identity",
               lambda: _tables(x, np.cos(np.cos(phi)), np.sin(np.sin(phi)), layout, r, af)))
    # The right values in other feature slots: rotated in one layout's pairs, stored in the other's
    # order (DeepSeek-V3's HF port permutes q_pe / k_pe to interleaved-as-half and back).
    if r >= 4:
        mutants += permuted_mutants(reference, r)

    # Positions. Each shift also with float32 angles (the shifted code's own arithmetic): at a
    # position whose bfloat16 is the next integer (2047) only that variant fits as well as
    # "positions cast to bfloat16", and the shift, listed first, then explains the case.
    th32 = round_to(theta, "float32")
    for k in OFFSETS:
        add(Mutant("position-offset", f"positions shifted by {k:+d}", rot((mf + k)[..., None] * theta)))
        add(Mutant("position-offset", f"positions shifted by {k:+d}",
                   rot(lambda k=k: round_to(round_to(mf + k, "float32")[..., None] * th32, "float32"))))
    add(Mutant("positions-ignored", "positions ignored: arange(seq) used instead of the given positions",
               rot(seq_index.astype(np.float64)[..., None] * theta)))
    add(Mutant("positions-ignored", "positions ignored: every token rotated as position 0",
               rot(np.zeros_like(phi))))
    if row0 is not None:
        add(Mutant("positions-ignored", "positions of batch row 0 used for every row",
                   rot(row0[..., None] * theta)))

    mutants += shape_mutants(x, mf, theta, spec, rot, reference, seq_index, batch_index, full_positions)

    # Low-precision angles (exact emulations of the common ways to get them).
    for low in ("bfloat16", "float16"):
        th_low = round_to(theta, low)
        m_low = round_to(mf, low)[..., None]
        variants = (
            ("angles computed in {t}", lambda tl=th_low, ml=m_low, lo=low: round_to(ml * tl, lo)),
            ("positions cast to {t} before the angle product",
             lambda ml=m_low: round_to(ml * th32, "float32")),
            ("angles rounded to {t}", lambda lo=low: round_to(round_to(mf[..., None] * th32, "float32"), lo)),
            ("inv_freq rounded to {t}", lambda tl=th_low: round_to(mf[..., None] * tl, "float32")),
        )
        for text, fn in variants:
            add(Mutant("angle-precision", text.format(t=low) + ": error grows with position", rot(fn)))
        # The same with cos/sin evaluated in the low type too (torch keeps the dtype of the angles).
        for text, fn in variants[:1]:
            add(Mutant("angle-precision", text.format(t=low) + " (cos/sin too): error grows with position",
                       rot(fn, tables=low)))

    # Frequencies: exponent, rotary_dim, scaling, base, a uniform ratio (fitted from the output).
    eff = recover_effective_frequency(x, m, output, layout=layout, rotary_dim=r, prior=theta)
    fit = x.size >= MIN_VALUES_TO_FIT
    for code, message, th, scale in frequency_ladders(
            spec, theta, fitted_base=fit_base(eff, r) if fit else None,
            ratio=_uniform_ratio(eff, theta) if fit else None):
        add(Mutant(code, message, with_theta(th, scale=af if scale is None else scale)))
    if r != d:
        add(Mutant("rotary-dim-mismatch",
                   f"the whole head ({d} features) is rotated instead of the first {r}",
                   rot(lambda: mf[..., None] * ladder(d, base, d), rd=d)))
        add(Mutant("rotary-dim-mismatch",
                   f"the whole head ({d} features) is rotated with rotary_dim {r} in the exponent",
                   rot(lambda: mf[..., None] * ladder(d, base, r), rd=d)))
    est = recover_effective_positions(x, m, output, layout=layout, rotary_dim=r, theta=theta)
    delta = est - mf
    ok = np.isfinite(delta) & (m != 0)
    if np.any(ok):
        k = int(np.round(np.median(delta[ok])))
        if k != 0 and k not in OFFSETS:
            add(Mutant("position-offset", f"positions shifted by {k:+d}", rot((mf + k)[..., None] * theta)))

    # A constant scale (attention factor) of the rotated part or of the whole output.
    for part in ("rotated", "whole"):
        if part == "whole" and r == d:
            continue
        c = _fit_scale(output, reference, r if part == "rotated" else d)
        if c is None:
            continue
        msg = _scale_message(c, af, "output")
        code = "attention-factor"
        if part == "whole":  # the pass-through features too: not an attention factor
            code, msg = "output-scaled", (f"every output element scaled by {c:.4g}, the {d - r} pass-through "
                                          "features too")
        fac = c

        def scaled(fac=fac, part=part):
            out = reference.copy()
            w = r if part == "rotated" else d
            out[..., :w] *= fac
            return out

        add(Mutant(code, msg, scaled, kind="scale"))
    return reference, mutants, eff, theta


TILES = (16, 32, 64, 128)


def shape_mutants(x, mf, theta, spec, rot, reference, seq_index, batch_index, full_positions) -> list:
    """The bugs of kernels that take the shape apart (x, mf [b, s] of the compared tokens):

    batch-row-zero-only        rows other than batch row 0 come back unrotated (a fused kernel
                               launched over one row when every row holds one token)
    positions-from-heads-axis  token t of head h turns by the position of token min(h, S-1) (or
                               h mod S) of its row: the position read with the head index
    tile-tail-unrotated        the tokens past the last full tile of T (T = 16 ... 128) come back
                               unrotated (S not a multiple of T)
    """
    out = []
    if batch_index is not None and np.any(batch_index != 0) and np.any(batch_index == 0):
        keep = (np.asarray(batch_index) == 0)[..., None, None]

        def row_zero_only():
            return np.where(keep, reference, x)

        out.append(Mutant("batch-row-zero-only", "only batch row 0 is rotated: rows 1.. come back unrotated "
                          f"(batch of {int(np.max(batch_index)) + 1}+ rows)", row_zero_only))
    if full_positions is not None and batch_index is not None:
        full = np.asarray(full_positions, dtype=np.float64)
        big_s, heads = full.shape[1], x.shape[2]
        bi = np.asarray(batch_index)
        for how, idx in (("min(h, S-1)", np.minimum(np.arange(heads), big_s - 1)),
                         ("h mod S", np.arange(heads) % big_s)):
            head_pos = full[bi][..., idx]  # [b, s, heads]: the position each head reads
            if np.array_equal(head_pos, np.broadcast_to(mf[..., None], head_pos.shape)):
                continue

            def by_head(head_pos=head_pos):
                cols = [rot(head_pos[..., h, None] * theta)()[:, :, h:h + 1] for h in range(heads)]
                return np.concatenate(cols, axis=2)

            out.append(Mutant("positions-from-heads-axis", f"positions read along the heads axis: head h of every "
                              f"token turns by the position of token {how} of its row", by_head))
    if full_positions is not None:
        big_s = np.asarray(full_positions).shape[1]
        for tile in TILES:
            full_tiles = (big_s // tile) * tile
            if big_s <= tile or big_s == full_tiles:
                continue
            tail = (np.asarray(seq_index) >= full_tiles)[..., None, None]
            if not np.any(tail):
                continue

            def tail_unrotated(tail=tail):
                return np.where(tail, x, reference)

            out.append(Mutant("tile-tail-unrotated", f"the last {big_s - full_tiles} of {big_s} tokens (past the "
                              f"last full tile of {tile}) come back unrotated", tail_unrotated))
    return out


def frequency_ladders(spec, theta, *, fitted_base=None, ratio=None) -> list:
    """The frequency mutants shared by every RoPE protocol, most specific first:
    [(code, message, mutant inv_freq [r/2], attention scale or None for the case's)].

    The frequency exponent (base**(-i/d), tensor2tensor's base**(-i/(d/2-1)), a 1-based pair
    index), head_dim in place of rotary_dim, position scalings the case does not have (or the
    case's scaling left out), the common bases, and, when given, a base fitted from the
    implementation's effective frequencies and a uniform frequency ratio.
    """
    r, d, base = int(spec.rotary_dim), int(spec.head_dim), float(spec.base)
    out = [("frequency-exponent", "inv_freq uses base**(-i/d) instead of base**(-2i/d)",
            ladder(r, base, r, step=1.0), None)]
    if r >= 4:
        out.append(("frequency-exponent", "inv_freq uses base**(-i/(d/2-1)) instead of base**(-2i/d)",
                    ladder(r, base, r / 2.0 - 1.0, step=1.0), None))
    out.append(("frequency-exponent", "inv_freq uses base**(-2(i+1)/d) (1-based pair index) instead of "
                "base**(-2i/d)", ladder(r, base, r, start=2.0), None))
    if r != d:
        out.append(("rotary-dim-mismatch", f"inv_freq divides by head_dim {d} instead of rotary_dim {r}",
                    ladder(r, base, d), None))
    if spec.scaling is None:
        for f in SCALING_FACTORS:
            out.append(("scaling-mismatch", f"frequencies divided by {f:g}: linear position interpolation "
                        f"(factor {f:g}) applied, but the case has no scaling", theta / f, None))
        if r > 2:
            for f in SCALING_FACTORS:
                nb = base * f ** (r / (r - 2.0))
                out.append(("scaling-mismatch", f"NTK-aware base {_fmt_base(nb)} (factor {f:g}) used, but the "
                            "case has no scaling", ladder(r, nb, r), None))
    else:
        out += scaled_mutants(spec, ladder(r, base, r))
    for cand in COMMON_BASES:
        if abs(cand - base) > 1e-9 * base:
            out.append(("wrong-base", f"base {_fmt_base(cand)} used instead of {_fmt_base(base)}",
                        ladder(r, cand, r), None))
    if fitted_base is not None and abs(fitted_base / base - 1.0) > 1e-3:
        out.append(("wrong-base", f"base {_fmt_base(fitted_base)} (fitted from the effective frequencies) "
                    f"used instead of {_fmt_base(base)}", ladder(r, fitted_base, r), None))
    if ratio is not None and ratio > 0 and abs(ratio - 1.0) > 1e-3:
        out.append(("scaling-mismatch", f"all frequencies scaled by {ratio:.6g} (positions scaled by the "
                    "same factor)", theta * ratio, None))
    return out


def _yarn_reversed(got, plain, factor) -> list:
    """YaRN's ramp reversed (litgpt): the pairs YaRN keeps are interpolated and those it
    interpolates are kept. With w_i = theta'_i / theta_i = 1 - ramp_i (1 - 1/s), the reversed
    blend is w'_i = 1/s + 1 - w_i; with the attention factor left at 1, and with the case's."""
    if got is None or not isinstance(factor, (int, float)) or factor <= 1:
        return []
    theta, af = np.asarray(got[0], dtype=np.float64), float(got[1])
    rev = plain * (1.0 + 1.0 / factor - theta / plain)
    what = (f"YaRN ramp reversed: the high-frequency pairs interpolated and the low-frequency ones kept "
            f"(pair 0 turns by {rev[0]:.4g} per position instead of {theta[0]:.4g})")
    out = [("scaling-mismatch", what + ", attention factor left at 1", rev, 1.0)]
    if af != 1.0:
        out.append(("scaling-mismatch", what + f", attention factor {af:.4g} applied", rev, af))
    return out


def scaled_mutants(spec, plain) -> list:
    """The scaling mistakes of a scaled case, as frequency_ladders entries: the scaling left out,
    another type with the same parameters (static NTK where dynamic is expected, linear, ...),
    the original length read from the extended one (factor x original), LongRoPE's short and long
    factors swapped. Each mutant's frequencies and attention factor come from reference.rope."""
    scaling = dict(spec.scaling)
    rope_type = scaling.pop("rope_type", None) or scaling.pop("type", None) or "default"
    scaling.pop("type", None)
    r, seq_len = int(spec.rotary_dim), spec.seq_len or None
    out = [("scaling-mismatch", f"the case's {rope_type} scaling is not applied", plain, 1.0)]

    def variant(params, other_type=None, n=seq_len):
        try:
            return rope.frequencies(r, float(spec.base), {"rope_type": other_type or rope_type, **params}, n)
        except (ValueError, TypeError, KeyError):
            return None

    big_l, f = scaling.get("original_max_position_embeddings"), scaling.get("factor")
    if rope_type == "yarn":
        out += _yarn_reversed(variant(scaling), plain, f)
    if rope_type == "dynamic" and isinstance(big_l, int) and isinstance(f, (int, float)) and f > 1:
        # vLLM's DynamicNTKScalingRotaryEmbedding: one cache, built for max_position_embeddings =
        # factor x original, so the base is dynamic NTK's at that length whatever seq_len is.
        got = variant(scaling, n=int(big_l * f))
        if got is not None:
            out.append(("scaling-mismatch", f"dynamic NTK's base fixed at the extended length {int(big_l * f)} "
                        f"(factor x original) whatever seq_len ({seq_len}): a static NTK base (vLLM's dynamic "
                        "NTK cache); it must follow seq_len", got[0], got[1]))

    for other in scaling_types.TYPES:
        if other == rope_type:
            continue
        mod = scaling_types.module(other)
        params = {k: v for k, v in scaling.items() if k in mod.REQUIRED or k in mod.OPTIONAL}
        got = variant(params, other)
        if got is None:
            continue
        what = (f"static NTK (factor {scaling.get('factor')}) used where dynamic NTK is expected (the base "
                "must follow seq_len)" if (rope_type, other) == ("dynamic", "ntk") else
                f"{other} scaling used instead of {rope_type}")
        out.append(("scaling-mismatch", what, got[0], got[1]))
    if isinstance(big_l, int) and isinstance(f, (int, float)) and f > 1:
        got = variant({**scaling, "original_max_position_embeddings": int(big_l * f)})
        if got is not None:
            out.append(("scaling-mismatch", f"original_max_position_embeddings read as {int(big_l * f)} (the "
                        f"extended max_position_embeddings) instead of {big_l}", got[0], got[1]))
    if rope_type == "longrope" and isinstance(big_l, int):
        flipped = big_l + 1 if (seq_len or 0) <= big_l else big_l
        got = variant(scaling, n=flipped)
        if got is not None:
            which = "long" if flipped > big_l else "short"
            out.append(("scaling-mismatch", f"LongRoPE's {which} factors used at seq_len {seq_len} (original "
                        f"{big_l})", got[0], got[1]))
    return out


def _scale_message(c, af, what):
    """What a constant scale c of cos/sin (or the rotated output) means when the case's attention
    factor is af."""
    if af != 1.0 and abs(c * af - 1.0) < 1e-2:
        return f"attention factor {af:.4g} not applied"
    if af != 1.0 and abs(c - af) < 1e-2 * af:
        return (f"attention factor {af:.4g} applied twice ({what} scaled by {af * af:.4g}: on cos and sin, "
                "and again on q and k or in the softmax)")
    if af == 1.0:
        return f"{what} scaled by {c:.4g}"
    return f"{what} scaled by {c:.4g} relative to the reference (attention factor {af:.4g})"


def _uniform_ratio(eff, theta):
    """Median theta_eff / theta over reliable pairs, when it is consistent and not 1."""
    ok = eff.reliable & np.isfinite(eff.theta)
    if np.count_nonzero(ok) < 2:
        return None
    q = eff.theta[ok] / theta[ok]
    med = float(np.median(q))
    if not (med > 0 and abs(med - 1.0) > 1e-3):
        return None
    if np.max(np.abs(q / med - 1.0)) > 0.05:
        return None
    return med


def _fit_scale(output, reference, width):
    """Least-squares c with output[..., :width] ~ c * reference[..., :width] (None if ~1)."""
    y = output[..., :width]
    ref = reference[..., :width]
    ok = np.isfinite(y) & np.isfinite(ref)
    den = float(np.sum(ref[ok] ** 2))
    if not den > 0:
        return None
    c = float(np.sum(y[ok] * ref[ok]) / den)
    if not np.isfinite(c) or abs(c - 1.0) < 1e-4 or c <= 0:
        return None
    return c


def _norm_scale(x, output, spec, dtype, af=1.0):
    """The common factor c of every pair's norm, |out_p| = c |x_p|, when there is one (c != af,
    the case's attention factor, which a correct output has).

    A rotation keeps pair norms whatever its angles, so this names a constant scale even where
    the angles are too uncertain to compare outputs (positions near 2**24 in float32).
    """
    r = int(spec.rotary_dim)
    first, second = pair_indices(r, spec.layout)
    nx = np.hypot(x[..., first], x[..., second])
    no = np.hypot(output[..., first], output[..., second])
    ok = np.isfinite(no) & np.isfinite(nx) & (nx > 0)
    if np.count_nonzero(ok) < 2:
        return None
    ok &= nx >= 0.1 * np.median(nx[ok])
    q = no[ok] / nx[ok]
    c = float(np.median(q))
    u = max(unit_roundoff(dtype), 2.0**-24)
    spread = float(np.median(np.abs(q / c - 1.0))) if c > 0 else math.inf
    if not (abs(c / af - 1.0) > 32.0 * u and spread < 0.1 * abs(c / af - 1.0) and spread < 4.0 * u):
        return None
    return c


def _tail_scaled(x, output, rotary_dim, c, dtype) -> bool:
    """Whether the pass-through features (partial rotary) are scaled by c as well."""
    xt, yt = x[..., rotary_dim:], output[..., rotary_dim:]
    ok = np.isfinite(xt) & np.isfinite(yt) & (np.abs(xt) > 0)
    if np.count_nonzero(ok) < 2:
        return False
    q = float(np.median(yt[ok] / xt[ok]))
    return abs(q - c) <= max(16.0 * unit_roundoff(dtype), 1e-3 * abs(c - 1.0))


def _angle_noise(x, positions, output, spec, theta, dtype):
    """Statistical angle-precision test when no exact emulation matched.

    Per element pair, delta = wrap(phase(out * conj x) - m * theta) against |phi| = |m theta|.
    Low-precision angles give |delta| ~ u_low * |phi| with random sign: delta grows with |phi|
    and is far above the output rounding of the dtype. Returns a message or None.
    """
    r = int(spec.rotary_dim)
    prod = _pair_products(x, output, spec.layout, r)
    mag_x = np.abs(prod)
    phi = np.asarray(positions, dtype=np.float64)[:, :, None, None] * theta
    phi = np.broadcast_to(phi, prod.shape)
    if not np.any(mag_x > 0):
        return None
    strong = mag_x > 0.1 * np.median(mag_x[mag_x > 0])
    delta = np.abs(_wrap(np.angle(prod) - phi))
    sel = strong & (np.abs(phi) >= 64.0)
    low_sel = strong & (np.abs(phi) < 8.0) & (np.abs(phi) > 0)
    if np.count_nonzero(sel) < 16:
        return None
    noise = 8.0 * unit_roundoff(dtype)
    big = float(np.median(delta[sel]))
    rel = float(np.median(delta[sel] / np.abs(phi[sel])))
    # Rounding the angle to bfloat16 / float16 gives a median relative error of about 2**-10 /
    # 2**-13 (float32: 2**-25). A median |delta| near pi/2 means the phases are random (wrong
    # frequencies, or positions past what any float type resolves), not rounded.
    if big < 4.0 * noise or not 2.0**-16 <= rel <= 2.0**-7 or big > 0.5:
        return None
    if np.count_nonzero(low_sel) >= 8 and float(np.median(delta[low_sel])) * 4.0 > big:
        return None  # does not grow with the angle
    signed = _wrap(np.angle(prod) - phi)[sel]
    frac_pos = float(np.mean(signed * np.sign(phi[sel]) > 0))
    if not 0.2 <= frac_pos <= 0.8:
        return None  # systematic, not rounding
    return (f"angles computed in low precision (median relative angle error {rel:.2g}): "
            "error grows with position")


def noise_floor(x, positions, spec, theta, dtype) -> float:
    """Typical rms deviation of a correct implementation, per element.

    Per pair (0.5 u_T + 2**-23 |phi|) * |pair|, rms over pairs, divided by sqrt(2) for the two
    elements. 0.5 u_T is the measured rms of rounding cos/sin, products and sum in the dtype
    (about 0.46 u_T for bfloat16 with x ~ N(0, 1)); 2**-23 |phi| is twice the rms angle error of
    float32 angles (theta and the product each rounded once), which mainstream implementations
    use, so that a float32-angle emulation is never mistaken for a bug.
    """
    r = int(spec.rotary_dim)
    first, second = pair_indices(r, spec.layout)
    mag = np.hypot(x[..., first], x[..., second])
    phi = np.abs(np.asarray(positions, dtype=np.float64))[:, :, None, None] * theta
    tol = (0.5 * unit_roundoff(dtype) + 2.0**-23 * phi) * mag
    tol = tol[np.isfinite(tol)]
    return float(np.sqrt(np.mean(tol * tol) / 2.0)) if tol.size else 0.0


def diagnose_apply(x, positions, output, spec, dtype) -> list:
    """Diagnoses for one rope.apply output (arrays in float64; see module docstring)."""
    x = np.asarray(x, dtype=np.float64)
    output = np.asarray(output, dtype=np.float64)
    positions = np.asarray(positions, dtype=np.int64)
    if x.ndim != 4 or output.shape != x.shape or positions.shape != x.shape[:2]:
        return []
    r = int(spec.rotary_dim)
    if r < 2 or r > x.shape[3] or r % 2:
        return []
    xs, ps, ys, si = _subsample(x, positions, output)
    bi = np.unique(np.linspace(0, positions.size - 1, min(positions.size, MAX_TOKENS)).round().astype(np.int64))
    bi = (bi // positions.shape[1])[None, :]  # the batch row of each kept token (as _subsample keeps them)
    row0 = None
    if positions.shape[0] > 1 and not np.all(positions == positions[:1]):
        row0 = positions[0, si][None, :].astype(np.float64)
    finite_x = np.isfinite(xs)
    mask = np.isfinite(ys) & finite_x
    if np.count_nonzero(mask) < 2:
        return []
    xs = np.where(finite_x, xs, 0.0)
    reference, mutants, eff, theta = apply_mutants(
        xs, ps, np.where(mask, ys, 0.0), spec,
        seq_index=si[None, :], row0=row0, batch_index=bi, full_positions=positions)
    floor = noise_floor(xs, ps, spec, theta, dtype)
    found = closest_mutant(ys, reference, mutants, mask, floor)
    if found is None:
        # Pair norms do not depend on the angles: this works even where angles are too uncertain.
        # The case's attention factor af scales every pair's norm of a correct output: the scale
        # to explain is the one relative to af.
        af = float(reference_frequencies(spec)[1])
        scale = _norm_scale(xs, np.where(mask, ys, np.nan), spec, dtype, af)
        if scale is not None:
            if _tail_scaled(xs, np.where(mask, ys, np.nan), r, scale / af, dtype):
                return [Diagnosis("output-scaled", f"every output element scaled by {scale / af:.4g} (every pair's "
                                  "norm and the pass-through features change by that factor)")]
            return [Diagnosis("attention-factor", _scale_message(scale / af, af, "output") + " (every pair's "
                              "norm changes by that factor)")]
        if rms(ys - reference, mask) > floor:
            msg = _angle_noise(xs, ps, np.where(mask, ys, 0.0), spec, theta, dtype)
            return [Diagnosis("angle-precision", msg)] if msg else []
        return []
    mut = found[0]
    message = mut.message
    if mut.code in FREQUENCY_CODES:
        dep = frequency_departure(eff, theta, phase_noise=max(16.0 * unit_roundoff(dtype), 2.0**-20))
        if dep is not None:
            i, q = dep
            message += (f"; measured from the output, pair {i} is the first that turns by another angle "
                        f"per position than the reference: {q:.4g} times the reference theta")
    return [Diagnosis(mut.code, message)]


# --------------------------------------------------------------------------------------------
# rope.cache and rope.frequencies
# --------------------------------------------------------------------------------------------


def _cache_arrays(output):
    if isinstance(output, dict):
        return np.asarray(output["cos"], float), np.asarray(output["sin"], float)
    if isinstance(output, (tuple, list)) and len(output) == 2:
        return np.asarray(output[0], float), np.asarray(output[1], float)
    arr = np.asarray(output, dtype=np.float64)
    if arr.shape[:1] == (2,):
        return arr[0], arr[1]
    raise ValueError("output: expected (cos, sin)")


def diagnose_cache(positions, output, spec, dtype) -> list:
    """Diagnoses for a rope.cache output (cos, sin) [b, s, r/2], by the same mutant scoring.

    Each angle mutant of rope.apply becomes a (cos, sin) table; the scale mutant fits a common
    factor of cos and sin (attention factor).
    """
    cos_o, sin_o = _cache_arrays(output)
    m = np.asarray(positions, dtype=np.int64)
    r = int(spec.rotary_dim)
    if cos_o.shape != m.shape + (r // 2,) or sin_o.shape != cos_o.shape:
        return []
    y = np.stack([cos_o, sin_o])
    mask = np.isfinite(y)
    theta, af = reference_frequencies(spec)
    mf = m.astype(np.float64)

    def table(phi, scale=af):
        return lambda: scale * np.stack([np.cos(phi), np.sin(phi)])

    reference = table(mf[..., None] * theta)()
    mutants = [Mutant("rotation-reversed", "sin has the wrong sign (angles -m*theta)",
                      table(-mf[..., None] * theta))]
    for k in OFFSETS:
        mutants.append(Mutant("position-offset", f"positions shifted by {k:+d}", table((mf + k)[..., None] * theta)))
    s = m.shape[1]
    mutants.append(Mutant("positions-ignored", "positions ignored: arange(seq) used instead of the given positions",
                          table(np.broadcast_to(np.arange(s, dtype=float)[None, :, None], m.shape + (1,)) * theta)))

    for low in ("bfloat16", "float16"):
        mutants.append(Mutant("angle-precision", f"angles computed in {low}: error grows with position",
                              table(round_to(round_to(mf, low)[..., None] * round_to(theta, low), low))))
        mutants.append(Mutant("angle-precision", f"positions cast to {low}: error grows with position",
                              table(round_to(mf, low)[..., None] * theta)))
    eff = _cache_effective(m, cos_o, sin_o, theta)
    for code, message, th, scale in frequency_ladders(spec, theta, fitted_base=fit_base(eff, r),
                                                      ratio=_uniform_ratio(eff, theta)):
        mutants.append(Mutant(code, message, table(mf[..., None] * th, af if scale is None else scale)))
    ok = mask & np.isfinite(reference)
    den = float(np.sum(reference[ok] ** 2))
    if den > 0:
        c = float(np.sum(y[ok] * reference[ok]) / den)
        if np.isfinite(c) and c > 0 and abs(c - 1.0) > 1e-4:
            mutants.append(Mutant("attention-factor", _scale_message(c, af, "cos and sin"), lambda c=c: c * reference))
    # Correct tables: float32 angles and cos/sin rounded to (at least) float32.
    tol = (0.5 * max(unit_roundoff(dtype), 2.0**-24) + 2.0**-23 * np.abs(mf[..., None] * theta)) * af
    floor = float(np.sqrt(np.mean(tol * tol)))
    found = closest_mutant(y, reference, mutants, mask, floor)
    if found is None:
        return []
    return [Diagnosis(found[0].code, found[0].message)]


def _cache_effective(m, cos_o, sin_o, theta):
    """Effective frequency from a (cos, sin) table: the phase of cos + i sin, unwrapped over m."""
    z = cos_o + 1j * sin_o
    ones = np.ones(m.shape + (1, 2 * z.shape[-1]))
    out = np.concatenate([z.real, z.imag], axis=-1)[:, :, None, :]
    return recover_effective_frequency(ones, m, out, layout="half", rotary_dim=2 * z.shape[-1], prior=theta)


def diagnose_frequencies(output, spec, dtype) -> list:
    """Diagnoses for a rope.frequencies output (inv_freq [r/2], attention_factor).

    inv_freq is compared by relative error against the frequency mutants; a wrong attention
    factor is reported on its own (both can be wrong at once).
    """
    r = int(spec.rotary_dim)
    if isinstance(output, dict):
        inv, af_out = output.get("inv_freq"), output.get("attention_factor")
    elif isinstance(output, np.ndarray) and output.ndim == 1 and output.size == r // 2 + 1:
        inv, af_out = output[:-1], output[-1]  # the runner's [inv_freq..., attention_factor]
    else:
        inv, af_out = output
    inv = np.asarray(inv, dtype=np.float64).reshape(-1)
    theta, af = reference_frequencies(spec)
    found = []
    if inv.shape == theta.shape:
        with np.errstate(divide="ignore", invalid="ignore"):
            y = np.log(inv)  # compare on a log scale: theta spans decades, rounding is relative
        mask = np.isfinite(y)

        def rel(t):
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.log(t)

        mutants = [Mutant("angle-precision", f"inv_freq rounded to {low}", lambda t=round_to(theta, low): rel(t))
                   for low in ("bfloat16", "float16")]
        eff = EffectiveFrequency(inv.copy(), np.isfinite(inv) & (inv > 0), 1)
        ratio = float(np.median(inv[mask] / theta[mask])) if np.any(mask) else None
        for code, message, th, _ in frequency_ladders(spec, theta, fitted_base=fit_base(eff, r),
                                                      ratio=ratio if ratio and np.isfinite(ratio) else None):
            mutants.append(Mutant(code, message, lambda t=th: rel(t)))
        # A correct float32 inv_freq (pow and reciprocal) is a few float32 ulps off.
        hit = closest_mutant(y, rel(theta), mutants, mask, 4.0 * max(unit_roundoff(dtype), 2.0**-24))
        if hit is not None:
            found.append(Diagnosis(hit[0].code, hit[0].message))
    try:
        af_val = float(np.asarray(af_out, dtype=np.float64))
    except (TypeError, ValueError):
        af_val = math.nan
    tol = 8.0 * max(unit_roundoff(dtype), 2.0**-24) * max(1.0, abs(af))
    if np.isfinite(af_val) and abs(af_val - af) > tol:
        found.append(Diagnosis("attention-factor", f"attention_factor is {af_val:.6g}, expected {af:.6g}"))
    return found


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


_ODD_DATA = (ValueError, TypeError, KeyError, IndexError, FloatingPointError, OverflowError)


def explain(diagnose_fn, *args) -> list:
    """diagnose_fn(*args), or [] when odd data (shapes, NaNs, overflow) defeat the analysis: a
    diagnosis is an explanation, and failing to find one must not stop the run."""
    try:
        return diagnose_fn(*args)
    except _ODD_DATA:
        return []
