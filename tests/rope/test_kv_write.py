"""rope.kv_write: RoPE fused with the paged KV-cache write (issue 28, "Fused operations").

The slot arithmetic against its brute force, the committed vectors, the budget on a correct
implementation over many drawn steps and on garbage (zeros, nothing written), the sentinel check,
and each buggy example's diagnosis with its message.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conformance import run_conformance  # noqa: E402
from conformance.core import registry  # noqa: E402
from reference import rope as rr  # noqa: E402
from reference.golden import store  # noqa: E402
from reference.golden.fresh import fresh_cases  # noqa: E402
from reference.rope import kv_write as kv  # noqa: E402
from reference.rope.kv_write_vectors import SPARE_BLOCKS  # noqa: E402
from support import load_file  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "rope" / "kv_write.py"
BUGGY = ROOT / "examples" / "rope" / "buggy"
PROTO = registry.get("rope.kv_write")
CORRECT = load_file(EXAMPLE).kv_write


def _grade(adapter, case, dtype="float32"):
    """The case graded in one dtype without the runner: (graded, prepared, spec)."""
    spec = PROTO.spec(case)
    prepared = PROTO.prepare(case, spec, dtype, "cpu")
    graded = PROTO.grade(case, spec, prepared, adapter(*prepared.args))
    return graded, prepared, spec


def _passes(graded) -> bool:
    return not graded.problems and graded.ratio["standard"] is not None and graded.ratio["standard"] <= 1.0


def test_protocol_is_registered():
    assert PROTO.signature == "fn(q, k, v, positions, k_cache, v_cache, slot_mapping, spec) -> q_rot"
    assert PROTO.arity == 8
    codes = registry.families()["rope"].codes
    assert {"kv-written-unrotated", "kv-wrong-slot", "kv-padding-written", "kv-value-rotated"} <= set(codes)


def test_slot_mapping_agrees_with_its_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(200):
        bs = int(rng.choice([1, 4, 16]))
        n = int(rng.integers(1, 5))
        starts, new = rng.integers(0, 70, n), rng.integers(1, 6, n)
        lengths = starts + new
        used = sum(kv.blocks_needed(x, bs) for x in lengths)
        num_blocks = used + 2
        table = kv.block_tables(lengths, bs, rng.permutation(num_blocks)[:used])
        seq = np.concatenate([np.repeat(np.arange(n), new), [-1, -1]])
        pos = np.concatenate([np.concatenate([np.arange(s, s + k) for s, k in zip(starts, new)]), [0, 0]])
        slots = kv.slot_mapping(table, seq, pos, bs)
        assert np.array_equal(slots, kv.slot_mapping_bruteforce(table, seq, pos, bs, num_blocks))
        assert np.all(slots[-2:] == -1) and len(set(slots[:-2].tolist())) == len(slots) - 2


def test_slot_mapping_refuses_positions_past_the_table():
    table = kv.block_tables([5], 4, [3, 1])
    with pytest.raises(ValueError, match="block_table"):
        kv.slot_mapping(table, [0], [8], 4)
    with pytest.raises(ValueError, match="physical"):
        kv.block_tables([5, 5], 4, [0, 1, 2])


def test_vectors_are_certified_rotations_with_out_of_order_blocks_and_padding():
    cases = list(store.iter_cases("rope.kv_write"))
    assert len(cases) == 9
    for c in cases:
        p, a = c.params, c.arrays
        t = a["positions"].size
        assert t <= 24 and 16 <= p["head_dim"] <= 64 and p["block_size"] in (4, 16)
        assert a["q"].shape[1] > a["k"].shape[1]  # grouped-query
        for role in ("q", "k"):
            want = rr.apply(a[role][None], a["positions"][None], rotary_dim=p["rotary_dim"], base=p["base"],
                            layout=p["layout"], backend="numpy")[0]
            np.testing.assert_allclose(a[f"{role}_expected"], want, rtol=0, atol=1e-12)
        table, slots = a["block_table"], a["slot_mapping"]
        real = slots >= 0
        seq = np.searchsorted(np.asarray(p["cu_seqlens"]), np.arange(t), side="right") - 1
        seq = np.where(real, seq, -1)
        assert np.array_equal(slots, kv.slot_mapping_bruteforce(table, seq, a["positions"], p["block_size"],
                                                                p["num_blocks"]))
        used = table[table >= 0]
        assert not np.array_equal(used, np.sort(used)) or used.size == 1  # blocks out of order
        assert p["num_blocks"] - 1 not in used and p["num_blocks"] - used.size == SPARE_BLOCKS
    assert sum(int(np.sum(c.arrays["slot_mapping"] < 0)) for c in cases) > 0


def test_correct_example_passes_the_catalog_in_every_dtype():
    report = run_conformance(f"{EXAMPLE}:kv_write", "rope.kv_write",
                             dtypes=("float64", "float32", "float16", "bfloat16"), seed=0)
    assert report.summary()["overall"] == "pass"
    graded = [c for c in report.cases if c.verdict != "skip"]
    assert len(graded) == 40
    assert all(c.worst_location.startswith(("q_rot: ", "k_cache slot ", "v_cache slot ")) for c in graded)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_correct_example_passes_fifty_drawn_steps(dtype):
    worst = 0.0
    for seed in range(50):
        (case,) = fresh_cases("rope.kv_write", seed)
        graded, _, _ = _grade(CORRECT, case, dtype)
        assert _passes(graded), (seed, graded.problems, graded.ratio)
        worst = max(worst, graded.ratio["standard"])
    assert 0.05 < worst <= 1.0


def test_garbage_fails():
    case = next(store.iter_cases("rope.kv_write"))

    def zeros(q, k, v, positions, k_cache, v_cache, slot_mapping, spec):
        real = slot_mapping >= 0
        for cache in (k_cache, v_cache):
            cache.view(-1, *cache.shape[-2:])[slot_mapping[real]] = 0.0
        return torch.zeros_like(q)

    def nothing_written(q, k, v, positions, k_cache, v_cache, slot_mapping, spec):
        return CORRECT(q, k, v, positions, k_cache.clone(), v_cache.clone(), slot_mapping, spec)

    graded, _, _ = _grade(zeros, case)
    assert not _passes(graded) and graded.ratio["standard"] > 100
    graded, _, _ = _grade(nothing_written, case)
    assert not _passes(graded)
    assert {d.code for d in graded.problems} == {"non-finite"}  # the slots still hold the NaN sentinel


def test_sentinel_check_fails_when_padding_or_a_spare_slot_is_written():
    case = next(c for c in store.iter_cases("rope.kv_write") if np.any(c.arrays["slot_mapping"] < 0))

    def padding_written(q, k, v, positions, k_cache, v_cache, slot_mapping, spec):
        out = CORRECT(q, k, v, positions, k_cache, v_cache, slot_mapping, spec)
        pad = slot_mapping < 0
        v_cache.view(-1, *v_cache.shape[-2:])[-1] = v[pad][0]  # only the value, only the last slot
        return out

    def spare_written(q, k, v, positions, k_cache, v_cache, slot_mapping, spec):
        out = CORRECT(q, k, v, positions, k_cache, v_cache, slot_mapping, spec)
        k_cache[-2, 0] = 0.0  # a block no sequence uses
        return out

    graded, prepared, spec = _grade(padding_written, case)
    assert graded.ratio["standard"] <= 1.0  # every graded slot is right: only the sentinel check fails
    assert [d.code for d in graded.problems] == ["kv-padding-written"]
    assert "last slot" in graded.problems[0].message
    graded, _, _ = _grade(spare_written, case)
    assert [d.code for d in graded.problems] == ["kv-wrong-slot"]
    assert f"block {spec.num_blocks - 2}, offset 0" in graded.problems[0].message


@pytest.mark.parametrize("name, code, words", [
    ("kv_written_unrotated", "kv-written-unrotated", "not rotated"),
    ("kv_wrong_slot", "kv-wrong-slot", "slot = token index"),
    ("kv_padding_written", "kv-padding-written", "padding token"),
    ("kv_value_rotated", "kv-value-rotated", "v rotated"),
])
def test_buggy_examples_are_named_on_every_failing_case(name, code, words):
    module = load_file(BUGGY / f"{name}.py")
    assert (module.CODE, module.PROTOCOL) == (code, "rope.kv_write")
    report = run_conformance(f"{BUGGY / name}.py:kv_write", "rope.kv_write", dtypes=("float32",), seed=2)
    failing = [c for c in report.cases if c.verdict == "fail"]
    assert failing and all(c.verdict in ("fail", "skip") for c in report.cases)
    for c in failing:
        named = [d for d in c.diagnoses if d.code == code]
        assert named and words in named[0].message, (c.id, c.diagnoses)


def test_misplacement_patterns_are_told_apart():
    from conformance.rope.kv_placement import _pattern

    assert "token index" in _pattern(3, 3, 40, 7, 16)
    assert "position" in _pattern(3, 7, 40, 7, 16)
    assert "swapped" in _pattern(3, (40 % 16) * 16 + 40 // 16, 40, 7, 16)
    assert "misread" in _pattern(3, 90, 40, 7, 16)


def test_rope_faults_in_q_are_diagnosed_as_rope_apply_outputs():
    case = next(store.iter_cases("rope.kv_write"))

    def reversed_q(q, k, v, positions, k_cache, v_cache, slot_mapping, spec):
        CORRECT(q, k, v, positions, k_cache, v_cache, slot_mapping, spec)
        return CORRECT(q, k, v, -positions, k_cache.clone(), v_cache.clone(), slot_mapping, spec)

    graded, prepared, spec = _grade(reversed_q, case)
    assert not _passes(graded)
    found = PROTO.diagnose(case, spec, prepared, graded, "float32")
    assert [d.code for d in found] == ["rotation-reversed"] and found[0].message.startswith("q_rot: ")


@pytest.mark.slow  # starts an isolated interpreter (about 9 s)
def test_isolated_run_sees_the_in_place_cache_writes():
    report = run_conformance(f"{EXAMPLE}:kv_write", "rope.kv_write", dtypes=("float32",), fresh=False,
                             isolate=True, cases="rope.kv_write/paged/d64-bs16-*")
    assert [c.verdict for c in report.cases].count("fail") == 0 and len(report.cases) == 3
