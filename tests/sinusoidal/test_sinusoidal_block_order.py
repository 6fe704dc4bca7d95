"""``block-order`` (issue 23, sec. 5): the right sin and cos columns in another block order are
named, not left as "over-budget": timm's default 2-D table (re-enacted in
examples/sinusoidal/buggy/block_order.py), diffusers with ``flip_sin_to_cos=True`` graded as a
[sin | cos] table, and (cos, sin) pairs in the interleaved layout."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conformance import Unsupported, run_conformance

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sinusoidal"


def failing(report):
    graded = [c for c in report.cases if c.verdict != "skip"]
    assert graded
    return [c for c in graded if c.verdict == "fail"]


def codes(case):
    return [d.code for d in case.diagnoses]


@pytest.mark.parametrize("seed", [0, 2])
def test_timm_default_2d_order_is_named(seed):
    report = run_conformance(f"{EXAMPLES / 'buggy/block_order.py'}:table", "sinusoidal.table", seed=seed,
                             identities=False, timeout=60.0)
    bad = failing(report)
    assert any(c.id.endswith("mae-vit-base/grid-corners") for c in bad)
    assert all(codes(c) == ["block-order"] and "timm" in c.diagnoses[0].message for c in bad)


def test_diffusers_cos_first_is_named():
    pytest.importorskip("diffusers")
    from diffusers.models.embeddings import get_timestep_embedding

    def flipped(positions, spec):
        if spec.dims != 1 or spec.layout != "concatenated" or spec.exponent != "2i/d":
            raise Unsupported("1-D [sin | cos], 2i/d")
        return get_timestep_embedding(positions, spec.d_model, flip_sin_to_cos=True, downscale_freq_shift=0,
                                      max_period=spec.base)

    bad = failing(run_conformance(flipped, "sinusoidal.table", fresh=False, identities=False, timeout=60.0))
    assert len(bad) >= 3 and all(codes(c) == ["block-order"] for c in bad)


def test_cos_sin_pairs_are_named():
    def pairs(positions, spec):
        if spec.layout != "interleaved" or spec.d_model % 2:
            raise Unsupported("even interleaved only")
        n = spec.d_model // 2
        w = spec.base ** (-2 * torch.arange(n, dtype=torch.float64) / spec.d_model)
        phi = positions.double()[:, None] * w
        return torch.stack([phi.cos(), phi.sin()], dim=-1).flatten(1).float()

    bad = failing(run_conformance(pairs, "sinusoidal.table", fresh=False, identities=False, timeout=60.0,
                                  cases="sinusoidal.table/transformer-base/*"))
    assert bad and all(codes(c) == ["block-order"] for c in bad)
