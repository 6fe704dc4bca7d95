"""--layout auto detection, the skip rule and the layout-swapped failures.

The probe detects and explains; it never skips a case (docs/design.md, "Skips"): only the
adapter's Unsupported for that case or the user's --layout does.
"""

import pytest

from conformance import run_conformance
from conformance.core.layout_probe import LayoutProbe
from support import (  # noqa: F401
    by_id,
    detected_layout,
    fixed_interleaved,
    reference_adapter,
    style,
    swapped_layout,
)

SUBSET = "rope.apply/llama2-d128/prefill-8,rope.apply/llama2-d128-meta/prefill-8"
HALF = "rope.apply/llama2-d128/prefill-8"
INTER = "rope.apply/llama2-d128-meta/prefill-8"


def run(fn, **kw):
    kw.setdefault("dtypes", ("float32",))
    return run_conformance(fn, "rope.apply", identities=False, cases=SUBSET, **kw)


@pytest.mark.parametrize(
    "fn, detected",
    [
        (reference_adapter, "both"),
        (fixed_interleaved, "interleaved"),
        (style("hf_rotate_half"), "half"),  # raises Unsupported for interleaved specs
        (style("gptj_every_two"), "interleaved"),
        (swapped_layout, "swapped"),
    ],
)
def test_auto_detects_the_layout(fn, detected):
    assert detected_layout(run(fn)) == detected


def test_fixed_layout_fails_the_other_layouts_cases_as_layout_swapped():
    """vLLM's GPT-J bug (NEOX pairing on a GPT-J model): code that ignores spec.layout is
    graded on every case and fails the other layout's, never skipped by the probe."""
    report = run(fixed_interleaved)
    results = by_id(report)
    assert results[(INTER, "float32")].verdict == "pass"
    failed = results[(HALF, "float32")]
    assert failed.verdict == "fail"
    assert failed.diagnoses[0].code == "layout-swapped"
    assert any("pairs elements in the interleaved layout" in n for n in failed.notes)
    assert report.summary()["overall"] == "fail"


def test_spec_following_grades_both_layouts():
    report = run(reference_adapter)
    assert [c.verdict for c in report.cases] == ["pass", "pass"]


def test_declared_layout_not_followed_fails_with_layout_swapped():
    report = run(fixed_interleaved, layout="half")
    results = by_id(report)
    case = results[(HALF, "float32")]
    assert case.verdict == "fail"
    assert case.diagnoses[0].code == "layout-swapped"
    assert "interleaved" in case.diagnoses[0].message
    assert results[(INTER, "float32")].verdict == "skip"  # not the declared layout
    assert report.summary()["overall"] == "fail"


def test_declared_layout_that_is_followed_passes():
    report = run(fixed_interleaved, layout="interleaved")
    assert by_id(report)[(INTER, "float32")].verdict == "pass"
    assert report.summary()["overall"] == "pass"


def test_swapped_implementation_fails_every_case_with_layout_swapped():
    report = run(swapped_layout)
    for case in report.cases:
        assert case.verdict == "fail"
        assert "layout-swapped" in [d.code for d in case.diagnoses]


def test_undetermined_layout_is_explained_on_the_case_graded_in_its_own_layout():
    probe = LayoutProbe(follows={"half": None, "interleaved": None}, reason="matches neither layout")
    from conformance.rope.spec import RopeSpec

    note = probe.explain(RopeSpec(head_dim=8, rotary_dim=8, base=1e4, layout="interleaved"))
    assert note.startswith("graded in its own layout (interleaved)") and "matches neither layout" in note
    assert not hasattr(probe, "skip_reason") and not hasattr(probe, "skip")


def test_unsupported_layout_is_skipped_on_the_adapters_own_word():
    report = run(style("hf_rotate_half"))
    skipped = by_id(report)[(INTER, "float32")]
    assert skipped.verdict == "skip"
    assert skipped.notes[0].startswith("unsupported: ")
    assert "rotate_half pairs" in skipped.notes[0]  # the adapter's own Unsupported message


def llama_style(x, positions, spec):
    """As most Llama-style code is written: rotate_half over the whole head, nothing else. It
    raises Unsupported for partial rotary and for the interleaved layout."""
    import torch

    from conformance import Unsupported

    if spec.layout != "half" or spec.rotary_dim != spec.head_dim or spec.scaling is not None:
        raise Unsupported("rotate_half over the whole head only, no scaling")
    d = spec.head_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, d, 2).float() / d))
    freqs = positions[..., None].float() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)[:, :, None, :]
    x1, x2 = x.chunk(2, dim=-1)
    return x * emb.cos().to(x.dtype) + torch.cat((-x2, x1), dim=-1) * emb.sin().to(x.dtype)


def test_full_rotary_only_single_layout_implementation_is_detected_and_passes():
    """Audit fault: the probe used the first case of each layout (partial rotary), the adapter
    raised Unsupported, detection gave up and every interleaved case failed as layout-swapped.
    The probe now tries full-rotary configurations first and takes Unsupported as 'try
    another'."""
    report = run_conformance(llama_style, "rope.apply", dtypes=("float32",))
    assert detected_layout(report) == "half"
    assert report.summary()["overall"] == "pass"
    skipped = [c for c in report.cases if c.verdict == "skip"]
    assert {c.id.split("/")[1] for c in skipped} >= {"llama2-d128-meta", "gpt-neox-20b", "gpt-j-6b"}
    assert not any(d.code == "layout-swapped" for c in report.cases for d in c.diagnoses)


def test_an_implementation_that_supports_no_probe_configuration_says_why():
    from conformance import Unsupported

    def nothing(x, positions, spec):
        raise Unsupported("not today")

    report = run(nothing)
    assert detected_layout(report) is None
    assert "unsupported: Unsupported: not today" in report.probe["reason"]
    assert report.summary()["overall"] == "skip"
