"""rope.cp_positions: the tokens a context-parallel rank holds of a packed (THD) batch.

The reference (reference/rope/cp_positions.py) against its token-by-token definition over many
drawn packs, the partition property (every token on exactly one rank), the preconditions refused
in one line, the stored vectors certified, the fresh cases, and the runner end to end: the
correct example passes every case, each buggy example fails with its own code and no other, and
Megatron-LM PR #5243's example is re-enacted.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from conformance import run_conformance
from conformance.rope.cp_positions import PROTOCOL, CpSpec
from reference.golden import fresh, store, verify
from reference.rope.cp_positions import OUTPUTS, SPLITS, chunk_count, cp_positions, cp_positions_bruteforce

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "rope"
BUGGY = {path.stem: path for path in sorted((EXAMPLES / "buggy").glob("cp_*.py")) if "cp_apply" not in path.stem}


def _packs(seed: int, count: int, split=None):
    """(cu_seqlens, cp_size, rank, split) drawn valid (the split drawn unless given): lengths
    multiples of the chunk count, empty sequences included (0 is divisible by anything), cp_size 3
    too (not a power of two)."""
    rng = np.random.default_rng(seed)
    fixed = split
    for _ in range(count):
        split = fixed or SPLITS[rng.integers(2)]
        cp = int(rng.choice([1, 2, 3, 4, 8]))
        unit = chunk_count(cp, split)
        lengths = unit * rng.integers(0, 5, size=int(rng.integers(1, 7)))
        yield np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64), cp, int(rng.integers(cp)), split


@pytest.mark.parametrize("output", OUTPUTS)
def test_reference_matches_the_token_by_token_definition(output):
    for cu, cp, rank, split in _packs(0, 400):
        got = cp_positions(cu, cp, rank, split, output)
        assert got.dtype == np.int64
        assert got.tolist() == cp_positions_bruteforce(cu, cp, rank, split, output), (cu, cp, rank, split)


@pytest.mark.parametrize("split", SPLITS)
def test_every_token_is_held_by_exactly_one_rank_at_its_own_position(split):
    for cu, cp, _, _ in _packs(1, 200, split):
        indices = np.concatenate([cp_positions(cu, cp, r, split, "indices") for r in range(cp)])
        assert np.array_equal(np.sort(indices), np.arange(cu[-1]))
        for r in range(cp):
            idx, pos = cp_positions(cu, cp, r, split, "indices"), cp_positions(cu, cp, r, split, "positions")
            seq = np.searchsorted(cu, idx, side="right") - 1
            assert np.array_equal(pos, idx - cu[seq])  # positions are the indices less the sequence's offset
            assert idx.size == cu[-1] // cp  # every rank holds the same number of tokens


def test_load_balanced_rank_holds_its_chunk_and_the_mirror_chunk():
    # One sequence of 16 tokens over 4 ranks: 8 chunks of 2; rank r holds chunks r and 7 - r.
    for r in range(4):
        expected = list(range(2 * r, 2 * r + 2)) + list(range(2 * (7 - r), 2 * (7 - r) + 2))
        assert cp_positions([0, 16], 4, r).tolist() == expected
        assert cp_positions([0, 16], 4, r, "contiguous").tolist() == list(range(4 * r, 4 * r + 4))


def test_megatron_5243_example():
    # Megatron-LM PR #5243: cu_seqlens [0, 4, 8], cp_size 2, rank 0 holds chunks 0 and 3 (one token
    # each) of both sequences: positions [0, 3, 0, 3], pack indices [0, 3, 4, 7].
    assert cp_positions([0, 4, 8], 2, 0).tolist() == [0, 3, 0, 3]
    assert cp_positions([0, 4, 8], 2, 0, output="indices").tolist() == [0, 3, 4, 7]


@pytest.mark.parametrize("args, argument", [
    (([0, 6], 2, 0, "load_balanced"), "cu_seqlens"),  # 6 not divisible by 2 * 2
    (([0, 3], 2, 0, "contiguous"), "cu_seqlens"),
    (([1, 4], 1, 0, "contiguous"), "cu_seqlens"),
    (([0, 8, 4], 1, 0, "contiguous"), "cu_seqlens"),
    (([[0, 4]], 1, 0, "contiguous"), "cu_seqlens"),
    (([0.0, 4.0], 1, 0, "contiguous"), "cu_seqlens"),
    (([0, 4], 0, 0, "contiguous"), "cp_size"),
    (([0, 4], 2, 2, "contiguous"), "rank"),
    (([0, 4], 2, -1, "contiguous"), "rank"),
    (([0, 4], 2, 0, "zigzag"), "split"),
])
def test_preconditions_are_refused_in_one_line_naming_the_argument(args, argument):
    with pytest.raises(ValueError) as info:
        cp_positions(*args)
    message = str(info.value)
    assert message.startswith(argument + ":") and "\n" not in message


def test_an_unknown_output_is_refused():
    with pytest.raises(ValueError, match="^output:"):
        cp_positions([0, 4], 1, 0, "contiguous", "global")


def test_stored_vectors_are_certified_and_cover_every_rank():
    cases = list(store.iter_cases("rope.cp_positions"))
    seen = set()
    for case in cases:
        p = case.params
        seen.add((p["cp_size"], p["rank"], p["split"], p["output"]))
        expected = cp_positions_bruteforce(case.arrays["cu_seqlens"], p["cp_size"], p["rank"], p["split"], p["output"])
        assert case.arrays["expected"].tolist() == expected, case.id
    assert seen == {(cp, r, s, o) for cp in (1, 2, 4, 8) for r in range(cp) for s in SPLITS for o in OUTPUTS}
    for group in {c.group for c in cases}:
        cert = verify.certify_group(store.vectors_dir(), f"rope.cp_positions/{group}")
        assert cert.ok and cert.certified > 0, group


def test_fresh_cases_are_valid_and_named_by_their_kind():
    names = set()
    for seed in range(20):
        cases = fresh.fresh_cases("rope.cp_positions", seed)
        names.add(tuple(c.id for c in cases))
        for case in cases:
            p = case.params
            got = case.arrays["expected"]
            assert got.tolist() == cp_positions_bruteforce(case.arrays["cu_seqlens"], p["cp_size"], p["rank"],
                                                           p["split"], p["output"])
    assert names == {("rope.cp_positions/fresh/drawn-load-balanced", "rope.cp_positions/fresh/drawn-contiguous")}


def _report(path: Path):
    return run_conformance(f"{path}:cp_positions", "rope.cp_positions", dtypes=("float32",), timeout=60.0)


def test_the_correct_example_passes_every_case():
    report = _report(EXAMPLES / "cp_positions.py")
    assert report.cases and all(c.verdict == "pass" for c in report.cases), \
        [(c.id, c.diagnoses) for c in report.cases if c.verdict != "pass"][:3]


@pytest.mark.parametrize("name", sorted(BUGGY))
def test_each_buggy_example_fails_with_its_own_code_only(name):
    from support import load_file

    code = load_file(BUGGY[name]).CODE
    report = _report(BUGGY[name])
    failing = [c for c in report.cases if c.verdict == "fail"]
    assert failing, f"{name} passes every case"
    for case in failing:
        assert [d.code for d in case.diagnoses] == [code], (case.id, case.diagnoses)


def test_megatron_5243_reenacted():
    report = _report(BUGGY["cp_sequence_offset"])
    case = next(c for c in report.cases if c.id == "rope.cp_positions/megatron-5243/megatron-5243-indices")
    assert case.verdict == "fail" and case.diagnoses[0].code == "cp-sequence-offset"
    assert "[0, 3, 0, 3]" in case.diagnoses[0].message
    ok = next(c for c in report.cases if c.id == "rope.cp_positions/megatron-5243/megatron-5243-positions")
    assert ok.verdict == "pass"


def _graded(value, cu=(0, 8, 24), spec=CpSpec(2, 1)):
    case = type("Case", (), {"arrays": {"cu_seqlens": np.array(cu, dtype=np.int64)}, "params": {}})()
    prepared = PROTOCOL.prepare(case, spec, None, "cpu")
    graded = PROTOCOL.grade(case, spec, prepared, value)
    return graded, PROTOCOL.diagnose(case, spec, prepared, graded, "float32") if graded.gradable else []


def test_garbage_fails_and_is_not_misnamed():
    right = torch.from_numpy(cp_positions([0, 8, 24], 2, 1))
    graded, diagnoses = _graded(right)
    assert graded.ratio["standard"] == 0 and graded.problems == []
    graded, diagnoses = _graded(torch.zeros_like(right))
    assert graded.ratio["standard"] > 1 and diagnoses == []
    graded, _ = _graded(right.to(torch.float32))
    assert [p.code for p in graded.problems] == ["shape-changed"]
    graded, _ = _graded(right[:-1])
    assert [p.code for p in graded.problems] == ["shape-changed"]
    graded, _ = _graded(right.to(torch.int32))  # any integer dtype is an answer
    assert graded.ratio["standard"] == 0


# ------------------------------------------------------------------------------------------
# rope.cp_apply: the rank's tokens rotated at those positions


@pytest.mark.slow  # 27 s: the certification at generation checks the same values
def test_cp_apply_vectors_rotate_each_token_by_its_position_in_its_sequence():
    from reference import rope

    cases = list(store.iter_cases("rope.cp_apply"))
    assert {(c.params["cp_size"], c.params["rank"], c.params["split"]) for c in cases} == \
        {(2, 0, "load_balanced"), (2, 1, "load_balanced"), (2, 0, "contiguous"), (2, 1, "contiguous")} | \
        {(4, r, "load_balanced") for r in range(4)}
    for case in cases[:6]:
        p = case.params
        x, cu = case.arrays["x"], case.arrays["cu_seqlens"]
        pos = np.array(cp_positions_bruteforce(cu, p["cp_size"], p["rank"], p["split"]))
        for i in range(0, x.shape[0], max(1, x.shape[0] // 5)):  # token by token, as a one-token batch
            one = rope.apply(x[i][None, None], pos[i:i + 1][None], base=p["base"], layout=p["layout"], mode="golden")
            assert np.array_equal(one[0, 0], case.arrays["expected"][i]), (case.id, i)
    for group in {c.group for c in cases}:
        cert = verify.certify_group(store.vectors_dir(), f"rope.cp_apply/{group}")
        assert cert.ok and cert.certified > 0


def test_cp_apply_correct_example_passes_and_the_post_split_arange_is_named():
    target = EXAMPLES / "cp_positions.py"
    report = run_conformance(f"{target}:cp_apply", "rope.cp_apply", dtypes=("float32", "bfloat16"), timeout=60.0)
    assert report.cases and all(c.verdict in ("pass", "acceptable") for c in report.cases)
    buggy = EXAMPLES / "buggy" / "cp_apply_chunk_restart.py"
    report = run_conformance(f"{buggy}:cp_apply", "rope.cp_apply", dtypes=("float32",), timeout=60.0)
    failing = [c for c in report.cases if c.verdict == "fail"]
    assert failing
    for case in failing:
        codes = [d.code for d in case.diagnoses]
        # Rank 0's first two load-balanced chunks are its contiguous chunk: both names fit there.
        # (the drawn case's rank and split are not in its id).
        rank0_balanced = case.id.endswith(("load-balanced-cp2-unequal-rank0", "load-balanced-cp2-long-rank0",
                                           "load-balanced-cp4-unequal-rank0", "load-balanced-cp4-long-rank0"))
        allowed = ({"cp-chunk-restart", "cp-split-swapped"} if rank0_balanced or "/fresh/" in case.id
                   else {"cp-chunk-restart"})
        assert len(codes) == 1 and codes[0] in allowed, (case.id, codes)
    assert any(d.code == "cp-chunk-restart" for c in failing for d in c.diagnoses)


def test_cp_apply_layout_fault_keeps_ropes_own_name():
    """An output right in positions but in the other pair layout is RoPE's layout-swapped, not a
    context-parallel fault."""
    from conformance.rope.cp_apply import PROTOCOL as APPLY

    case = next(c for c in store.iter_cases("rope.cp_apply") if c.params["layout"] == "half"
                and c.params["cp_size"] == 4 and c.params["rank"] == 1)
    spec = APPLY.spec(case)
    prepared = APPLY.prepare(case, spec, "float32", "cpu")
    x = prepared.inputs_f64["x"]
    from conformance.core import rotation_reference as reference

    wrong = reference.apply(x, prepared.inputs_f64["positions"], spec, "interleaved")[0]
    graded = APPLY.grade(case, spec, prepared, torch.from_numpy(wrong).to(torch.float32))
    assert graded.ratio["standard"] > 1
    assert [d.code for d in APPLY.diagnose(case, spec, prepared, graded, "float32")] == ["layout-swapped"]
