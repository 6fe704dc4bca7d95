"""The committed golden vectors: the store API, the schema, pinned ids, and values checked
independently of the reference (plain math / mpmath), so a wrong reference cannot hide here."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import jsonschema
import mpmath
import numpy as np
import pytest

from reference.golden import catalog, store

VECTORS = store.vectors_dir()
SCHEMAS = Path(store.__file__).resolve().parent / "schemas"
METADATA_FILES = sorted(VECTORS.glob("*/*.json"))
ALL_CASES = list(store.iter_cases())


def _validator(name):
    schema = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_vectors_dir_is_the_repository_folder():
    assert VECTORS == Path(__file__).resolve().parents[2] / "vectors"
    assert (VECTORS / "MANIFEST.json").is_file()


def test_vectors_dir_honours_the_environment_override(monkeypatch, tmp_path):
    monkeypatch.setenv(store.ENV_VAR, str(tmp_path))
    assert store.vectors_dir() == tmp_path


@pytest.mark.parametrize("path", METADATA_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_metadata_file_is_valid_against_the_schema(path):
    meta = json.loads(path.read_text())
    errors = [e.message for e in _validator("vectors.schema.json").iter_errors(meta)]
    assert errors == []
    assert meta["schema"] == "vectors.schema.json"
    assert meta["suiteVersion"] == store.SUITE_VERSION
    flags = {f for tg in meta["testGroups"] for t in tg["tests"] for f in t["flags"]}
    assert flags == set(meta["notes"]), "every flag has a note and every note is used"


@pytest.mark.parametrize("spoil", [
    lambda m: m["testGroups"][0]["tests"][0].pop("comment"),
    lambda m: m.__setitem__("arraysFile", "../x.npz"),
    lambda m: m["notes"]["Prefill"].pop("bugType"),
    lambda m: m.pop("numberOfTests"),
])
def test_schema_rejects_broken_metadata(spoil):
    meta = json.loads((VECTORS / "rope.apply" / "llama2-d128.json").read_text())
    assert list(_validator("vectors.schema.json").iter_errors(meta)) == []
    spoil(meta)
    assert list(_validator("vectors.schema.json").iter_errors(meta))


@pytest.mark.parametrize("spoil", [
    lambda params: params.__setitem__("layout", "sideways"),
    lambda params: params.__setitem__("bogus", 1),
    lambda params: params.pop("seq_len"),
])
def test_family_params_schema_rejects_broken_parameters(spoil):
    """A case's parameters are checked against the schema of the family owning the protocol."""
    validator = jsonschema.Draft202012Validator(catalog.protocol("rope.apply").params_schema)
    params = dict(store.get_case("rope.apply/llama2-d128/decode-4095").params)
    assert list(validator.iter_errors(params)) == []
    spoil(params)
    assert list(validator.iter_errors(params))


def test_manifest_is_valid_and_its_digest_is_the_documented_rule():
    manifest = store.load_manifest()
    assert list(_validator("manifest.schema.json").iter_errors(manifest)) == []
    assert manifest["suite_version"] == store.SUITE_VERSION == "0.6.0"
    lines = ""
    for rel in sorted(manifest["files"]):
        data = (VECTORS / rel).read_bytes()
        assert hashlib.sha256(data).hexdigest() == manifest["files"][rel]["sha256"], rel
        lines += f"{rel} {hashlib.sha256(data).hexdigest()}\n"
    assert hashlib.sha256(lines.encode()).hexdigest() == manifest["digest"]
    listed = set(manifest["files"])
    on_disk = {p.relative_to(VECTORS).as_posix() for p in VECTORS.rglob("*") if p.is_file()}
    assert on_disk - listed == {"MANIFEST.json"}
    for key in ("python", "numpy", "numba", "mpmath", "backend"):
        assert manifest["generator"][key]


def test_size_and_case_counts_stay_small():
    total = sum(p.stat().st_size for p in VECTORS.rglob("*") if p.is_file())
    assert total < 25 * 2**20
    counts = {}
    for case in ALL_CASES:
        counts[case.protocol] = counts.get(case.protocol, 0) + 1
    assert 40 <= counts["rope.apply"] <= 180  # 94 since issue 23's cases of real bugs, 154 with the zoo's (issue 27)
    assert counts["rope.cache"] >= 5 and counts["rope.frequencies"] >= 5
    assert store.load_manifest()["number_of_cases"] == counts


PINNED = {
    "rope.apply/llama2-d128/decode-4095": dict(head_dim=128, rotary_dim=128, base=1e4, layout="half"),
    "rope.apply/llama3-d128/decode-131071": dict(head_dim=128, rotary_dim=128, base=5e5, layout="half"),
    "rope.apply/qwen2-d128/around-2p24": dict(head_dim=128, rotary_dim=128, base=1e6, layout="half"),
    "rope.apply/gpt-neox-20b/prefill-8": dict(head_dim=96, rotary_dim=24, base=1e4, layout="half"),
    "rope.apply/gpt-j-6b/around-2p11": dict(head_dim=256, rotary_dim=64, base=1e4, layout="interleaved"),
    "rope.apply/worked-example/pair-2-3-m1": dict(head_dim=2, rotary_dim=2, base=1e4, layout="half"),
    "rope.cache/llama2-d128/decode-4095": dict(head_dim=128, rotary_dim=128, base=1e4, layout="half"),
    "rope.frequencies/worked-example/d512-thetas": dict(head_dim=512, rotary_dim=512, base=1e4),
    "rope.frequencies/llama2-d128/inv-freq": dict(head_dim=128, rotary_dim=128, base=1e4),
}


@pytest.mark.parametrize("case_id", sorted(PINNED))
def test_pinned_case_ids_stay_stable(case_id):
    case = store.get_case(case_id)
    assert case.id == case_id
    assert (case.protocol, case.group, case.test) == tuple(case_id.split("/"))
    for key, value in PINNED[case_id].items():
        assert case.params[key] == value, key
    assert set(case.params) >= set(catalog.protocol(case.protocol).params_schema["required"])
    assert case.comment and case.flags
    assert set(case.arrays) == set(store.protocol_arrays(case.protocol))


def test_decode_4095_is_one_token_at_4095():
    case = store.get_case("rope.apply/llama2-d128/decode-4095")
    assert case.arrays["positions"].tolist() == [[4095]]
    assert case.params["seq_len"] == 4096
    assert case.arrays["x"].shape == case.arrays["expected"].shape == (1, 1, 4, 128)


def test_case_records_are_frozen_and_read_only():
    case = ALL_CASES[0]
    with pytest.raises(AttributeError):
        case.comment = "x"
    with pytest.raises(ValueError):
        next(iter(case.arrays.values()))[...] = 0


def test_get_case_unknown_raises_key_error():
    for bad in ("rope.apply/llama2-d128/nosuch", "rope.apply/nosuch/decode-4095", "nosuch", "a/b/c/d", ""):
        with pytest.raises(KeyError):
            store.get_case(bad)


def test_iter_cases_filters_by_protocol_and_ids_are_unique():
    ids = [c.id for c in ALL_CASES]
    assert len(ids) == len(set(ids))
    apply_cases = list(store.iter_cases("rope.apply"))
    assert apply_cases and all(c.protocol == "rope.apply" for c in apply_cases)
    assert list(store.iter_cases("no.such")) == []


def test_arrays_follow_the_protocol_contract():
    """Every stored array has the dtype and shape its family's VectorProtocol declares."""
    for case in ALL_CASES:
        proto = catalog.protocol(case.protocol)
        for role, dtype in store.protocol_arrays(case.protocol).items():
            assert case.arrays[role].dtype == np.dtype(dtype), (case.id, role)
        for role, shape in proto.shapes(case.params, case.arrays).items():
            assert case.arrays[role].shape == tuple(shape), (case.id, role)


def test_rope_arrays_and_seq_len():
    for case in ALL_CASES:
        if case.protocol not in ("rope.apply", "rope.cache"):
            continue
        p = case.params
        b, s = case.arrays["positions"].shape
        assert p["seq_len"] == int(case.arrays["positions"].max()) + 1
        if case.protocol == "rope.cache":
            assert case.arrays["cos"].shape == case.arrays["sin"].shape == (b, s, p["rotary_dim"] // 2)
        else:
            assert case.arrays["x"].shape == case.arrays["expected"].shape
            assert case.arrays["x"].shape[:2] == (b, s) and case.arrays["x"].shape[3] == p["head_dim"]


def test_inputs_are_exact_in_bfloat16_and_float16():
    for case in store.iter_cases("rope.apply"):
        x = case.arrays["x"]
        as32 = x.astype(np.float32)
        assert np.array_equal(as32.astype(np.float64), x)
        assert np.all(as32.view(np.uint32) & np.uint32(0xFFFF) == 0), case.id  # bfloat16-exact
        assert np.array_equal(x.astype(np.float16).astype(np.float64), x), case.id


# ---------------------------------------------------------------------------------------------
# Values checked without the reference


def test_worked_example_pair_has_the_true_values_not_the_misprint():
    for name in ("pair-2-3-m1", "pair-2-3-m1-interleaved"):
        case = store.get_case(f"rope.apply/worked-example/{name}")
        out = case.arrays["expected"].reshape(-1)
        true = [2 * math.cos(1) - 3 * math.sin(1), 2 * math.sin(1) + 3 * math.cos(1)]
        assert out == pytest.approx(true, rel=1e-15, abs=1e-15)
        assert not np.allclose(out, [-1.6245, 3.0252], atol=1e-3)
        assert "-1.4438" in case.comment and "3.3038" in case.comment and "misprint" in case.comment
        assert "SourceMisprint" in case.flags


def test_d512_thetas_are_the_true_values():
    case = store.get_case("rope.frequencies/worked-example/d512-thetas")
    inv = case.arrays["inv_freq"]
    assert inv.shape == (256,)
    with mpmath.workprec(200):
        for i in (0, 1, 100, 255):
            assert inv[i] == float(mpmath.mpf(10000) ** (-mpmath.mpf(2 * i) / 512))
    assert inv[1] == pytest.approx(0.96466, abs=1e-5)
    assert inv[255] == pytest.approx(1.0366e-4, rel=1e-4)
    assert abs(inv[255] - 1.58e-5) > 5e-5  # the source's printed value is wrong
    assert float(case.arrays["attention_factor"]) == 1.0
    assert "1.58e-5" in case.comment and "1.0366e-4" in case.comment


def _mp_rotate(x, positions, params, samples):
    """Exact-ish RoPE of selected tokens with mpmath (independent of reference.rope)."""
    r, base, layout = params["rotary_dim"], params["base"], params["layout"]
    out = {}
    with mpmath.workprec(160):
        for (bi, si, hi) in samples:
            vec = x[bi, si, hi].astype(np.float64).copy()
            m = int(positions[bi, si])
            for i in range(r // 2):
                a, b = (i, i + r // 2) if layout == "half" else (2 * i, 2 * i + 1)
                theta = mpmath.mpf(base) ** (-mpmath.mpf(2 * i) / r)
                c, s = mpmath.cos(m * theta), mpmath.sin(m * theta)
                xa, xb = mpmath.mpf(float(x[bi, si, hi, a])), mpmath.mpf(float(x[bi, si, hi, b]))
                vec[a], vec[b] = float(xa * c - xb * s), float(xa * s + xb * c)
            out[(bi, si, hi)] = vec
    return out


@pytest.mark.parametrize("case_id", [
    "rope.apply/llama2-d128/around-2p24",
    "rope.apply/llama3-d128/decode-131071",
    "rope.apply/gpt-neox-20b/left-padded",
    "rope.apply/gpt-j-6b/row-offsets",
    "rope.apply/head-dims/d80-interleaved-around-2p16",
])
def test_stored_expected_matches_an_mpmath_oracle(case_id):
    case = store.get_case(case_id)
    x, pos, expected = case.arrays["x"], case.arrays["positions"], case.arrays["expected"]
    b, s, h, _ = x.shape
    samples = [(0, 0, 0), (b - 1, s - 1, h - 1), (b // 2, s // 2, 0)]
    for key, vec in _mp_rotate(x, pos, case.params, samples).items():
        scale = np.max(np.abs(vec))
        assert np.max(np.abs(expected[key] - vec)) <= 4 * 2.0**-52 * scale, key
        # partial rotary: the tail is bit-identical to the input
        r = case.params["rotary_dim"]
        assert np.array_equal(expected[key][r:], x[key][r:])


def test_stored_cache_matches_mpmath():
    case = store.get_case("rope.cache/llama2-d128/around-2p24")
    pos = case.arrays["positions"]
    with mpmath.workprec(160):
        for j in range(pos.shape[1]):
            for i in (0, 17, 63):
                angle = int(pos[0, j]) * mpmath.mpf(10000) ** (-mpmath.mpf(2 * i) / 128)
                assert abs(case.arrays["cos"][0, j, i] - float(mpmath.cos(angle))) <= 2.0**-52
                assert abs(case.arrays["sin"][0, j, i] - float(mpmath.sin(angle))) <= 2.0**-52


def test_left_padded_rows_follow_hugging_face_position_ids():
    case = store.get_case("rope.apply/llama2-d128/left-padded")
    mask = np.array([[0, 0, 1, 1, 1, 1], [1] * 6, [0, 0, 0, 0, 1, 1]])
    hf = np.cumsum(mask, axis=-1) - 1
    hf[mask == 0] = 1
    assert np.array_equal(case.arrays["positions"], hf)


# ---------------------------------------------------------------------------------------------
# The catalog covers what issue 3 asks for


def test_catalog_covers_the_required_configurations_and_positions():
    apply_cases = [c for c in ALL_CASES if c.protocol == "rope.apply"]
    assert {c.params["head_dim"] for c in apply_cases} >= {64, 80, 96, 128, 256}
    assert {c.params["layout"] for c in apply_cases} == {"half", "interleaved"}
    assert {c.params["base"] for c in apply_cases} >= {1e4, 5e5, 1e6}
    assert any(c.params["rotary_dim"] * 4 == c.params["head_dim"] and c.params["layout"] == "half"
               for c in apply_cases)  # GPT-NeoX 25 %
    assert any(c.params["rotary_dim"] == 64 and c.params["head_dim"] == 256
               and c.params["layout"] == "interleaved" for c in apply_cases)  # GPT-J
    positions = {int(p) for c in apply_cases for p in c.arrays["positions"].ravel()}
    assert {0, 4095, 8191, 131071} <= positions
    for power in (11, 16, 20, 24):
        assert {2**power - 1, 2**power, 2**power + 1} <= positions, power
    decodes = [c for c in apply_cases if "Decode" in c.flags]
    assert all(c.arrays["positions"].shape == (1, 1) for c in decodes)
    assert any(len({tuple(r) for r in c.arrays["positions"]}) == c.arrays["positions"].shape[0] > 1
               for c in apply_cases if "RowOffsets" in c.flags)
    assert any("RepeatedPositions" in c.flags for c in apply_cases)
    # long-context cases keep a few positions each
    assert all(c.arrays["positions"].size <= 8 for c in apply_cases if "LongContext" in c.flags)


def test_catalog_tests_have_comments_and_known_flags():
    for group in catalog.all_groups():
        for tg in group.test_groups:
            for test in tg.tests:
                assert len(test.comment) > 20, test.name
                assert set(test.flags) <= set(catalog.notes(group.protocol)), test.name


def test_catalog_select():
    rope = catalog.select("rope")
    assert rope and {g.family for g in rope} == {"rope"}
    assert len(rope) == sum(g.family == "rope" for g in catalog.all_groups())
    assert {g.protocol for g in catalog.select("rope.cache")} == {"rope.cache"}
    assert [g.key for g in catalog.select("rope.apply/llama2-d128")] == ["rope.apply/llama2-d128"]
    assert {g.protocol for g in catalog.select("llama2-d128")} == {"rope.apply", "rope.cache",
                                                                  "rope.frequencies"}
    with pytest.raises(ValueError, match="family"):
        catalog.select("nosuch")
