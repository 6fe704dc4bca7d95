"""A case is skipped only on the adapter's own word (issue 23, section 1; docs/design.md).

The adapter raising ``conformance.Unsupported`` for that very case, or the user's explicit option,
may skip a case; a probe may detect and explain, never skip. Re-enactments:

- vLLM's GPT-J bug (and llama.cpp's Orion): NEOX pairing (j, j + r/2) whatever ``spec.layout``
  says. It must fail the interleaved cases as ``layout-swapped``, not have them skipped as "fixed
  to the half layout (detected)";
- an HF-style adapter that raises Unsupported for the interleaved layout keeps passing, those
  cases skipped with its own reason;
- an adapter that refuses scaling but returns x unchanged for the ``bhsd`` and ``thd`` tensor
  layouts must fail those cases under ``--shapes full`` (the tensor-layout probe used to call it
  with a scaled configuration and skip them quoting the *scaling* refusal);
- GPT-NeoX-style code that takes no position ids (positions = arange(seq)) must have its half
  cases graded (failing as ``positions-ignored`` where the positions are not 0..s-1), not skipped
  after a probe called it "interleaved".

The adapters are plain callables built on the bundled correct examples (hf_rotate_half: half
layout, scalings none/linear/llama3, every tensor layout) and on tests/support.py's float64
reference adapter (both layouts, unscaled).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")

from conformance import Unsupported, run_conformance  # noqa: E402
from reference.golden import store  # noqa: E402
from reference.golden.fresh import fresh_cases  # noqa: E402
from support import ROOT, load_file, reference_adapter  # noqa: E402

HF = load_file(ROOT / "examples" / "rope" / "hf_rotate_half.py")
SEED = 5
HALF_ONLY = "rotate_half pairs (j, j + r/2): half layout only"  # hf_rotate_half's own refusal


def params_by_id(protocol: str, seed: int, shapes: str = "sample") -> dict:
    """{case id: params} of the committed cases and the fresh ones a run with ``seed`` draws."""
    cases = list(store.iter_cases(protocol)) + list(fresh_cases(protocol, seed, shapes=shapes))
    return {c.id: c.params for c in cases}


def own_word(case, *messages) -> bool:
    """A skip the adapter made: its note carries one of the adapter's own Unsupported messages."""
    return case.verdict == "skip" and any(m in note for note in case.notes for m in messages)


def neox_whatever_the_layout(x, positions, spec):
    """vLLM's GPT-J bug: the NEOX rotation (rotate_half) applied whatever spec.layout says."""
    return HF.apply(x, positions, replace(spec, layout="half"))


def scaling_refused_tensor_layouts_ignored(x, positions, spec):
    """Refuses scaling (honestly), but returns x unchanged for the bhsd and thd tensor layouts."""
    if spec.scaling is not None:
        raise Unsupported("no long-context scaling here")
    if spec.tensor_layout != "bshd":
        return x.clone()
    return reference_adapter(x, positions, spec)


def neox_without_position_ids(x, positions, spec):
    """GPT-NeoX-style code that takes no position ids (token k of every row is at position k)
    and knows one pair layout, its own (rotate_half): it reads neither spec.layout nor positions."""
    if spec.scaling is not None:
        raise Unsupported("no long-context scaling here")
    if spec.tensor_layout != "bshd":
        raise Unsupported("x [batch, seq, heads, head_dim] only")
    b, s = positions.shape
    ignored = torch.arange(s, device=positions.device).expand(b, s)
    return HF.apply(x, ignored, replace(spec, layout="half"))


def _run(fn, **options):
    return run_conformance(fn, "rope.apply", dtypes=("float32",), identities=False, seed=SEED, **options)


def test_an_implementation_ignoring_spec_layout_fails_the_other_layout_as_layout_swapped():
    report = _run(neox_whatever_the_layout)
    params = params_by_id("rope.apply", SEED)
    interleaved = [c for c in report.cases if params[c.id]["layout"] == "interleaved"]
    half = [c for c in report.cases if params[c.id]["layout"] == "half"]
    assert interleaved and half
    # Skipped only where hf_rotate_half itself refuses (a scaling it does not implement).
    not_graded = [(c.id, c.notes) for c in interleaved if c.verdict == "skip" and not own_word(c, "rope_type")]
    assert not not_graded, not_graded
    failed = [c for c in interleaved if c.verdict == "fail"]
    assert len(failed) >= 10
    assert all("layout-swapped" in {d.code for d in c.diagnoses} for c in failed), \
        [(c.id, [d.code for d in c.diagnoses]) for c in failed if "layout-swapped" not in {d.code for d in c.diagnoses}]
    assert report.summary()["overall"] == "fail"
    assert all(c.verdict in ("pass", "acceptable", "skip") for c in half)


def test_an_adapter_refusing_the_interleaved_layout_keeps_passing_with_those_cases_skipped():
    report = _run(HF.apply)
    params = params_by_id("rope.apply", SEED)
    interleaved = [c for c in report.cases if params[c.id]["layout"] == "interleaved"]
    assert interleaved and all(c.verdict == "skip" for c in interleaved)
    assert all(own_word(c, HALF_ONLY, "rope_type") for c in interleaved), \
        [(c.id, c.notes) for c in interleaved if not own_word(c, HALF_ONLY, "rope_type")]
    graded = [c for c in report.cases if c.verdict in ("pass", "acceptable")]
    assert len(graded) >= 12 and report.summary()["overall"] == "pass"


def test_tensor_layouts_mishandled_by_an_adapter_refusing_scaling_fail_under_full_shapes():
    report = _run(scaling_refused_tensor_layouts_ignored, shapes="full")
    params = params_by_id("rope.apply", SEED, shapes="full")
    other = [c for c in report.cases if params[c.id].get("tensor_layout") in ("bhsd", "thd")]
    assert len(other) >= 4, "the full shape matrix has bhsd and thd cases"
    assert all(c.verdict == "fail" for c in other), [(c.id, c.verdict, c.notes[:1]) for c in other]
    # Nothing it does not refuse itself is skipped; scaled cases are, on its word.
    others = [(c.id, c.notes[:1]) for c in report.cases
              if c.verdict == "skip" and not own_word(c, "no long-context scaling")]
    assert not others, others


def test_neox_code_without_position_ids_has_its_half_cases_graded():
    report = _run(neox_without_position_ids)
    params = params_by_id("rope.apply", SEED)
    half = [c for c in report.cases if params[c.id]["layout"] == "half"]
    own = ("no long-context scaling", "x [batch, seq, heads, head_dim] only")
    skipped = [(c.id, c.notes[:1]) for c in report.cases if c.verdict == "skip" and not own_word(c, *own)]
    assert not skipped, skipped
    failed = [c for c in half if c.verdict == "fail"]
    # Rows starting at one offset are a constant shift (position-offset); no other code may be
    # named (far positions, where a turn by the wrong angle is noise, may go unnamed).
    codes = [{d.code for d in c.diagnoses} for c in failed]
    assert sum("positions-ignored" in found for found in codes) >= 3
    assert all(found <= {"positions-ignored", "position-offset"} for found in codes), \
        [(c.id, sorted(found)) for c, found in zip(failed, codes)]
    # A prefill from position 0 is what it computes: that case passes.
    assert any(c.verdict in ("pass", "acceptable") for c in half)
