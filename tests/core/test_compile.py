"""--compile (conformance.compiled): every case graded eagerly and under torch.compile.

The inductor tests compile for real on this machine's C++ compiler (a few seconds per distinct
shape): they grade two small cases. The rest use the "eager" / "aot_eager" backends, which run
dynamo's tracing (torch.compiler.is_compiling() is True there too) without generating code, and
backends registered here that raise, to stand for a missing compiler.
"""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

from conformance import compiled as compiling
from conformance import run_conformance
from conformance.core.codes import CORE_CODES
from conformance.pytest_cases import cases as case_params
from conformance.reports import json_report, junit, markdown
from conformance.reports._common import citation
from conformance.reports.terminal import report_lines
from conformance.runner import OptionError, exit_code

ROOT = Path(__file__).resolve().parents[2]
HF = str(ROOT / "examples" / "rope" / "hf_rotate_half.py") + ":apply"
BUGGY = str(ROOT / "examples" / "rope" / "buggy" / "compile_fault.py") + ":apply"
MODULE = str(ROOT / "examples" / "rope" / "module_torch.py") + ":module"
TWO = "rope.apply/llama2-d128/prefill-8,rope.apply/llama2-d128/decode-4095"
ONE = "rope.apply/llama2-d128/prefill-8"
QUICK = {"fresh": False, "identities": False, "dtypes": ("float32",)}


def _terminal(report, verbosity=0) -> str:
    return "\n".join(str(line[0] if isinstance(line, tuple) else line)
                     for line in report_lines(report, verbosity=verbosity, width=300))


def _halves(report):
    eager = {(c.id, c.dtype): c for c in report.cases if not c.compiled}
    made = {(c.id, c.dtype): c for c in report.cases if c.compiled}
    return eager, made


# A backend that raises whenever it is asked to compile: torch.compile cannot run (the way a
# missing C++ compiler makes inductor raise at the first compile).
@torch._dynamo.register_backend(name="posref_test_no_compiler")
def _no_compiler(gm, example_inputs):
    raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found (simulated)\nsecond line")


# A backend that compiles the two-operation probe but refuses anything larger: the adapter's own
# compile raises while torch.compile works here.
@torch._dynamo.register_backend(name="posref_test_picky")
def _picky(gm, example_inputs):
    ops = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]
    if len(ops) > 4:
        raise RuntimeError(f"picky backend refuses a graph of {len(ops)} operations\nsecond line")
    return gm.forward


_COMPILES = []


@torch._dynamo.register_backend(name="posref_test_counting")
def _counting(gm, example_inputs):
    _COMPILES.append(len(example_inputs))
    return gm.forward


# ------------------------------------------------------------------------------------------
# The real compile (inductor, gcc here)


@pytest.fixture(scope="module")
def hf_inductor():
    return run_conformance(HF, "rope.apply", cases=TWO, fresh=False, dtypes=("float32", "bfloat16"),
                           compile=True)


def test_correct_example_passes_compiled_with_inductor(hf_inductor):
    report = hf_inductor
    assert compiling.unavailable("inductor", "cpu") is None, "gcc is installed here: inductor must compile"
    assert report.compile == {"backend": "inductor", "ran": True, "reason": None}
    eager, made = _halves(report)
    assert set(eager) == set(made) and len(made) == 4  # 2 cases x 2 dtypes, each twice
    for key, c in made.items():
        assert c.verdict in ("pass", "acceptable"), (key, c.verdict, c.diagnoses)
        # Inductor fuses the kernel and keeps float32 intermediates (cos and sin are not rounded to
        # bfloat16 first): its error differs from eager's, within the same budget.
        assert not c.diagnoses and not eager[key].diagnoses
        assert "--compile" in c.repro and "--compile" not in eager[key].repro
    # Each compiled result sits right after its eager twin (the order of the plan).
    assert [c.compiled for c in report.cases] == [False, True] * 4
    assert exit_code(report) == 0
    assert report.identities and all(i.verdict == "pass" for i in report.identities)
    assert any("--compile: every case is graded eagerly" in n for n in report.notes)


def test_reports_mark_the_compiled_results(hf_inductor, tmp_path):
    report = hf_inductor
    doc = json.loads(json.dumps(report.to_json()))
    json_report.validate(doc)
    assert doc["compile"]["ran"] is True
    assert [c["compiled"] for c in doc["cases"]] == [False, True] * 4
    junit.write(report, tmp_path / "r.xml")
    names = [tc.get("name") for tc in ET.parse(tmp_path / "r.xml").getroot().iter("testcase")]
    assert f"{ONE}[float32][compiled]" in names and f"{ONE}[float32]" in names
    text = _terminal(report, verbosity=1)
    assert f"{ONE} [float32] compiled" in text
    assert "torch.compile (backend inductor): 4 compiled result(s), 0 correct eagerly but wrong compiled" in text
    assert "torch.compile (backend inductor)" in markdown.render(report)


@pytest.fixture(scope="module")
def buggy_inductor():
    return run_conformance(BUGGY, "rope.apply", cases=TWO, **QUICK, compile=True)


def test_compile_only_fault_is_diagnosed_with_inductor(buggy_inductor):
    """vLLM's M-RoPE shape: right eagerly, positions shifted by one in the compiled graph."""
    eager, made = _halves(buggy_inductor)
    assert len(made) == 2
    for key, c in made.items():
        assert eager[key].verdict in ("pass", "acceptable") and not eager[key].diagnoses
        assert c.verdict == "fail"
        codes = [d.code for d in c.diagnoses]
        assert codes[0] == "compile-fault" and "position-offset" in codes
        assert c.diagnoses[0].message.startswith(f"correct eagerly ({eager[key].verdict}), fails under "
                                                 "torch.compile (backend inductor)")
        assert f"{c.id} [float32] compiled: fail" in citation(buggy_inductor, c)
    assert exit_code(buggy_inductor) == 1
    markdown_text = markdown.render(buggy_inductor)
    assert "float32 compiled" in markdown_text and "compile-fault" in markdown_text


def test_compile_fault_is_a_core_code():
    assert "compile-fault" in CORE_CODES and len(CORE_CODES["compile-fault"].splitlines()) == 1


# ------------------------------------------------------------------------------------------
# Where torch.compile cannot run, and where the adapter's compile raises


def test_missing_compiler_grades_the_eager_half_with_a_note():
    report = run_conformance(HF, "rope.apply", cases=ONE, **QUICK, compile=True,
                             compile_backend="posref_test_no_compiler")
    assert [c.compiled for c in report.cases] == [False]  # the compiled half was not run
    assert report.cases[0].verdict == "pass"
    assert exit_code(report) == 0  # not a failure of the run
    info = report.compile
    assert info["ran"] is False and info["backend"] == "posref_test_no_compiler"
    assert "No working C++ compiler found (simulated)" in info["reason"] and "second line" not in info["reason"]
    notes = [n for n in report.notes if n.startswith("--compile")]
    assert len(notes) == 1 and "the compiled half was not run" in notes[0]
    json_report.validate(json.loads(json.dumps(report.to_json())))
    assert "not run: torch.compile (backend posref_test_no_compiler) cannot run here" in _terminal(report)


def test_torch_without_compile_is_a_reason(monkeypatch):
    monkeypatch.delattr(torch, "compile")
    monkeypatch.setattr(compiling, "_UNAVAILABLE", {})
    assert compiling.unavailable("inductor", "cpu").endswith("has no torch.compile")


def test_pytest_items_of_the_compiled_half_skip_without_a_compiler():
    params = case_params("rope.apply", cases=ONE, dtypes="float32", compile=True,
                         compile_backend="posref_test_no_compiler")
    items = [p.values[0] for p in params]
    assert [str(i) for i in items] == [f"{ONE}:float32", f"{ONE}:float32:compiled"]
    assert items[0].check(HF.rsplit(":", 1)[0] + ":apply").verdict == "pass"
    with pytest.raises(pytest.skip.Exception, match="the compiled half was not run: torch.compile"):
        items[1].check(HF)


def test_a_compile_that_raises_is_the_case_error_with_its_first_line():
    report = run_conformance(HF, "rope.apply", cases=ONE, **QUICK, compile=True, compile_backend="posref_test_picky")
    assert report.compile["ran"] is True  # the two-operation probe compiles
    eager, made = _halves(report)
    (key, c), = made.items()
    assert eager[key].verdict == "pass"
    assert c.verdict == "error"
    assert [d.code for d in c.diagnoses] == ["compile-fault", "raised"]
    assert c.diagnoses[0].message.startswith("correct eagerly (pass), raises under torch.compile")
    assert "picky backend refuses a graph" in c.diagnoses[1].message
    assert "second line" not in c.diagnoses[1].message


# ------------------------------------------------------------------------------------------
# The other ways in: pytest items, the command line, the project table, options


def test_pytest_items_grade_the_compiled_half():
    params = case_params("rope.apply", cases=ONE, dtypes="float32", compile=True, compile_backend="eager")
    eager_item, compiled_item = (p.values[0] for p in params)
    assert eager_item.check(BUGGY).verdict == "pass"
    with pytest.raises(AssertionError, match=r"(?s)compiled fail: correct eagerly \(pass\), fails under torch.compile.*position-offset"):
        compiled_item.check(BUGGY)


def test_command_line_and_project_table():
    from conformance import project
    from conformance.cli import build_parser
    from conformance.commands.conform import options_from_args

    args = build_parser().parse_args(["conform", HF, "--protocol", "rope.apply", "--compile",
                                      "--compile-backend", "aot_eager"])
    opts = options_from_args(args)
    assert opts.compile is True and opts.compile_backend == "aot_eager"
    assert options_from_args(build_parser().parse_args(["conform", HF, "--protocol", "rope.apply"])).compile is False
    assert project.given_options(["--compile"]) == {"compile": True}


@pytest.mark.parametrize("options, message", [
    ({"compile_backend": "aot_eager"}, "applies only with compile"),
    ({"compile": True, "compile_backend": "no such; backend"}, "compile_backend must be the name"),
    ({"compile": "yes"}, "compile must be True or False"),
])
def test_bad_compile_options(options, message):
    with pytest.raises(OptionError, match=message):
        run_conformance(HF, "rope.apply", cases=ONE, **QUICK, **options)


def test_module_protocol_compiles_the_returned_module():
    """rope.module: the adapter returns a module that posref calls; that module is compiled too."""
    report = run_conformance(MODULE, "rope.module", cases="rope.module/scripts-d32/same-length-two-offsets",
                             **QUICK, compile=True, compile_backend="aot_eager")
    eager, made = _halves(report)
    assert set(made) == set(eager) and len(made) == 1
    assert all(c.verdict in ("pass", "acceptable") for c in report.cases)


def test_grad_runs_the_backward_through_the_compiled_graph():
    report = run_conformance(HF, "rope.apply", cases=ONE, **QUICK, compile=True, compile_backend="aot_eager",
                             grad=True)
    eager, made = _halves(report)
    (key, c), = made.items()
    assert c.grad["verdict"] == "pass" and eager[key].grad["verdict"] == "pass"


@pytest.mark.slow  # 7 s: a child process compiling for itself
def test_isolated_compiled_half():
    report = run_conformance(BUGGY, "rope.apply", cases=ONE, **QUICK, compile=True, compile_backend="eager",
                             isolate=True, timeout=120.0)
    eager, made = _halves(report)
    (key, c), = made.items()
    assert eager[key].verdict == "pass" and [d.code for d in c.diagnoses][:1] == ["compile-fault"]


def test_past_dynamos_recompile_limit_the_call_stays_compiled():
    """dynamo runs a code object eagerly after 8 recompiles; CompiledCall raises that limit, so
    the 12th distinct guard is still compiled code (is_compiling() is True only while tracing)."""

    def marked(x, name):  # a str argument: dynamo guards on its value, one compile per name
        return x + int(name[1:]) + (1000 if torch.compiler.is_compiling() else 0)

    call = compiling.CompiledCall(marked, "posref_test_counting")
    _COMPILES.clear()
    x = torch.zeros(2)
    got = [float(call(x, f"k{k}")[0]) for k in range(12)]
    assert got == [1000.0 + k for k in range(12)]
    assert len(_COMPILES) >= 9  # more than dynamo's default limit of 8 compiles of one code object
