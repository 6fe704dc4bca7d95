"""Named causes of rope2d.apply (issue 23, sec. 5): patch coordinates counted from 1 (torchtune,
Llama 4 vision) and Pixtral's parity-split ladder (the second axis on base^(-(4k+2)/d)) are named
on every failing case, catalog and fresh; the correct example is not touched."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conformance import run_conformance
from conformance.rope2d.diagnosis import split_ladder
from conformance.rope2d.spec import Rope2dSpec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "rope2d"


@pytest.mark.parametrize("name, code", [("coordinate_offset.py", "coordinate-offset"),
                                        ("ladder_split.py", "ladder-split")])
@pytest.mark.parametrize("seed", [0, 3])
def test_named_on_every_failing_case(name, code, seed):
    report = run_conformance(f"{EXAMPLES / 'buggy' / name}:apply", "rope2d.apply", seed=seed, dtypes=("float32",),
                             identities=False, timeout=60.0)
    bad = [c for c in report.cases if c.verdict == "fail"]
    # ladder_split passes the RoPE-Mixed case (no ladder there) and RoPE-ViT's first grid row (y = 0:
    # the second axis never turns)
    passing = {c.id for c in report.cases} - {c.id for c in bad}
    assert passing <= {"rope2d.apply/rope-mixed/grid-3x4", "rope2d.apply/rope-vit-axial-deit-base/grid-14x14-first-row"}
    assert all([d.code for d in c.diagnoses] == [code] for c in bad), [(c.id, c.diagnoses) for c in bad]


def test_split_ladder_turns_the_second_axis_by_the_odd_steps():
    spec = Rope2dSpec(head_dim=8, base=100.0, layout="half", order=("x", "y"), cls_tokens=0)
    x = np.zeros((1, 1, 1, 8))
    x[..., 0], x[..., 2] = 1.0, 1.0  # pair 0 (first axis, k=0) and pair 2 (second axis, k=0)
    out = split_ladder(x, np.array([[[0, 1]]]), spec)  # x = 0, y = 1
    assert np.allclose(out[..., [0, 4]], [[[[1.0, 0.0]]]])  # the x pair does not turn
    theta = 100.0 ** (-2 / 8)  # the odd step base^(-(4*0+2)/d), not base^0 = 1
    assert np.allclose(out[..., [2, 6]], [[[[np.cos(theta), np.sin(theta)]]]])


def test_the_correct_example_still_passes():
    report = run_conformance(f"{EXAMPLES / 'rope_vit.py'}:apply", "rope2d.apply", seed=3, dtypes=("float32",),
                             identities=False, timeout=60.0)
    assert all(c.verdict in ("pass", "acceptable") for c in report.cases)
