"""Certified golden values (reference/golden/certify.py): the rounding checks themselves, and that
regeneration and ``posref vectors verify --certify`` refuse values that are not rounded as
promised."""

from __future__ import annotations

import json
import math
import shutil

import mpmath
import numpy as np
import pytest

from conformance.cli import main
from reference.golden import catalog, certify, generate, manifest, npzio, store, verify

mp = mpmath.mpf


@pytest.fixture(autouse=True)
def high_precision():
    """Exact values are built at 300 bits here (at mpmath's default 53, 1 + 2**-60 is just 1)."""
    with mpmath.workprec(300):
        yield


def test_nearest_double_rounds_half_to_even_and_handles_the_edges():
    one_ulp = 2.0**-52
    assert certify.nearest_double(mp(1) + mpmath.ldexp(1, -53)) == 1.0  # tie: even
    assert certify.nearest_double(mp(1) + mpmath.ldexp(3, -53)) == 1.0 + 2 * one_ulp  # tie: even
    assert certify.nearest_double(mp(1) + mpmath.ldexp(1, -53) + mpmath.ldexp(1, -150)) == 1.0 + one_ulp
    assert certify.nearest_double(-(mp(1) + mpmath.ldexp(3, -54))) == -(1.0 + one_ulp)
    assert certify.nearest_double(mpmath.ldexp(1, -1075)) == 0.0  # subnormal tie: even (zero)
    assert certify.nearest_double(mpmath.ldexp(3, -1076)) == 5e-324  # no double rounding
    assert certify.nearest_double(mpmath.ldexp(1, 1024)) == math.inf
    assert certify.nearest_double(mp(0)) == 0.0
    rng = np.random.default_rng(0)
    for v in rng.standard_normal(500) * 2.0 ** rng.integers(-80, 80, 500):
        x = mp(float(v)) * (1 + mpmath.ldexp(1, -70))  # off the grid, not near a tie
        assert certify.nearest_double(x) == float(v)


def test_ulp_error_and_the_two_roundings():
    x = mp(1) + mpmath.ldexp(1, -54)  # a quarter ulp above 1
    assert certify.ulp_error(1.0, x) == pytest.approx(0.25)
    assert certify.is_certified(1.0, x, "correct")
    assert not certify.is_certified(1.0 + 2.0**-52, x, "correct")
    assert certify.is_certified(1.0 + 2.0**-52, x, "faithful")  # the other neighbour
    assert not certify.is_certified(1.0 + 2.0**-51, x, "faithful")
    with pytest.raises(ValueError, match="rounding"):
        certify.is_certified(1.0, x, "roughly")


def test_certify_arrays_counts_and_names_the_bad_values():
    exact = {"y": np.array([mp(1) / 3, mp(2) / 3], dtype=object)}
    good = certify.certify_arrays({"y": np.array([1 / 3, 2 / 3])}, exact, "correct", "c: ")
    assert good.ok and good.certified == 2 and good.max_ulp <= 0.5
    bad = certify.certify_arrays({"y": np.array([1 / 3, np.nextafter(2 / 3, 1)])}, exact, "correct", "c: ")
    assert bad.failures == 1 and bad.examples[0].startswith("c: y[1] = ")
    assert bad.record() == {"rounding": "correct", "certified": 2, "max_ulp": round(bad.max_ulp, 4)}


def test_committed_vectors_are_certified_and_recorded():
    data = store.load_manifest()
    groups = {rel[: -len(".json")] for rel in data["files"] if rel.endswith(".json")}
    assert set(data["certification"]) == groups
    for key, record in data["certification"].items():
        assert record["rounding"] == catalog.protocol(key.split("/")[0]).rounding
        assert record["certified"] > 0 and record["max_ulp"] <= 0.5, key


def test_regeneration_refuses_a_value_that_is_one_ulp_off(tmp_path, monkeypatch):
    proto = catalog.protocol("rope.cache")
    honest = proto.compute

    def off_by_one_ulp(params, inputs, backend):
        out = honest(params, inputs, backend)
        out["cos"] = out["cos"].copy()
        out["cos"].flat[-1] = np.nextafter(out["cos"].flat[-1], 2.0)
        return out

    from dataclasses import replace

    from reference.rope import vectors as rope_vectors

    monkeypatch.setitem(rope_vectors.PROTOCOLS, "rope.cache", replace(proto, compute=off_by_one_ulp))
    with pytest.raises(generate.CertificationError, match="not correctly rounded"):
        generate.regenerate(tmp_path / "v", family="rope.cache/worked-example", progress=None)
    assert not (tmp_path / "v").exists()  # nothing written


def _retamper(root, rel, mutate):
    """Change one stored array and re-hash the manifest consistently (an edited vectors set)."""
    arrays = dict(npzio.read_npz(root / rel))
    key = next(k for k in arrays if k.endswith((".expected", ".cos", ".inv_freq")))
    changed = np.array(arrays[key])
    mutate(changed)
    arrays[key] = changed
    npzio.write_npz(root / rel, arrays)
    data = store.load_manifest(root)
    paths = sorted(data["files"])
    rebuilt = manifest.build(root, paths, data["generator"]["backend"], data["number_of_cases"],
                             data["certification"])
    manifest.write(root, rebuilt)


def test_verify_certify_catches_a_consistently_rehashed_edit(tmp_path, capsys):
    root = tmp_path / "v"
    shutil.copytree(store.vectors_dir(), root)
    _retamper(root, "rope.cache/worked-example.npz", lambda a: a.__setitem__((0, 1, 0), np.nextafter(a[0, 1, 0], 2)))
    assert verify.check(root) == []  # hashes agree: only certification sees it
    assert main(["vectors", "verify", "--dir", str(root), "--certify", "--protocol", "rope.cache"]) == 3
    captured = capsys.readouterr()
    failures = [line for line in captured.out.splitlines() if line.startswith("FAIL ")]
    # Problems in the edited group only (its value, and its recorded certificate that no longer
    # matches): every other group of the copy certifies, without a second pass over them.
    assert failures and all("rope.cache/worked-example" in line for line in failures)
    assert f"{len(failures)} problem(s)" in captured.err
    assert any("ulp from the exact" in line for line in failures)


def test_verify_flags_a_group_without_a_certification_record(tmp_path):
    root = tmp_path / "v"
    shutil.copytree(store.vectors_dir(), root)
    data = json.loads((root / store.MANIFEST_NAME).read_text())
    data["certification"].pop("rope.cache/worked-example")
    (root / store.MANIFEST_NAME).write_text(json.dumps(data))
    problems = [str(p) for p in verify.check(root)]
    assert any("no certification record for rope.cache/worked-example" in p for p in problems)
