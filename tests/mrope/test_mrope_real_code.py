"""M-RoPE against real code and real bugs (issue 23): transformers' own Qwen2-VL, Qwen3-VL, Qwen3.5
and GLM-4V rotary code and Qwen2-VL's get_rope_index pass for every seed; the fresh positions are
only what Qwen2-VL's processor produces; the GLM-4V (interleaved pairs, partial rotary) and
Qwen3.5 (partial rotary) cases reach the bugs that shipped, and every fault has a named cause.

The transformers adapters live in examples/mrope/lib_transformers.py; their tests skip without the
library (the ``test`` extra installs it).
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import numpy as np
import pytest

from conformance import run_conformance
from reference.golden.fresh import Draw, fresh_cases
from reference.mrope.positions import rope_index
from reference.mrope.vectors import MODELS, fresh_positions

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "mrope"
LIB = EXAMPLES / "lib_transformers.py"


def _transformers_major() -> int:
    try:
        return int(importlib.metadata.version("transformers").split(".")[0])
    except importlib.metadata.PackageNotFoundError:
        return 0


# The adapters use transformers 5's API (Qwen3.5, GLM-4V, get_rope_index(mm_token_type_ids));
# written and calibrated against 5.24.
HAS_TRANSFORMERS = _transformers_major() >= 5
needs_transformers = pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers >= 5 is not installed "
                                        "(pip install -e '.[test]')")
SWEEP = range(100, 150)  # the slow sweep's 50 seeds


def _image_runs(row):
    """[(start, end)] of the runs of image tokens (1) in one row."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], row, [0]))))
    return list(zip(edges[::2], edges[1::2]))


def test_fresh_positions_are_what_the_processor_produces_for_every_seed():
    """Seeds 0..999: every image block lies between text tokens (<|vision_start|>, <|vision_end|>),
    so no two blocks touch, and each run of image tokens is exactly one grid's h * w tokens."""
    for seed in range(1000):
        (group,) = fresh_positions(Draw(seed, "mrope.positions"))
        (test,) = group.tests
        row, grids = np.array(test.token_types[0]), np.array(test.grids)
        runs = _image_runs(row)
        assert len(runs) == len(grids), (seed, row.tolist(), grids.tolist())
        for (start, end), (t, h, w) in zip(runs, grids):
            assert start >= 1 and end < row.size and row[start - 1] == 0 and row[end] == 0, (seed, row.tolist())
            assert end - start == t * h * w
        rope_index(row[None], grids)  # the reference accepts it


@needs_transformers
def test_adjacent_image_blocks_are_what_transformers_refuses():
    """Why the generator wraps every image: transformers' get_rope_index groups consecutive image
    tokens into one block and raises on two blocks with no text between them."""
    import torch
    from conformance.loader import load_target

    from conformance.mrope.spec import spec_of

    positions = load_target(f"{LIB}:positions")
    spec = spec_of(MODELS["qwen2-vl"][0])
    grids = torch.tensor([[1, 1, 2], [1, 2, 1]])
    wrapped = torch.tensor([[0, 1, 1, 0, 0, 1, 1, 0]])
    assert np.array_equal(positions(wrapped, grids, spec).numpy(), rope_index(wrapped.numpy(), grids.numpy()))
    with pytest.raises(RuntimeError):
        positions(torch.tensor([[0, 1, 1, 1, 1, 0]]), grids, spec)


@needs_transformers
@pytest.mark.parametrize("seeds", [pytest.param(range(200), id="0-199"),
                                   pytest.param(range(200, 1000), id="200-999", marks=pytest.mark.slow)])
def test_transformers_get_rope_index_equals_the_rule_for_every_seed(seeds):
    """The fresh row of every seed (0..199 by default, 200..999 under -m slow; the old generator
    put two blocks side by side in 46 of seeds 0..199), called in-process on transformers'
    get_rope_index: the same ids as reference.mrope.positions, and no call raises."""
    import torch
    from conformance.loader import load_target

    from conformance.mrope.spec import spec_of

    positions = load_target(f"{LIB}:positions")
    spec = spec_of(MODELS["qwen2-vl"][0])
    for seed in seeds:
        (test,) = fresh_positions(Draw(seed, "mrope.positions"))[0].tests
        types, grids = np.array(test.token_types), np.array(test.grids)
        got = positions(torch.from_numpy(types), torch.from_numpy(grids), spec).numpy()
        assert np.array_equal(got, rope_index(types, grids)), seed


def test_every_model_configuration_is_drawn_every_run():
    """GLM-4V's interleaved pairs and the partial rotary of GLM-4V and Qwen3.5 are in every seed's
    fresh cases, not left to the seed."""
    for seed in (0, 1, 7):
        ids = {c.id.rsplit("/", 1)[1]: c.params for c in fresh_cases("mrope.apply", seed)}
        for name, (params, _, _) in MODELS.items():
            assert ids[f"drawn-{name}"] == params
        assert ids["drawn-glm-4v"]["layout"] == "interleaved"
        assert ids["drawn-glm-4v"]["rotary_dim"] < ids["drawn-glm-4v"]["head_dim"]
        assert ids["drawn-qwen3.5"]["rotary_dim"] < ids["drawn-qwen3.5"]["head_dim"]


def _bad(report):
    return [(c.id, c.dtype, c.verdict, [d.code for d in c.diagnoses]) for c in report.cases
            if c.verdict not in ("pass", "acceptable", "skip")]


@needs_transformers
@pytest.mark.parametrize("seed", [0, 8])
def test_transformers_mrope_passes_every_model(seed):
    """Qwen2-VL, Qwen3-VL, Qwen3.5 and GLM-4V through transformers' own code: every committed and
    fresh case graded (none skipped), float32 and bfloat16."""
    report = run_conformance(f"{LIB}:apply", "mrope.apply", dtypes=("float32", "bfloat16"), seed=seed,
                             identities=False, timeout=60.0)
    assert report.summary()["overall"] == "pass", _bad(report)
    assert not [c.id for c in report.cases if c.verdict == "skip"]
    assert {c.id.split("/")[1] for c in report.cases} >= set(MODELS)


@needs_transformers
@pytest.mark.parametrize("seed", [0, 8])
def test_transformers_get_rope_index_passes(seed):
    report = run_conformance(f"{LIB}:positions", "mrope.positions", seed=seed, identities=False, timeout=60.0)
    assert report.summary()["overall"] == "pass", _bad(report)
    assert any("/fresh/" in c.id for c in report.cases)


# The seed sweep: every real-library adapter and every correct example, 50 seeds each, zero failures.
SWEPT = [(LIB, "apply", "mrope.apply", True), (LIB, "positions", "mrope.positions", True),
         (EXAMPLES / "qwen_vl.py", "apply", "mrope.apply", False),
         (EXAMPLES / "qwen_vl.py", "positions", "mrope.positions", False)]


@pytest.mark.slow
@pytest.mark.parametrize("path, fn, protocol, library", SWEPT, ids=[f"{p.stem}:{f}" for p, f, _, _ in SWEPT])
def test_seed_sweep_has_no_failure(path, fn, protocol, library):
    if library and not HAS_TRANSFORMERS:
        pytest.skip("transformers is not installed (pip install -e '.[test]')")
    failures = []
    for seed in SWEEP:
        report = run_conformance(f"{path}:{fn}", protocol, dtypes=("float32", "bfloat16"), seed=seed,
                                 identities=False, cases=f"{protocol}/fresh-*", timeout=60.0)
        assert report.cases, seed
        failures += [(seed, *bad) for bad in _bad(report)]
    assert not failures


# Named causes: each buggy example fails its cases with its code (the family contract test checks
# that the code appears somewhere; these check where).
@pytest.mark.parametrize("name, code, group", [
    ("neox_pairs.py", "layout-swapped", "glm-4v"),
    ("partial_ignored.py", "rotary-dim-mismatch", "qwen3.5"),
    ("angle_precision.py", "angle-precision", "qwen2-vl"),
    ("interleave_shifted.py", "interleave-shifted", "qwen3-vl"),
])
def test_real_bugs_fail_the_cases_that_reach_them_with_their_cause(name, code, group):
    report = run_conformance(f"{EXAMPLES / 'buggy' / name}:apply", "mrope.apply", dtypes=("float32",), fresh=False,
                             identities=False, timeout=60.0)
    verdicts = {c.id: (c.verdict, [d.code for d in c.diagnoses]) for c in report.cases}
    reached = {i: v for i, v in verdicts.items() if f"/{group}/image" in i}
    assert reached and all(v == "fail" and code in codes for v, codes in reached.values()), verdicts
    if code in ("layout-swapped", "rotary-dim-mismatch"):
        # the Qwen2-VL / Qwen3-VL cases alone never showed these (issue 23)
        assert all(verdicts[i][0] in ("pass", "acceptable") for i in verdicts if "/qwen2-vl/" in i or "/qwen3-vl/" in i)


def test_image_tokens_at_1d_positions_are_named():
    report = run_conformance(f"{EXAMPLES / 'buggy' / 'positions_1d.py'}:positions", "mrope.positions", seed=3,
                             identities=False, timeout=60.0)
    failing = [c for c in report.cases if c.verdict == "fail"]
    assert len(failing) == len(report.cases) and all("positions-1d" in [d.code for d in c.diagnoses] for c in failing)
