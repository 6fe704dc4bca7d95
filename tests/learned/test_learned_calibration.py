"""Tolerance calibration of learned.lookup on correct implementation styles (docs/tolerance.md,
"Learned absolute position embeddings").

Styles: the two correct examples (nn.Embedding module, F.embedding with RoBERTa position ids),
plain tensor indexing ``x + table[ids]``, and a float32 intermediate (x and the looked-up rows
upcast to float32, summed, cast back: mixed-precision code that keeps the table in float32).
Each is graded on the golden catalog (``catalog``) and on a dense grid of wide-range inputs
(``grid``: x and the table N(0, 1) times 2^k, k uniform in -24..24 (-12..12 in float16), so
that sums cancel, absorb and round; 3 seeds x 4 x 64 tokens x 16 columns per variant). Run this file as a script to print
the table of worst budget ratios that docs/tolerance.md quotes:

    python3 tests/learned/test_learned_calibration.py
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from conformance.core import tolerance  # noqa: E402
from conformance.learned import budgets  # noqa: E402
from conformance.learned.spec import LearnedSpec  # noqa: E402
from reference import learned  # noqa: E402

DTYPES = ("float32", "float16", "bfloat16", "float64")
# Exponent span of the grid's inputs: 2^k with |k| <= SPAN (float16 stops at 65504, so 2^12 there;
# its smallest values are subnormal, which the budget's floor covers).
SPAN = {"float32": 24, "float16": 12, "bfloat16": 24, "float64": 24}


def _example(name):
    path = ROOT / "examples" / "learned" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"posref_calibration_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.lookup


def _ids(positions, spec):
    if spec.variant == "roberta":
        return (positions + 1) * positions.ne(-1).long() + spec.padding_idx
    return positions


def indexing(x, positions, table, spec):
    """x + table[ids] (tensor indexing; no wall of its own for -1, so checked first)."""
    if bool((positions < (-1 if spec.variant == "roberta" else 0)).any()):
        raise IndexError("negative position")
    return x + table[_ids(positions, spec)]


def float32_intermediate(x, positions, table, spec):
    """The sum formed in float32 and cast back to x's dtype (a float32 table in a mixed-precision
    model; for float64 inputs, both operands rounded to float32 first)."""
    return (x.float() + F.embedding(_ids(positions, spec), table.float())).to(x.dtype)


def styles():
    return {"gpt2_wpe (nn.Embedding)": _example("gpt2_wpe"),
            "roberta_position_ids (F.embedding)": _example("roberta_position_ids"),
            "table[ids] indexing": indexing,
            "float32 intermediate": float32_intermediate}


def _ratios(fn, x64, positions, table64, spec, dtype):
    """(standard, strict) worst budget ratio of fn on these inputs, graded as the protocol does."""
    from conformance.learned.lookup import PROTOCOL

    prepared = PROTOCOL.prepare_arrays(x64, positions, table64, spec, dtype, "cpu")
    out = fn(*prepared.args)
    out64 = out.detach().to(torch.float64).numpy()
    i = prepared.inputs_f64
    ref = learned.lookup(i["x"], i["positions"], i["table"], variant=spec.variant,
                         padding_idx=spec.padding_idx, backend="numpy")
    t = i["table"][learned.rows(i["positions"], spec.num_positions, variant=spec.variant,
                                padding_idx=spec.padding_idx)]
    err = np.abs(out64 - ref)
    return tuple(float(np.max(tolerance.ratio(err, budgets.sum_budget(i["x"], t, dtype, p))))
                 for p in ("standard", "strict"))


def catalog_ratios(fn, dtype):
    """Over every stored value case: the catalog's and the zoo models' committed ones (their tables
    named by seed, reference.golden.seeded)."""
    from reference.golden import store
    from reference.learned.vectors import table_of

    worst = [0.0, 0.0]
    for case in store.iter_cases("learned.lookup"):
        if case.params["must_raise"]:
            continue
        spec = LearnedSpec(case.params["num_positions"], case.params["d_model"], case.params["variant"],
                           case.params["padding_idx"])
        r = _ratios(fn, case.arrays["x"], case.arrays["positions"], table_of(case.params, case.arrays["table"]), spec,
                    dtype)
        worst = [max(a, b) for a, b in zip(worst, r)]
    return tuple(worst)


def grid_ratios(fn, dtype, seeds=(0, 1, 2)):
    span = SPAN[dtype]
    worst = [0.0, 0.0]
    for seed in seeds:
        rng = np.random.default_rng(seed)
        for spec in (LearnedSpec(512, 16), LearnedSpec(514, 16, "roberta", 1)):
            low, high = learned.position_range(spec.num_positions, spec.variant, spec.padding_idx)
            pos = rng.integers(low, high, size=(4, 64), endpoint=True)
            scale = lambda shape: np.exp2(rng.integers(-span, span + 1, size=shape))  # noqa: E731
            x = rng.standard_normal((4, 64, 16)) * scale((4, 64, 16))
            table = rng.standard_normal((spec.num_positions, 16)) * scale((spec.num_positions, 16))
            r = _ratios(fn, x, pos, table, spec, dtype)
            worst = [max(a, b) for a, b in zip(worst, r)]
    return tuple(worst)


def measure():
    """{(style, source, dtype): (standard, strict)} over every style, source and dtype."""
    out = {}
    for name, fn in styles().items():
        for dtype in DTYPES:
            out[(name, "catalog", dtype)] = catalog_ratios(fn, dtype)
            out[(name, "grid", dtype)] = grid_ratios(fn, dtype)
    return out


# --------------------------------------------------------------------------------------------
# Tests


def test_correct_styles_stay_within_the_strict_budget_in_their_own_dtype():
    """Every style that adds in the dtype under test is correctly rounded: strict ratio <= 1."""
    for name in ("gpt2_wpe (nn.Embedding)", "roberta_position_ids (F.embedding)", "table[ids] indexing"):
        fn = styles()[name]
        for dtype in DTYPES:
            for standard, strict in (catalog_ratios(fn, dtype), grid_ratios(fn, dtype, seeds=(0,))):
                assert strict <= 1.0 and standard <= strict, (name, dtype, strict)


def test_float32_intermediate_is_within_standard_and_only_acceptable_in_float64():
    fn = float32_intermediate
    for dtype in ("float32", "float16", "bfloat16"):
        standard, strict = grid_ratios(fn, dtype, seeds=(0,))
        assert standard <= 1.0, (dtype, standard)
    standard, strict = grid_ratios(fn, "float64", seeds=(0,))
    assert standard <= 1.0 < strict  # float64 computed in float32: "acceptable", not "pass"
    assert strict > 1e6


def main():
    rows = measure()
    print("| style | source | " + " | ".join(DTYPES) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in DTYPES) + " |")
    for name in styles():
        for source in ("catalog", "grid"):
            cells = []
            for dtype in DTYPES:
                standard, strict = rows[(name, source, dtype)]
                cells.append(f"{standard:.3g} / {strict:.3g}")
            print(f"| {name} | {source} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
