"""diffusers' ``get_1d_rotary_pos_embed`` (with linear_factor / ntk_factor) and
``apply_rotary_emb`` (examples/rope/lib_diffusers.py), graded on the catalog and fresh cases:
nothing fails, the linear and NTK cases are graded (not skipped), the skips are the scalings
diffusers has no parameter for, and both layouts are graded. Skips without diffusers (the
``test`` extra)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("diffusers")

from conformance import run_conformance  # noqa: E402
from support import passing_cases  # noqa: E402
from support import detected_layout  # noqa: E402

LIB = Path(__file__).resolve().parents[2] / "examples" / "rope" / "lib_diffusers.py"


def _scaling(report, protocol, seed):
    from reference.golden import store
    from reference.golden.fresh import fresh_cases

    params = {c.id: c.params for c in list(store.iter_cases(protocol)) + list(fresh_cases(protocol, seed))}
    return {c.id: (params[c.id].get("scaling") or {}).get("rope_type", "default") for c in report.cases}


def _check(report, protocol, seed):
    passing_cases(report)
    kinds = _scaling(report, protocol, seed)
    graded = {kinds[c.id] for c in report.cases if c.verdict != "skip"}
    assert {"default", "linear", "ntk"} <= graded
    skipped = [c for c in report.cases if c.verdict == "skip"]
    assert all(kinds[c.id] not in ("default", "linear", "ntk") for c in skipped)
    assert all("diffusers has linear_factor and ntk_factor only" in c.notes[0] for c in skipped)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("fn", ["cache", "cache_float64"])
def test_diffusers_rope_tables(fn, seed):
    report = run_conformance(f"{LIB}:{fn}", "rope.cache", seed=seed)
    _check(report, "rope.cache", seed)
    if fn == "cache_float64":  # Flux's float64 angles: within the strict budget everywhere
        assert all(c.verdict in ("pass", "skip") for c in report.cases)


@pytest.mark.slow  # about 340 cases in two dtypes (30 s on the 2-core machine)
@pytest.mark.parametrize("seed", range(2))
def test_diffusers_apply_rotary_emb(seed):
    report = run_conformance(f"{LIB}:apply", "rope.apply", seed=seed, dtypes=("float32", "bfloat16"))
    _check(report, "rope.apply", seed)
    assert detected_layout(report) == "both"  # use_real_unbind_dim -1 and -2


def test_diffusers_apply_rotary_emb_one_case_per_layout():
    """The default selection's check of apply: one committed unscaled case per layout passes."""
    from reference.golden import store

    picks = {}
    for c in store.iter_cases("rope.apply"):
        layout = c.params.get("layout", "half")
        if not c.params.get("scaling") and c.params.get("tensor_layout", "bshd") == "bshd":
            picks.setdefault(layout, c.id)
    assert set(picks) == {"half", "interleaved"}
    report = run_conformance(f"{LIB}:apply", "rope.apply", fresh=False, identities=False,
                             cases=",".join(picks.values()), dtypes=("float32", "bfloat16"))
    assert len(report.cases) == 4 and all(c.verdict in ("pass", "acceptable") for c in report.cases)
