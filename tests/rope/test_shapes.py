"""The serving shape matrix of rope.apply's fresh cases (issue 14), what RoPE's adds to the other
families': the tensor-layout and in-place cases, the default sample's just-past-tile lengths and
``--shapes full``, the black-box checks at a decode shape, and the bugs it catches that the small
catalog shapes cannot (batch row 0 only, positions from the heads axis, an unrotated tile tail).
What every family's matrix holds (decode batches, tile lengths, head counts, distinct far rows, the
``shapes`` option) is tested over the families in tests/core/test_family_shapes.py."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conformance import Unsupported, run_conformance  # noqa: E402
from conformance.rope import diagnosis as dg  # noqa: E402
from conformance.rope.spec import RopeSpec  # noqa: E402
from reference import rope as rr  # noqa: E402
from reference.golden.fresh import fresh_cases  # noqa: E402
from reference.golden.shapes import TAIL_LENGTHS  # noqa: E402
from reference.rope import vectors  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HF = str(ROOT / "examples" / "rope" / "hf_rotate_half.py") + ":apply"
BUGGY = ROOT / "examples" / "rope" / "buggy"


def load(path: Path):
    spec = importlib.util.spec_from_file_location("posref_shapes_" + path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------------------
# What the matrix holds


def test_tensor_layout_and_inplace_cases_carry_their_parameters():
    cases = {c.id.rsplit("/", 1)[1]: c for c in fresh_cases("rope.apply", 3, shapes="full")}
    thd = cases["shape-thd-varlen-half"]
    assert thd.params["tensor_layout"] == "thd" and thd.params["cu_seqlens"] == [0, 1, 64, 193, 198]
    pos = thd.arrays["positions"][0]
    for lo, hi in zip(thd.params["cu_seqlens"], thd.params["cu_seqlens"][1:]):
        assert np.all(np.diff(pos[lo:hi]) == 1)  # each sequence restarts from its own offset
    assert cases["shape-bhsd-decode-b7-interleaved"].params["tensor_layout"] == "bhsd"
    assert cases["shape-inplace-seq-129-half"].params["inplace"] is True
    assert "tensor_layout" not in cases["shape-seq-65-half"].params


def test_sample_is_one_case_of_each_kind_and_the_same_in_full():
    sample = [c for c in fresh_cases("rope.apply", 5) if "/shape-" in c.id]
    full = {c.id: c for c in fresh_cases("rope.apply", 5, shapes="full")}
    # one of each sampled kind, plus every just-past-tile length (65, 129, 257) in both layouts
    assert len(sample) == len(vectors.SAMPLE_KINDS) + 2 * len(TAIL_LENGTHS)
    for n in TAIL_LENGTHS:
        for layout in ("half", "interleaved"):
            assert any(c.id.endswith(f"/shape-seq-{n}-{layout}") for c in sample), (n, layout)
    assert not any("-bhsd-" in c.id or "-thd-" in c.id for c in sample)  # full matrix only
    for c in sample:
        assert c.id in full
        assert np.array_equal(c.arrays["x"], full[c.id].arrays["x"])
        assert np.array_equal(c.arrays["positions"], full[c.id].arrays["positions"])
    assert len(full) > 60


def test_fresh_matrix_expected_values_are_the_reference():
    case = next(c for c in fresh_cases("rope.apply", 2, shapes="full") if c.id.endswith("shape-decode-b64-half"))
    p = case.params
    ref = rr.apply(case.arrays["x"], case.arrays["positions"], rotary_dim=p["rotary_dim"], base=p["base"],
                   layout=p["layout"])
    assert case.arrays["x"].shape == (64, 1, 3, 128)
    np.testing.assert_allclose(case.arrays["expected"], ref, rtol=0, atol=1e-12)


def test_cli_accepts_shapes_full(tmp_path):
    from conformance.cli import main

    code = main(["conform", HF, "--protocol", "rope.apply", "--shapes", "full", "--seed", "4", "--dtype", "float32",
                 "--cases", "rope.apply/fresh-*/shape-decode-b7-*", "-q"])
    assert code == 0


# ------------------------------------------------------------------------------------------
# Grading: the correct example, tensor layouts, in place


def test_correct_example_passes_the_whole_matrix():
    report = run_conformance(HF, "rope.apply", shapes="full", seed=9, dtypes=("float32", "bfloat16"),
                             cases="rope.apply/fresh-*/shape-*")
    s = report.summary()
    assert s["overall"] == "pass", [(c.id, c.verdict) for c in report.cases if c.verdict in ("fail", "error")]
    graded = {c.id for c in report.cases if c.verdict in ("pass", "acceptable")}
    # the half-layout tensor-layout and in-place cases are graded, not skipped
    for name in ("bhsd-decode-b7", "bhsd-seq-129", "thd-varlen", "thd-decode-b7", "inplace-decode-b7",
                 "prefill-8192", "decode-b64", "seq-1000", "heads-64"):
        assert f"rope.apply/fresh/shape-{name}-half" in graded, name
    assert any("/fresh/" in c.repro and "--seed 9" in c.repro and "--shapes full" in c.repro
               for c in report.cases if c.repro)


def test_unsupported_tensor_layouts_are_skipped_with_a_reason():
    gptj = str(ROOT / "examples" / "rope" / "gptj_rotate_every_two.py") + ":apply"
    report = run_conformance(gptj, "rope.apply", shapes="full", seed=9, dtypes=("float32",),
                             cases="rope.apply/fresh-*/shape-thd-*,rope.apply/fresh-*/shape-bhsd-*,"
                                   "rope.apply/fresh-*/shape-decode-b2-*")
    layout_cases = [c for c in report.cases if "-thd-" in c.id or "-bhsd-" in c.id]
    assert layout_cases and all(c.verdict == "skip" for c in layout_cases)
    interleaved = [c for c in layout_cases if c.id.endswith("-interleaved")]
    # each case skipped on the adapter's own word for that case (no probe decides it)
    assert interleaved and all(c.notes[0] == "unsupported: x [batch, seq, heads, head_dim] only"
                               for c in interleaved)
    assert "unsupported_tensor_layouts" not in report.probe
    assert report.summary()["overall"] == "pass"  # the bshd decode case is graded and passes


def inplace_adapter(x, positions, spec):
    """Writes the rotation into x and returns None when allowed (spec.inplace)."""
    hf = load(ROOT / "examples" / "rope" / "hf_rotate_half.py")
    out = hf.apply(x, positions, RopeSpec(spec.head_dim, spec.rotary_dim, spec.base, spec.layout, spec.scaling,
                                          spec.seq_len))
    if spec.inplace:
        x.copy_(out)
        return None
    return out


def test_inplace_kernel_is_graded_on_the_written_x():
    report = run_conformance(inplace_adapter, "rope.apply", shapes="full", seed=2, dtypes=("float32",),
                             cases="rope.apply/fresh-*/shape-inplace-*", identities=False)
    half = [c for c in report.cases if c.id.endswith("-half")]
    assert len(half) == 2 and all(c.verdict in ("pass", "acceptable") for c in half)


def test_inplace_kernel_that_writes_wrong_values_fails():
    def wrong(x, positions, spec):
        x.mul_(2.0)
        return None

    report = run_conformance(wrong, "rope.apply", shapes="full", seed=2, dtypes=("float32",),
                             cases="rope.apply/fresh-*/shape-inplace-decode-b7-half", identities=False)
    assert [c.verdict for c in report.cases] == ["fail"]
    assert "input-mutated" not in {d.code for c in report.cases for d in c.diagnoses}


def test_writing_into_x_without_inplace_is_still_input_mutated():
    def writes(x, positions, spec):
        x.copy_(inplace_adapter(x.clone(), positions, spec))
        return x

    report = run_conformance(writes, "rope.apply", shapes="full", seed=2, dtypes=("float32",),
                             cases="rope.apply/fresh-*/shape-decode-b7-half", identities=False)
    assert {d.code for c in report.cases for d in c.diagnoses} == {"input-mutated"}


# ------------------------------------------------------------------------------------------
# The bugs the matrix catches


def test_batch_row_zero_bug_passed_the_catalog_until_the_zoos_batched_decode():
    """The documented fused-RoPE bug passed the catalog's small shapes (suite 0.5.0); since 0.6.0 only
    the zoo's committed batched decodes (one token per row, rows at different positions) catch it
    there, with its own diagnosis."""
    target = str(BUGGY / "batch_row_zero_only.py") + ":apply"
    old = run_conformance(target, "rope.apply", dtypes=("float32",), fresh=False, identities=False)
    failing = [c for c in old.cases if c.verdict == "fail"]
    assert failing and all(c.id.endswith("/batched-decode") for c in failing), [c.id for c in failing]
    assert {d.code for c in failing for d in c.diagnoses} == {"batch-row-zero-only"}


@pytest.mark.parametrize("name", ["batch_row_zero_only", "positions_from_heads_axis", "tile_tail_unrotated"])
def test_shape_bug_gets_its_code(name):
    module = load(BUGGY / f"{name}.py")
    report = run_conformance(f"{BUGGY / name}.py:apply", "rope.apply", dtypes=("float32",), seed=7,
                             **getattr(module, "OPTIONS", {}))
    failing = [c for c in report.cases if c.verdict == "fail"]
    assert failing
    codes = [c.diagnoses[0].code for c in failing]
    assert codes.count(module.CODE) >= len(codes) // 2, codes
    assert all("\n" not in d.message for c in failing for d in c.diagnoses)


def test_batch_row_zero_bug_fails_the_decode_blackbox_check():
    report = run_conformance(f"{BUGGY / 'batch_row_zero_only.py'}:apply", "rope.apply", dtypes=("float32",),
                             fresh=False, cases="rope.apply/llama3-d128/prefill-8")
    by_id = {i.id: i for i in report.identities}
    bad = by_id["rope.apply/batch-independence-decode"]
    assert bad.verdict == "fail" and [d.code for d in bad.diagnoses] == ["batch-row-zero-only"]
    assert by_id["rope.apply/batch-independence"].verdict == "pass"  # the old [2, 6, 3, 64] shape


def test_default_run_catches_the_batch_row_zero_bug_at_most_seeds():
    """The default sample holds one batched-decode case: half of them in the half layout."""
    target = f"{BUGGY / 'batch_row_zero_only.py'}:apply"
    report = run_conformance(target, "rope.apply", dtypes=("float32",), seed=1, cases="rope.apply/fresh-*")
    assert report.summary()["overall"] == "fail"  # the black-box decode checks at least


# ------------------------------------------------------------------------------------------
# The diagnosis mutants on synthetic outputs

SPEC = RopeSpec(64, 64, 1e4, "half")


def ref(x, pos, spec=SPEC):
    return rr.apply(x, pos, rotary_dim=spec.rotary_dim, base=spec.base, layout=spec.layout)


def codes(found):
    return [d.code for d in found]


def test_diagnosis_names_batch_row_zero_only():
    rng = np.random.default_rng(1)
    pos = np.array([[4095], [131071], [7], [0], [900]])
    x = rng.standard_normal((5, 1, 3, 64))
    out = x.copy()
    out[:1] = ref(x[:1], pos[:1])
    assert codes(dg.diagnose_apply(x, pos, out, SPEC, "float32")) == ["batch-row-zero-only"]
    assert dg.diagnose_apply(x, pos, ref(x, pos), SPEC, "float32") == []


def test_diagnosis_names_positions_from_heads_axis():
    rng = np.random.default_rng(2)
    pos = np.stack([np.arange(100, 105), np.arange(3000, 3005)])
    x = rng.standard_normal((2, 5, 8, 64))
    head_pos = pos[:, np.minimum(np.arange(8), 4)]  # [b, heads]
    out = np.concatenate([ref(x[:, :, h:h + 1], np.repeat(head_pos[:, h:h + 1], 5, axis=1)) for h in range(8)], axis=2)
    assert codes(dg.diagnose_apply(x, pos, out, SPEC, "float32")) == ["positions-from-heads-axis"]


@pytest.mark.parametrize("seq", [65, 129, 1000])
def test_diagnosis_names_the_unrotated_tile_tail(seq):
    rng = np.random.default_rng(seq)
    pos = np.stack([np.arange(10, 10 + seq), np.arange(5000, 5000 + seq)])
    x = rng.standard_normal((2, seq, 3, 64))
    out = ref(x, pos)
    tail = (seq // 64) * 64
    out[:, tail:] = x[:, tail:]
    found = dg.diagnose_apply(x, pos, out, SPEC, "float32")
    assert codes(found) == ["tile-tail-unrotated"]
    assert f"last {seq - tail} of {seq} tokens" in found[0].message


def test_default_run_stays_fast():
    """A default run (catalog, sampled matrix, black-box checks) of a correct example: the
    shape-matrix sample adds a handful of small cases (measured about 0.1 s; 30 s here leaves
    room for a loaded test machine)."""
    start = time.perf_counter()
    report = run_conformance(HF, "rope.apply", seed=3)
    assert report.summary()["overall"] == "pass"
    assert time.perf_counter() - start < 30.0
    shapes = [c for c in report.cases if "/shape-" in c.id]
    assert len({c.id for c in shapes}) == len(vectors.SAMPLE_KINDS) + 2 * len(TAIL_LENGTHS)
    # graded, or skipped on the example's own word for the pair layout it does not take
    assert all(c.verdict in ("pass", "acceptable") or "half layout only" in c.notes[0] for c in shapes)
    assert any(c.verdict != "skip" for c in shapes)


def test_inplace_kernel_in_a_child_process(tmp_path):
    """--isolate: the child's write into x is copied back, and the written x is graded."""
    adapter = tmp_path / "inplace_adapter.py"
    adapter.write_text(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('hf', {str(ROOT / 'examples/rope/hf_rotate_half.py')!r})\n"
        "hf = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(hf)\n\n\n"
        "def apply(x, positions, spec):\n"
        "    out = hf.apply(x, positions, spec)\n"
        "    return None if spec.inplace else out\n")
    report = run_conformance(f"{adapter}:apply", "rope.apply", isolate=True, shapes="full", seed=2,
                             dtypes=("float32",), cases="rope.apply/fresh-*/shape-inplace-decode-b7-half",
                             identities=False)
    assert [c.verdict for c in report.cases] in (["pass"], ["acceptable"])


def test_an_adapter_taking_bhsd_but_not_thd():
    hf = load(ROOT / "examples" / "rope" / "hf_rotate_half.py")

    def bhsd_only(x, positions, spec):
        if spec.tensor_layout == "thd":
            raise Unsupported("no packed sequences")
        return hf.apply(x, positions, spec)

    report = run_conformance(bhsd_only, "rope.apply", shapes="full", seed=6, dtypes=("float32",), identities=False,
                             cases="rope.apply/fresh-*/shape-bhsd-*-half,rope.apply/fresh-*/shape-thd-*-half")
    verdicts = {c.id.split("/")[-1]: (c.verdict, c.notes) for c in report.cases}
    assert verdicts["shape-bhsd-decode-b7-half"][0] in ("pass", "acceptable")
    assert verdicts["shape-thd-varlen-half"][0] == "skip"
    assert "no packed sequences" in verdicts["shape-thd-varlen-half"][1][0]

