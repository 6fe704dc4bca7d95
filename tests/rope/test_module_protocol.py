"""rope.module: stateful rotary modules driven by a script (issue 14, part B)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conformance import run_conformance  # noqa: E402
from conformance.core import registry  # noqa: E402
from conformance.rope import module as module_protocol  # noqa: E402
from reference import rope as rr  # noqa: E402
from reference.golden import store  # noqa: E402
from reference.rope import module_vectors  # noqa: E402
from support import load_file  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "rope"
TORCH = f"{EXAMPLES / 'module_torch.py'}:module"
HF = f"{EXAMPLES / 'module_transformers.py'}:module"
BUGGY = sorted((EXAMPLES / "buggy").glob("module_*.py"))


def _cases():
    return {c.id.rsplit("/", 1)[1]: c for c in store.iter_cases("rope.module")}




def _run(target, dtypes=("float32",), cases=None, **options):
    return run_conformance(target, "rope.module", dtypes=dtypes, cases=cases, identities=False,
                           **{"fresh": False, **options})


def test_protocol_is_registered_with_its_codes():
    proto = registry.get("rope.module")
    assert proto.arity == 1 and proto.signature.startswith("fn(spec) -> module")
    codes = registry.families()["rope"].codes
    assert {"stale-state", "longrope-switch"} <= set(codes)


def test_expected_values_are_the_reference_of_each_step_afresh():
    """Each step's slice is rope.apply with that step's own length (largest position + 1)."""
    for case in _cases().values():
        p = case.params
        for start, stop in module_vectors.step_bounds(p["steps"]):
            pos = case.arrays["positions"][:, start:stop]
            kw = {} if p["scaling"] is None else {"scaling": p["scaling"], "seq_len": int(pos.max()) + 1}
            want = rr.apply(case.arrays["x"][:, start:stop], pos, rotary_dim=p["rotary_dim"], base=p["base"],
                            layout=p["layout"], **kw)
            np.testing.assert_allclose(case.arrays["expected"][:, start:stop], want, rtol=0, atol=1e-12)


def test_scripts_tell_the_stale_state_from_the_right_one():
    """The short prompt after the long one: step 0's scaled frequencies move it far past any budget
    (so a module that kept them cannot pass by accident)."""
    case = _cases()["dynamic-long-then-short"]
    p = case.params
    (a0, b0), (a1, b1) = module_vectors.step_bounds(p["steps"])[:2]
    pos = case.arrays["positions"][:, a1:b1]
    stale = rr.apply(case.arrays["x"][:, a1:b1], pos, rotary_dim=p["rotary_dim"], base=p["base"],
                     scaling=p["scaling"], seq_len=int(case.arrays["positions"][:, a0:b0].max()) + 1)
    assert np.abs(stale - case.arrays["expected"][:, a1:b1]).max() > 0.05


def test_plain_torch_module_passes_in_three_dtypes():
    report = _run(TORCH, ("float32", "bfloat16", "float16"))
    assert report.summary()["overall"] == "pass", [(c.id, c.dtype, c.verdict) for c in report.cases]
    assert len(report.cases) == 3 * len(_cases())


def test_hf_module_passes_and_its_cast_is_diagnosed():
    """transformers' LlamaRotaryEmbedding (dynamic and LongRoPE state) passes every script in
    float32 and bfloat16, except the module.to(torch.bfloat16) cases: its non-persistent inv_freq
    buffers are cast too, and the diagnosis names them."""
    pytest.importorskip("transformers")
    report = _run(HF, ("float32", "bfloat16"))
    for c in report.cases:
        if "/interleaved-" in c.id:  # HF's module pairs (j, j + r/2): it refuses these scripts itself
            assert c.verdict == "skip" and "unsupported" in c.notes[0].lower(), (c.id, c.notes)
        elif c.dtype == "bfloat16" and "/cast-" in c.id:
            assert c.verdict == "fail"
            found = {d.code: d.message for d in c.diagnoses}
            assert "'inv_freq'" in found["angle-precision"], found
        else:
            assert c.verdict in ("pass", "acceptable"), (c.id, c.dtype, c.diagnoses)


@pytest.mark.parametrize("path", BUGGY, ids=[p.stem for p in BUGGY])
def test_each_buggy_module_gets_its_code(path):
    mod = load_file(path)
    assert mod.PROTOCOL == "rope.module"
    options = dict(getattr(mod, "OPTIONS", {}))
    report = _run(f"{path}:module", options.pop("dtypes", ("float32",)), **options)
    found = [d for c in report.cases for d in c.diagnoses]
    assert mod.CODE in {d.code for d in found}, [(d.code, d.message) for d in found]
    messages = " ".join(d.message for d in found if d.code == mod.CODE)
    assert "step " in messages or "'inv_freq'" in messages


def test_stale_state_names_the_earlier_step():
    report = _run(f"{EXAMPLES / 'buggy' / 'module_dynamic_stale.py'}:module",
                  cases="rope.module/scripts-d32/dynamic-long-then-short")
    (case,) = report.cases
    (stale,) = [d for d in case.diagnoses if d.code == "stale-state"]
    assert stale.message.startswith("step 1 ") and "step 0" in stale.message
    assert case.worst_location.startswith("step 1 ")


class _Raises(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x, positions):
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("second call")
        return x.clone()


def _grade(value, case_name="same-length-two-offsets", dtype="float32"):
    proto = module_protocol.PROTOCOL
    case = _cases()[case_name]
    spec = proto.spec(case)
    prepared = proto.prepare(case, spec, dtype, "cpu")
    return proto.grade(case, spec, prepared, value), prepared


def test_a_step_that_raises_ends_the_script_naming_the_step():
    graded, prepared = _grade(_Raises())
    raised = [p for p in graded.problems if p.code == "raised"]
    assert raised and raised[0].message.startswith("step 1 ") and "second call" in raised[0].message
    assert prepared.steps[2].graded is None  # the script stopped there


def test_bad_factory_results_are_refused():
    graded, _ = _grade(42)
    assert [p.code for p in graded.problems] == ["shape-changed"]
    bad = _Raises()
    bad.posref_output = "tables"
    graded, _ = _grade(bad)
    assert "posref_output" in graded.problems[0].message


def test_expanded_and_pair_order_tables_are_both_graded():
    """cos_sin form: HF's [b, s, r] cat(freqs, freqs) and pair order [b, s, r/2] both pass; an
    expansion whose second half is wrong fails."""
    case = _cases()["same-length-two-offsets"]
    spec = module_protocol.PROTOCOL.spec(case)
    inv = torch.tensor(1.0 / spec.base ** (np.arange(0, spec.rotary_dim, 2) / spec.rotary_dim))

    class Tables(torch.nn.Module):
        posref_output = "cos_sin"

        def __init__(self, mode):
            super().__init__()
            self.mode = mode

        def forward(self, x, positions):
            ang = positions[..., None].double() * inv
            cos, sin = ang.cos().float(), ang.sin().float()
            if self.mode == "pairs":
                return cos, sin
            second = sin if self.mode == "broken" else cos
            return torch.cat((cos, second), -1), torch.cat((sin, sin), -1)

    for mode, ok in (("pairs", True), ("expanded", True), ("broken", False)):
        graded, _ = _grade(Tables(mode))
        assert (not graded.problems and graded.ratio["standard"] <= 1.0) is ok, mode


def test_isolated_runs_skip_with_the_reason():
    """--isolate is the user's explicit option: it excludes the module cases, with the reason."""
    from types import SimpleNamespace

    spec = module_protocol.PROTOCOL.spec(_cases()["cast-to-dtype"])
    excluded = module_protocol.PROTOCOL.excluded
    assert "--isolate" in excluded(spec, SimpleNamespace(isolate=True, layout="auto"))
    assert excluded(spec, SimpleNamespace(isolate=False, layout="auto")) is None


def test_layout_option_selects_the_module_scripts_of_that_layout():
    """--layout is accepted for rope.module (an interleaved module, rotary-embedding-torch, has
    interleaved scripts to run) and leaves out the other layout's scripts, saying so."""
    from types import SimpleNamespace

    spec = module_protocol.PROTOCOL.spec(_cases()["cast-to-dtype"])
    other = "interleaved" if spec.layout == "half" else "half"
    excluded = module_protocol.PROTOCOL.excluded
    assert excluded(spec, SimpleNamespace(isolate=False, layout=spec.layout)) is None
    assert f"--layout {other} was declared" in excluded(spec, SimpleNamespace(isolate=False, layout=other))
    report = _run(TORCH, layout="interleaved")
    layouts = {c.id: module_protocol.PROTOCOL.spec(c).layout for c in store.iter_cases("rope.module")}
    for case in report.cases:
        declared_out = layouts[case.id] != "interleaved"
        assert (case.verdict == "skip" and "--layout interleaved was declared" in case.notes[0]) == declared_out


def test_step_spec_changes_only_the_length():
    spec = module_protocol.PROTOCOL.spec(_cases()["dynamic-growing"])
    assert module_protocol.step_spec(spec, 34) == dataclasses.replace(spec, seq_len=34)


def test_the_readme_module_adapter_is_under_ten_lines_and_grades(tmp_path):
    """README's rope.module adapter for an HF-style rotary module, graded as printed."""
    pytest.importorskip("transformers")
    text = (ROOT / "README.md").read_text()
    start = text.index("```python\nfrom transformers import LlamaConfig") + len("```python\n")
    code = text[start:text.index("```", start)]
    assert len([line for line in code.splitlines() if line.strip()]) < 10
    (tmp_path / "readme_rope.py").write_text(code)
    # Run as the README's comment says: HF's tables are half-layout, and --layout half (the user's
    # explicit option) leaves the interleaved scripts out; without it they are graded and fail
    # (issue 23: a skip only on the adapter's word or the user's option).
    assert "--layout half" in code
    report = _run(f"{tmp_path / 'readme_rope.py'}:module", dtypes=("float32", "bfloat16"), layout="half")
    verdicts = {(c.id.rsplit("/", 1)[1], c.dtype): c.verdict for c in report.cases}
    assert all(v in ("pass", "acceptable") for (name, dtype), v in verdicts.items()
               if dtype == "float32" and not name.startswith("interleaved-"))
    assert verdicts[("interleaved-two-offsets", "float32")] == "skip"
    unopted = _run(f"{tmp_path / 'readme_rope.py'}:module", cases="rope.module/scripts-d32/interleaved-two-offsets")
    assert [c.verdict for c in unopted.cases] == ["fail"]
    # transformers casts its non-persistent frequency buffers with the module (design.md)
    assert verdicts[("cast-to-dtype", "bfloat16")] == "fail"
    assert verdicts[("dynamic-long-then-short", "bfloat16")] in ("pass", "acceptable")
