"""Calibrate the tolerance model: worst budget ratios of real implementation styles.

    python bench/calibrate_tolerance.py            # catalog + dense grid, ~1 min on 2 cores
    python bench/calibrate_tolerance.py --quick    # catalog only

For each style in bench/rope_styles.py and each dtype it prints the largest standard budget
ratio (max over cases of max(error / budget)) on

1. the committed golden catalog (every rope.apply case the style can express), and
2. a dense synthetic grid: head/rotary dims 64, 80, 96, 128, 256 (and partial 256/64, 96/24),
   bases 1e4, 5e5, 1e6, positions 0..16 and around 2^11, 2^12, 2^16, 2^17, 2^20 and 2^24 (a
   hundred positions per case), 4 heads, x ~ N(0, 1) with several seeds.

Correct styles must stay below 1 everywhere; bf16 / fp16 angles must exceed it. The numbers in
docs/tolerance.md come from this script.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

STYLES = ("hf_rotate_half", "meta_complex", "gptj_every_two", "bf16_angles", "fp16_angles")
DTYPES = ("float32", "float16", "bfloat16", "float64")
CONFIGS = [  # (head_dim, rotary_dim, base)
    (64, 64, 1e4),
    (80, 80, 1e4),
    (96, 96, 1e6),
    (128, 128, 1e4),
    (128, 128, 5e5),
    (128, 128, 1e6),
    (256, 256, 1e4),
    (256, 64, 1e4),
    (96, 24, 1e4),
]
CENTRES = (2**11, 2**12, 2**16, 2**17, 2**20, 2**24)


def grid_positions(centres=CENTRES) -> np.ndarray:
    pos = list(range(17))
    for c in centres:
        pos += list(range(c - 6, c + 7))
    return np.array(pos, dtype=np.int64)


def synthetic_cases(layouts=("half", "interleaved"), seeds=(0, 1), centres=CENTRES):
    from reference.golden.store import GoldenCase

    pos = grid_positions(centres)
    out = []
    for hd, r, base in CONFIGS:
        for layout in layouts:
            for seed in seeds:
                rng = np.random.default_rng([hd, r, int(base), seed])
                x = rng.standard_normal((1, len(pos), 4, hd))
                params = dict(head_dim=hd, rotary_dim=r, base=base, layout=layout, scaling=None, seq_len=0)
                cid = f"rope.apply/calibration/d{hd}-r{r}-b{base:g}-{layout}-s{seed}-{len(pos)}"
                arrays = {"x": x, "positions": pos[None, :].copy(), "expected": x}
                out.append(GoldenCase(cid, "rope.apply", "calibration", params, "calibration grid", [], arrays))
    return out


def frequency_errors() -> None:
    """HF's float32 inv_freq against the exact theta_i, in units of u_32 = 2^-24.

    Prints the largest relative error and its largest share of the first-order bound
    ln(base) e_i + 2 (exponent 2i/r rounded, then the power and the reciprocal).
    """
    import math

    import torch

    from reference import rope

    print("float32 inv_freq (HF formula) vs exact: max rel error / u32, max of error / (ln(b) e_i + 2)")
    for r in (20, 64, 80, 96, 128, 256):
        cells = []
        for base in (1e4, 5e5, 1e6, 1e8):
            inv = (1.0 / (base ** (torch.arange(0, r, 2, dtype=torch.int64).float() / r))).double().numpy()
            exact = rope.inv_freq(r, base)
            rel = np.abs(inv - exact) / exact / 2.0**-24
            model = math.log(base) * 2 * np.arange(r // 2) / r + 2
            cells.append(f"b={base:g}: {rel.max():.2f} / {(rel / model).max():.2f}")
        print(f"  r={r:3d}  " + "   ".join(cells))


def use_design_starting_point() -> None:
    """Swap in the design's starting formula (for comparison; it has no ln(base) term)."""
    from conformance.core import tolerance
    from conformance.core import rotation_budgets as budgets

    budgets.C_ROUND = 2.0
    budgets.C_ANGLE = 4.0

    def angle_relative_error(rotary_dim, base, profile):
        return tolerance.angle_roundoff(profile) * np.ones(rotary_dim // 2)

    budgets.angle_relative_error = angle_relative_error


def worst_ratios(report) -> dict:
    worst = {}
    for c in report.cases:
        if c.verdict == "skip":
            continue
        r = c.budget_ratio if c.budget_ratio is not None else float("inf")
        if c.verdict in ("fail", "error") and any(d.code == "non-finite" for d in c.diagnoses):
            r = float("inf")
        worst[c.dtype] = max(worst.get(c.dtype, 0.0), r)
    return worst


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the golden catalog only")
    ap.add_argument(
        "--design-start",
        action="store_true",
        help="grade with the design's first starting formula 2 u (|a|+|b|) + 4 2^-24 |phi| (|a|+|b|) instead",
    )
    args = ap.parse_args(argv)
    if args.design_start:
        use_design_starting_point()

    from conformance.api import run_conformance

    target = os.path.join(HERE, "rope_styles.py")
    sources = [("catalog", None)]
    if not args.quick:
        sources.append(("grid", synthetic_cases()))
        # Positions <= 4102 only: no float16 overflow, so low-precision angles get finite ratios.
        sources.append(("short", synthetic_cases(centres=(2**11, 2**12))))
    print(f"{'style':16} {'source':8} " + " ".join(f"{d:>9}" for d in DTYPES) + "   (worst standard budget ratio)")
    for style in STYLES:
        for name, cases in sources:
            t0 = time.perf_counter()
            report = run_conformance(
                f"{target}:{style}", "rope.apply", dtypes=DTYPES, identities=False, golden_cases=cases
            )
            worst = worst_ratios(report)
            cells = " ".join(f"{worst.get(d, float('nan')):9.3g}" for d in DTYPES)
            print(f"{style:16} {name:8} {cells}   {time.perf_counter() - t0:.1f} s", flush=True)
    frequency_errors()
    # The dtype-free protocols: graded in the dtype the adapter returns.
    for style, protocol in (("hf_cache", "rope.cache"), ("hf_frequencies", "rope.frequencies")):
        report = run_conformance(f"{target}:{style}", protocol, identities=False)
        worst = worst_ratios(report)
        print(f"{style:16} {'catalog':8} " + " ".join(f"{d}={v:.3g}" for d, v in worst.items()) + f"  ({protocol})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
