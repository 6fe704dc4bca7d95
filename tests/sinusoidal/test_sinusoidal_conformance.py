"""sinusoidal.table graded end to end: the correct examples (including ones that support only
one variant) pass, float32 angles are told apart from float64 ones, and the black-box checks hold.
The buggy examples are graded by tests/test_family_contract.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance import run_conformance

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sinusoidal"


def grade(name, **options):
    options.setdefault("fresh", False)  # tests/core/test_fresh_cases.py grades the fresh cases
    return run_conformance(f"{EXAMPLES / name}:table", "sinusoidal.table", timeout=60.0, **options)


def verdicts(report):
    return {c.id: c.verdict for c in report.cases}


def test_float32_torch_table_passes_every_case_and_check():
    report = grade("vaswani_torch.py")
    assert set(verdicts(report).values()) <= {"pass", "acceptable"} and len(report.cases) == 15  # 11, and the zoo's 4 (issue 27)
    assert verdicts(report)["sinusoidal.table/transformer-base/long"] == "acceptable"  # float32 angles
    assert all(i.verdict == "pass" for i in report.identities), [(i.id, i.message) for i in report.identities]
    assert {i.id.split("/")[1] for i in report.identities} >= {"unit-pairs", "shift-is-rotation",
                                                              "position-independence", "determinism"}


def test_float32_angles_fail_strict_and_are_named():
    report = grade("vaswani_torch.py", profile="strict", cases="sinusoidal.table/transformer-base/long")
    (case,) = report.cases
    assert case.verdict == "fail"
    assert [d.code for d in case.diagnoses] == ["angle-precision"]
    assert "float32" in case.diagnoses[0].message


@pytest.mark.parametrize("name, graded", [
    ("fairseq_style.py", {"sinusoidal.table/tensor2tensor/prefill-8", "sinusoidal.table/tensor2tensor/long",
                          "sinusoidal.table/fairseq/from-padding-idx", "sinusoidal.table/odd-d-model/fairseq-d9",
                          "sinusoidal.table/transformer-base-t2t/prefill-16",  # the zoo's (issue 27)
                          "sinusoidal.table/transformer-base-t2t/long"}),
    ("mae_numpy.py", {"sinusoidal.table/mae-vit-base/grid-corners"}),
])
def test_an_implementation_of_one_variant_passes_it_and_skips_the_rest(name, graded):
    report = grade(name)
    got = verdicts(report)
    assert {k for k, v in got.items() if v != "skip"} == graded
    assert all(got[k] in ("pass", "acceptable") for k in graded)
    skipped = [c for c in report.cases if c.verdict == "skip"]
    assert skipped and all("unsupported" in " ".join(c.notes).lower() or c.notes for c in skipped)
    assert not [i for i in report.identities if i.verdict in ("fail", "error")]


def test_mae_numpy_float64_is_strict():
    report = grade("mae_numpy.py", profile="strict", cases="sinusoidal.table/mae-vit-base/grid-corners")
    assert [c.verdict for c in report.cases] == ["pass"]
