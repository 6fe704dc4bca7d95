"""The frequency rules of sinusoidal tables, one function per rule, registered in ``RULES``.

Each rule gives the exponent e_i of w_i = base**(-e_i) for i = 0 .. n-1 (n from
sinusoid_layouts.py) as an exact fraction, and ``table(d, layout, exponent, base)`` turns them into
a ``phase.FrequencyTable`` (the exact phase code shared with RoPE).

- ``2i/d`` (Vaswani et al. 2017, sec. 3.5: PE(pos, 2i) = sin(pos / 10000**(2i / d_model));
  Transformer-XL ``inv_freq = 1 / 10000**(arange(0, d, 2) / d)``; MAE
  ``omega = 1 / 10000**(arange(D / 2) / (D / 2))``): e_i = 2i / d.
  Odd d: an interleaved table keeps 2i / d over its ceil(d / 2) frequencies (the paper's
  ``pe[:, 0::2]`` code: ``arange(0, d, 2) / d``); a concatenated one has h = floor(d / 2)
  frequencies and a zero pad column, and its exponent is i / h, as zero-padded code computes it
  (diffusers ``get_timestep_embedding`` with downscale_freq_shift 0: ``arange(h) / h``). Both are
  2i / d for an even d.
- ``2i/(d-2)`` (tensor2tensor ``get_timing_signal_1d``: log_timescale_increment =
  log(max_timescale / min_timescale) / (num_timescales - 1); fairseq
  ``SinusoidalPositionalEmbedding.get_embedding``: ``emb = log(10000) / (half_dim - 1)``):
  e_i = i / (h - 1) with h = floor(d / 2), i.e. 2i / (d - 2) for even d. The smallest frequency is
  exactly 1 / base, one step lower than with 2i/d.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath

from . import phase
from .sinusoid_layouts import frequency_count


def exponent_2i_over_d(i: int, d: int, layout: str) -> Fraction:
    return Fraction(i, d // 2) if layout == "concatenated" else Fraction(2 * i, d)


def exponent_i_over_h_minus_1(i: int, d: int, layout: str) -> Fraction:
    return Fraction(i, d // 2 - 1)


RULES = {"2i/d": exponent_2i_over_d, "2i/(d-2)": exponent_i_over_h_minus_1}


def exponents(d: int, layout: str, exponent: str) -> list[Fraction]:
    rule = RULES[exponent]
    return [rule(i, d, layout) for i in range(frequency_count(d, layout))]


def table(d: int, layout: str, exponent: str, base: float) -> phase.FrequencyTable:
    """The phase table of w_i = base**(-e_i) (base taken exactly from its float64 value)."""
    es = exponents(d, layout, exponent)

    def values(prec):
        b = mpmath.mpf(base)
        return [b ** (-mpmath.mpf(e.numerator) / e.denominator) for e in es]

    return phase.table_from_mp(("sinusoidal", d, layout, exponent, float(base)), values)
