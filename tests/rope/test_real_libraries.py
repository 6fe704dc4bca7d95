"""RoPE as real libraries and library-style code implement it, graded end to end.

These implementations support only part of the spec (one layout; full rotary only; short
positions only) and say so by raising Unsupported: the runner must find a configuration they
accept, detect their layout, grade what they support and skip the rest on their own word. The
library adapters live in examples/rope/lib_*.py; each test skips when its library is absent (the
``test`` extra installs them).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("torch")

from conformance import run_conformance  # noqa: E402
from support import detected_layout  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "rope"
DTYPES = ("float32", "bfloat16")

# file, library module, layout the library uses, whether it rotates only the whole head
LIBRARIES = [
    ("lib_transformers.py", "transformers", "half", True),
    ("lib_rotary_embedding_torch.py", "rotary_embedding_torch", "interleaved", False),
    ("lib_x_transformers.py", "x_transformers", "interleaved", False),
    ("torchtune_style.py", None, "interleaved", True),
]


@pytest.mark.parametrize("path, module, layout, full_only", LIBRARIES, ids=[p for p, *_ in LIBRARIES])
def test_library_passes_what_it_supports_and_skips_the_rest_with_a_reason(path, module, layout, full_only):
    if module is not None and importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[test]')")
    report = run_conformance(f"{EXAMPLES / path}:apply", "rope.apply", dtypes=DTYPES)
    summary = report.summary()
    bad = [(c.id, c.dtype, c.verdict, [d.code for d in c.diagnoses]) for c in report.cases
           if c.verdict in ("fail", "error")]
    assert summary["overall"] == "pass", (bad, [i.id for i in report.identities if i.verdict != "pass"])
    assert detected_layout(report) == layout
    graded = [c for c in report.cases if c.verdict in ("pass", "acceptable")]
    assert len(graded) >= 12  # a real share of the catalog is graded, not just skipped
    skipped = [c for c in report.cases if c.verdict == "skip"]
    # Skips are the adapter's own word (its Unsupported for that case), never the probe's.
    assert skipped and all(c.notes[0].startswith("unsupported: ") for c in skipped)
    assert any(f"{layout} layout only" in c.notes[0] for c in skipped), "the other layout's cases say why"
    if full_only:
        partial = [c for c in report.cases if "gpt-neox-20b" in c.id or "gpt-j-6b" in c.id]
        assert partial and all(c.verdict == "skip" for c in partial)
        assert any("partial rotary" in c.notes[0] for c in partial if c.verdict == "skip")
    assert all(i.verdict == "pass" for i in report.identities)


def test_short_cache_implementation_skips_positions_past_its_cache():
    report = run_conformance(f"{EXAMPLES / 'torchtune_style.py'}:apply", "rope.apply", dtypes=("float32",),
                             cases="rope.apply/llama2-d128-meta/*", identities=False)
    verdicts = {c.id.rsplit("/", 1)[1]: c.verdict for c in report.cases}
    assert verdicts["prefill-8"] == "pass" and verdicts["decode-4095"] in ("pass", "acceptable")
    assert verdicts["around-2p16"] == verdicts["around-2p24"] == "skip"


@pytest.mark.parametrize("path, module, layout, full_only", LIBRARIES, ids=[p for p, *_ in LIBRARIES])
def test_library_backward_passes_under_grad_and_autocast(path, module, layout, full_only):
    """Training mode on the same libraries: the gradient of x of every supported case is graded
    and within budget (autograd's backward of a correct forward), under bfloat16 autocast too,
    and the float64 gradcheck passes (or is skipped where the library refuses float64)."""
    if module is not None and importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[test]')")
    report = run_conformance(f"{EXAMPLES / path}:apply", "rope.apply", dtypes=("float32",), grad=True,
                             autocast="bfloat16", cases="rope.apply/llama2-d128/*,rope.apply/llama2-d128-meta/*,rope.apply/gpt-j-6b/*",
                             fresh=False)
    graded = [c for c in report.cases if c.verdict != "skip"]
    assert graded and report.summary()["overall"] == "pass", \
        [(c.id, c.verdict, [d.message for d in c.diagnoses]) for c in graded if c.verdict not in ("pass", "acceptable")]
    assert all(c.grad is not None and c.grad["inputs"]["x"]["budget_ratio"] <= 1.0 for c in graded)
    (check,) = [i for i in report.identities if i.id == "rope.apply.gradcheck"]
    assert check.verdict in ("pass", "skip"), check.message
