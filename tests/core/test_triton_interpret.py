"""--triton-interpret (conformance.triton_interpret; docs/design.md, "Triton kernels on a CPU").

A RoPE kernel written in Triton (here, in a temporary file, so that no library is needed beyond
triton) is graded on CPU tensors: TRITON_INTERPRET=1 is set before the target is imported, in
this process and in --isolate's child; the report names the kernels launched through the
interpreter, and those imported before the variable was set; bfloat16 is left out by default
where the interpreter computes it on raw bits; large cases are sampled; without Triton the option
is a one-line usage error. The tests that run the interpreter use shapes of at most [1, 8, 4, 64].
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("torch")

from conformance import run_conformance  # noqa: E402
from conformance import triton_interpret  # noqa: E402
from conformance.runner import OptionError  # noqa: E402
from support import ROOT  # noqa: E402

# A Triton RoPE as a user writes one: one program per [b, s, h] row, HF's float32 tables.
KERNEL = '''
import os

IMPORTED_WITH = os.environ.get("TRITON_INTERPRET")

import torch
import triton
import triton.language as tl

from conformance import Unsupported


@triton.jit
def rope_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, HALF: tl.constexpr):
    row = tl.program_id(0)
    i = tl.arange(0, HALF)
    x1 = tl.load(x_ptr + row * 2 * HALF + i)
    x2 = tl.load(x_ptr + row * 2 * HALF + HALF + i)
    c = tl.load(cos_ptr + row * HALF + i)
    s = tl.load(sin_ptr + row * HALF + i)
    tl.store(out_ptr + row * 2 * HALF + i, x1 * c - x2 * s)
    tl.store(out_ptr + row * 2 * HALF + HALF + i, x2 * c + x1 * s)


def apply(x, positions, spec):
    half = spec.head_dim // 2
    if (spec.layout != "half" or spec.rotary_dim != spec.head_dim or spec.scaling is not None
            or spec.tensor_layout != "bshd" or half & (half - 1)):
        raise Unsupported("half layout, whole head, no scaling, [b, s, h, d], power-of-two head only")
    b, s, h, d = x.shape
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    angles = positions[..., None].float() * inv_freq  # [b, s, d/2] float32
    cos = angles.cos()[:, :, None, :].expand(b, s, h, half).contiguous()
    sin = angles.sin()[:, :, None, :].expand(b, s, h, half).contiguous()
    xf = x.float().contiguous()
    out = torch.empty_like(xf)
    if xf.numel():
        rope_kernel[(b * s * h,)](xf, cos, sin, out, HALF=half)
    return out.to(x.dtype)
'''


def _triton():
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed (pip install -e '.[test]')")


@pytest.fixture
def interpreted(tmp_path, monkeypatch):
    """The kernel file's TARGET, with TRITON_INTERPRET unset now and restored after the test."""
    _triton()
    # setenv first: it records the undo (delenv of an unset variable records none), so that the
    # variable the run sets is gone after the test whatever it was before.
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.delenv("TRITON_INTERPRET")
    path = tmp_path / "triton_rope.py"
    path.write_text(KERNEL)
    return f"{path}:apply"


def _one_case(head_dim=64, heads=None):
    """A small committed rope.apply case the kernel supports (half, whole head, unscaled, bshd)."""
    from reference.golden import store

    for case in store.iter_cases("rope.apply"):
        p = case.params
        if (p.get("layout", "half") == "half" and not p.get("scaling") and p["head_dim"] == head_dim
                and int(p.get("rotary_dim") or head_dim) == head_dim and p.get("tensor_layout", "bshd") == "bshd"
                and not p.get("inplace") and (heads is None or case.arrays["x"].shape[2] == heads)
                and case.arrays["x"].size <= 8 * 4 * 64):
            return case.id
    pytest.fail("no small half-layout case in the catalog")


@pytest.mark.parametrize("isolate", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["in-process", "isolated"])
def test_a_triton_kernel_is_graded_through_the_interpreter(interpreted, isolate):
    case = _one_case()
    report = run_conformance(interpreted, "rope.apply", triton_interpret=True, isolate=isolate, fresh=False,
                             identities=False, cases=case, dtypes=("float32",))
    (result,) = report.cases
    assert result.verdict in ("pass", "acceptable"), [d.message for d in result.diagnoses]
    info = report.triton_interpret
    assert info["triton"] != "not installed" and info["isolated"] is isolate
    if not isolate:  # launches in the child are not counted here
        assert info["launches"] >= 1 and any(k.endswith(".rope_kernel") for k in info["interpreted"]), info
    assert report.environment["TRITON_INTERPRET"] == "1"
    assert "--triton-interpret" in result.repro
    assert any("Triton's interpreter" in n for n in report.notes)


def test_without_the_option_the_kernel_is_compiled_and_cannot_run_on_cpu(interpreted):
    """The control: the same file graded without --triton-interpret launches a compiled kernel on
    CPU tensors, which raises (a GPU-less machine), so the option is what made the pass."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    report = run_conformance(interpreted, "rope.apply", fresh=False, identities=False, cases=_one_case(),
                             dtypes=("float32",))
    (result,) = report.cases
    assert result.verdict == "error" and result.diagnoses[0].code == "raised"
    assert report.triton_interpret is None and "triton_interpret" not in report.to_json()


def test_kernels_imported_before_the_interpreter_are_named(interpreted, monkeypatch):
    """A callable whose kernels were decorated before TRITON_INTERPRET was set keeps compiled
    kernels: the report lists them and a note says how to grade it."""
    from support import load_file

    path = interpreted.rsplit(":", 1)[0]
    module = load_file(path, prefix="posref_early")  # TRITON_INTERPRET unset: compiled kernels
    assert module.IMPORTED_WITH is None
    monkeypatch.setitem(sys.modules, module.__name__, module)
    case = _one_case()
    from conformance.loader import load_target

    correct = load_target(f"{ROOT / 'examples' / 'rope' / 'hf_rotate_half.py'}:apply")
    report = run_conformance(correct, "rope.apply", triton_interpret=True, fresh=False, identities=False,
                             cases=case, dtypes=("float32",))
    assert f"{module.__name__}.rope_kernel" in report.triton_interpret["compiled"]
    assert any("imported before TRITON_INTERPRET was set" in n for n in report.notes), report.notes


def test_bfloat16_is_left_out_by_default_where_the_interpreter_cannot_compute_it(interpreted):
    problem = triton_interpret.bfloat16_problem()
    case = _one_case()
    report = run_conformance(interpreted, "rope.apply", triton_interpret=True, fresh=False, identities=False,
                             cases=case)
    if problem is None:  # a Triton whose interpreter computes bfloat16: both dtypes graded
        assert {c.dtype for c in report.cases} == {"float32", "bfloat16"}
        return
    assert "raw bits" in problem
    assert [c.dtype for c in report.cases] == ["float32"]
    assert any("bfloat16 is not graded by default" in n for n in report.notes)
    asked = run_conformance(interpreted, "rope.apply", triton_interpret=True, fresh=False, identities=False,
                            cases=case, dtypes=("bfloat16",))
    assert [c.dtype for c in asked.cases] == ["bfloat16"]
    assert any("not the kernel's on a GPU" in n for n in asked.notes)


def test_reports_say_the_kernels_ran_in_the_interpreter(interpreted, tmp_path):
    from conformance.reports import write_reports
    from conformance.reports.terminal import report_lines

    report = run_conformance(interpreted, "rope.apply", triton_interpret=True, fresh=False, identities=False,
                             cases=_one_case(), dtypes=("float32",))
    paths = {k: tmp_path / f"r.{k}" for k in ("json", "junit", "markdown")}
    write_reports(report, json=str(paths["json"]), junit=str(paths["junit"]), markdown=str(paths["markdown"]))
    doc = json.loads(paths["json"].read_text())  # written only when it matches the schema
    assert doc["triton_interpret"]["launches"] >= 1 and doc["environment"]["TRITON_INTERPRET"] == "1"
    assert "posref.triton_interpret" in paths["junit"].read_text()
    assert "Triton&#x27;s interpreter" in paths["markdown"].read_text() or \
        "Triton's interpreter" in paths["markdown"].read_text()
    text = " ".join(t for t, _ in report_lines(report, width=400))
    assert "Triton kernels ran in Triton's interpreter" in text and "rope_kernel" in text


def test_without_triton_the_option_is_a_one_line_usage_error(monkeypatch, capsys):
    from conformance.cli import main

    monkeypatch.setenv("TRITON_INTERPRET", "0")  # restored after the test

    monkeypatch.setattr(triton_interpret, "unavailable", lambda: "Triton is not installed here (pip install triton)")
    code = main(["conform", f"{ROOT / 'examples' / 'rope' / 'hf_rotate_half.py'}:apply", "--protocol", "rope.apply",
                 "--triton-interpret", "--no-fresh"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "Triton is not installed" in err
    assert __import__("os").environ["TRITON_INTERPRET"] == "0"  # nothing was set up
    with pytest.raises(OptionError, match="Triton is not installed"):
        run_conformance(f"{ROOT / 'examples' / 'rope' / 'hf_rotate_half.py'}:apply", "rope.apply",
                        triton_interpret=True)


def test_the_option_accepts_only_cpu_and_booleans():
    _triton()
    from conformance.runner import Options, check_options

    with pytest.raises(OptionError, match="triton_interpret must be True or False"):
        check_options(Options(protocol="rope.apply", triton_interpret="yes"))
    from conformance.runner import _check_triton

    with pytest.raises(OptionError, match="CPU tensors"):
        _check_triton(Options(protocol="rope.apply", device="cuda", triton_interpret=True))


def _case(case_id, elements):
    return SimpleNamespace(id=case_id, arrays={"x": np.zeros(elements), "positions": np.zeros(3, dtype=np.int64)})


def test_sample_keeps_small_cases_and_one_large_case_of_each_kind():
    limit = 100
    cases = [_case("p/a/small", 50), _case("p/a/big-2", 400), _case("p/a/big-1", 200), _case("p/b/big", 300),
             _case("p/fresh/edge", 100)]
    kept, left = triton_interpret.sample(cases, limit)
    assert [c.id for c in kept] == ["p/a/small", "p/a/big-1", "p/b/big", "p/fresh/edge"]
    assert [c.id for c in left] == ["p/a/big-2"]
    assert triton_interpret.case_elements(cases[0]) == 50  # integer arrays do not count


@pytest.mark.slow  # two pytest sessions in subprocesses (7 s here)
def test_the_pytest_option_sets_the_variable_before_collection(tmp_path):
    """--posref-triton-interpret: the test module sees TRITON_INTERPRET=1 when it is imported, so
    a Triton kernel it imports is interpreted and conformance.cases(..., triton_interpret=True)
    grades it; without the option both tests fail (the kernel is compiled: it raises on CPU)."""
    _triton()
    (tmp_path / "triton_rope.py").write_text(KERNEL)
    test = tmp_path / "test_env.py"
    test.write_text(textwrap.dedent(f'''
        import os
        AT_IMPORT = os.environ.get("TRITON_INTERPRET")

        import pytest
        import conformance
        from triton_rope import apply  # its kernel decorated now: interpreted only with the option

        def test_env():
            assert AT_IMPORT == "1"

        @pytest.mark.parametrize("case", conformance.cases("rope.apply", cases={_one_case()!r}, dtypes=("float32",),
                                                           triton_interpret=True))
        def test_kernel(case):
            case.check(apply)
    '''))
    env = {k: v for k, v in __import__("os").environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT) + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", str(test),
           "--rootdir", str(tmp_path)]
    with_option = subprocess.run(run + ["--posref-triton-interpret"], capture_output=True, text=True, env=env,
                                 cwd=tmp_path, timeout=300)
    assert with_option.returncode == 0 and "2 passed" in with_option.stdout, \
        with_option.stdout[-2000:] + with_option.stderr[-2000:]
    without = subprocess.run(run, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert without.returncode == 1 and "2 failed" in without.stdout, without.stdout[-2000:]


def test_the_tests_leave_the_variable_as_they_found_it(interpreted):
    """The fixture's own check: a graded run sets TRITON_INTERPRET; the fixture's undo removes it
    (a later test, or the seed sweep, must see the machine's own setting)."""
    import os

    run_conformance(interpreted, "rope.apply", triton_interpret=True, fresh=False, identities=False,
                    cases=_one_case(), dtypes=("float32",))
    assert os.environ.get("TRITON_INTERPRET") == "1"
