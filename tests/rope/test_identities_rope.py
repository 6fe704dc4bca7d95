"""The RoPE identities hold on the reference, and a deliberately broken reference fails them."""

import json

import numpy as np
import pytest

from conformance import cli
from reference import identities, rope
from reference.identities import run_identity
from reference.rope import decay

REQUIRED = (
    "rope.orthogonality", "rope.determinant", "rope.norm-per-pair", "rope.composition",
    "rope.identity-at-zero", "rope.inverse", "rope.relative-position", "rope.layout-equivalence",
    "rope.complex-form", "rope.partial-rotary-tail", "rope.long-term-decay-bound",
    "rope.decay-curve",
)


def _rope_ids():
    identities.load_all()
    return [i for i, entry in identities.REGISTRY.items() if entry.family == "rope"]


def _run(identity_id):
    return run_identity(identities.REGISTRY[identity_id])


def test_every_identity_the_issue_asks_for_is_registered():
    assert set(REQUIRED) <= set(_rope_ids())


@pytest.mark.parametrize("identity_id", _rope_ids())
def test_rope_identity_holds(identity_id):
    result = _run(identity_id)
    assert result["error"] is None
    assert result["verdict"] == "holds", result
    assert 0.0 <= result["residual"] <= result["bound"]
    assert identities.REGISTRY[identity_id].check.__doc__, "the bound's justification is missing"


@pytest.mark.parametrize("identity_id", ["rope.relative-position", "rope.norm-per-pair", "rope.abel-summation"])
def test_residuals_are_reproducible(identity_id):
    assert _run(identity_id)["residual"] == _run(identity_id)["residual"]


# --------------------------------------------------------------------------------------------
# broken references must be caught

_apply = rope.apply


def _naive_apply(x, positions, *, rotary_dim=None, base=10000.0, layout="half", backend="cpu"):
    """RoPE with the plain float64 angle m * theta_i and libm cos/sin: ~1e-9 off at 2^24."""
    r = rotary_dim or np.shape(x)[-1]
    theta = rope.inv_freq(r, base)
    angle = rope.angles(positions, theta)
    return rope.rotate_pairs(x, np.cos(angle), np.sin(angle), layout=layout, rotary_dim=r)


def _reversed_apply(x, positions, **kw):
    return _apply(x, -np.asarray(positions), **kw)


def _offset_apply(x, positions, **kw):
    return _apply(x, np.asarray(positions) + 1, **kw)


def _swapped_layout_apply(x, positions, *, layout="half", **kw):
    return _apply(x, positions, layout="interleaved" if layout == "half" else "half", **kw)


def _whole_head_apply(x, positions, *, rotary_dim=None, **kw):
    with np.errstate(invalid="ignore"):  # the tail's inf times sin 0 gives NaN: that is the bug
        return _apply(x, positions, **kw)  # ignores rotary_dim: rotates the tail too


def _noisy_rotation_matrix(position, rotary_dim, base=10000.0, layout="half"):
    R = _rotation_matrix(position, rotary_dim, base, layout)
    return R * (1.0 + 1e-12)


_rotation_matrix = rope.rotation_matrix


@pytest.mark.parametrize("name, replacement, broken, intact", [
    ("apply", _naive_apply, ["rope.relative-position", "rope.complex-form", "rope.matrix-form"],
     ["rope.norm-per-pair", "rope.layout-equivalence"]),
    ("apply", _reversed_apply, ["rope.matrix-form", "rope.complex-form", "rope.complex-score"],
     ["rope.relative-position", "rope.norm-per-pair"]),
    ("apply", _offset_apply, ["rope.identity-at-zero", "rope.matrix-form", "rope.relative-position"],
     ["rope.norm-per-pair"]),
    ("apply", _swapped_layout_apply, ["rope.layout-equivalence", "rope.matrix-form", "rope.norm-per-pair"],
     ["rope.relative-position"]),
    ("apply", _whole_head_apply, ["rope.partial-rotary-tail"], ["rope.orthogonality"]),
    ("rotation_matrix", _noisy_rotation_matrix, ["rope.orthogonality", "rope.determinant", "rope.composition"],
     ["rope.relative-position"]),
])
def test_a_broken_reference_is_reported_failing(monkeypatch, name, replacement, broken, intact):
    monkeypatch.setattr(rope, name, replacement)
    for identity_id in broken:
        assert _run(identity_id)["verdict"] == "failing", identity_id
    for identity_id in intact:  # the other identities are not blind alarms
        assert _run(identity_id)["verdict"] == "holds", identity_id


def test_broken_decay_sums_are_reported_failing(monkeypatch):
    partial_sums = decay.partial_sums

    def shifted(distance, rotary_dim=128, base=10000.0):
        s = partial_sums(distance, rotary_dim, base)
        return np.concatenate([np.zeros_like(s[..., :1]), s[..., :-1]], axis=-1)  # S_{j-1} for S_j

    monkeypatch.setattr(decay, "partial_sums", shifted)
    for identity_id in ("rope.abel-summation", "rope.decay-curve"):
        assert _run(identity_id)["verdict"] == "failing", identity_id


def test_cli_exits_1_when_the_reference_is_broken(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(rope, "apply", _naive_apply)
    out_file = tmp_path / "identities.json"
    assert cli.main(["identities", "--family", "rope", "--json", str(out_file)]) == 1
    document = {item["id"]: item for item in json.loads(out_file.read_text())}
    assert document["rope.relative-position"]["verdict"] == "failing"
    assert document["rope.relative-position"]["residual"] > 1e-12
    assert document["rope.orthogonality"]["verdict"] == "holds"
    assert "failing" in capsys.readouterr().out
