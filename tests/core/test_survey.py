"""``posref survey`` (conformance/survey, conformance/commands/survey.py): discovery of the declared
library adapters, the cells a report becomes, the matrix with its explained deviations, a fake
adapter folder graded for real, the one-line usage errors, and (slow) the committed
docs/compatibility.md regenerated: a library row that passed there must still pass.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from conformance.cli import main
from conformance.errors import UsageError
from conformance.results import CaseResult, Diagnosis, IdentityResult, Report
from conformance.survey import discover, grade, matrix

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DOC_MD = ROOT / "docs" / "compatibility.md"
DOC_JSON = ROOT / "docs" / "compatibility.json"
FAIRSEQ = EXAMPLES / "alibi" / "fairseq_style.py"
MLX = EXAMPLES / "alibi" / "mlx_float32.py"


def _module(folder: Path, rel: str, body: str) -> Path:
    path = folder / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(body))
    return path


def _fake_folder(tmp_path: Path) -> Path:
    """alibi/good.py (the authors' slopes), alibi/bad.py (MLX's power-of-two form for every head
    count: slopes-power-of-two-rule), alibi/absent.py (a distribution not installed) and
    alibi/broken.py (installed, but its import fails)."""
    folder = tmp_path / "examples"
    _module(folder, "alibi/good.py", f"""\
        from conformance.loader import load_target
        LIBRARY = "torch"
        SURVEY = [("alibi.slopes", "slopes")]
        slopes = load_target({str(FAIRSEQ) + ':slopes'!r})
        """)
    _module(folder, "alibi/bad.py", f"""\
        from conformance.loader import load_target
        LIBRARY = ("torch", "numpy")
        SURVEY = [("alibi.slopes", "slopes")]
        SURVEY_NOTES = {{"slopes": "MLX's form for every head count."}}
        slopes = load_target({str(MLX) + ':slopes_any_count'!r})
        """)
    _module(folder, "alibi/absent.py", """\
        import posref_no_such_library
        LIBRARY = "posref-no-such-distribution"
        SURVEY = [("alibi.slopes", "slopes")]
        slopes = posref_no_such_library.slopes
        """)
    _module(folder, "alibi/broken.py", """\
        import posref_no_such_module
        LIBRARY = "torch"
        SURVEY = [("alibi.slopes", "slopes"), ("alibi.bias", "bias")]
        from posref_no_such_module import slopes, bias
        """)
    _module(folder, "alibi/buggy/ignored.py", 'LIBRARY = "torch"\nSURVEY = [("alibi.slopes", "f")]\n')
    _module(folder, "alibi/plain.py", "def slopes(spec):\n    return None\n")
    return folder


# ---------------------------------------------------------------- discovery


def test_the_checkout_declares_its_library_adapters():
    rows = discover.discover()
    keys = {(r.module, r.function, r.protocol) for r in rows}
    assert ("rope/lib_litgpt.py", "apply", "rope.apply") in keys
    assert ("rope/lib_litgpt.py", "cache", "rope.cache") in keys
    assert ("attention/hf_decode_cache.py", "decode_reprefill", "attention.decode") in keys
    assert not [(r.module, r.problem) for r in rows if r.problem], "every declaration is usable"
    assert all("/buggy/" not in str(r.path) for r in rows)
    # Every lib_*.py wraps a library and declares it (lib_*_config.py adapter_for modules need a model).
    declared = {r.module for r in rows}
    libs = {f"{p.parent.name}/{p.name}" for p in EXAMPLES.glob("*/lib_*.py") if not p.stem.endswith("_config")}
    assert libs and libs <= declared, sorted(libs - declared)


def test_discovery_reads_declarations_without_importing(tmp_path):
    folder = _fake_folder(tmp_path)
    rows = discover.discover(folder)
    by = {(r.module, r.protocol): r for r in rows}
    assert set(by) == {("alibi/good.py", "alibi.slopes"), ("alibi/bad.py", "alibi.slopes"),
                       ("alibi/absent.py", "alibi.slopes"), ("alibi/broken.py", "alibi.slopes"),
                       ("alibi/broken.py", "alibi.bias")}
    assert by[("alibi/absent.py", "alibi.slopes")].missing == "posref-no-such-distribution is not installed"
    bad = by[("alibi/bad.py", "alibi.slopes")]
    assert bad.library == "torch" and bad.distributions == ("torch", "numpy") and bad.version
    assert bad.note == "MLX's form for every head count." and bad.missing is None
    assert by[("alibi/good.py", "alibi.slopes")].note is None


@pytest.mark.parametrize("body, problem", [
    ('LIBRARY = "torch"\nSURVEY = [("rope.aply", "f")]\ndef f(): pass\n', "unknown protocol 'rope.aply'"),
    ('LIBRARY = "torch"\nSURVEY = [("rope.apply", "g")]\ndef f(): pass\n', "defines no 'g'"),
    ('LIBRARY = "torch"\nSURVEY = [("rope.apply", "f", {"protocol": "x"})]\ndef f(): pass\n', "set by the survey"),
    ('LIBRARY = "torch"\nSURVEY = [("rope.apply", "f", {"lay-out": "half"})]\ndef f(): pass\n', "unknown key"),
    ('LIBRARY = "torch"\nSURVEY = ROWS\n', "SURVEY is not a literal"),
    ('LIBRARY = 3\nSURVEY = [("rope.apply", "f")]\n', "LIBRARY must be"),
    ('LIBRARY = "torch"\n', "SURVEY must be"),
    ('LIBRARY = "torch"\nSURVEY = ["rope.apply"]\n', "is not (protocol, function"),
    ('LIBRARY = "torch"\nSURVEY = [("rope.apply", "f")]\nSURVEY_NOTES = {"f": 1}\ndef f(): pass\n', "SURVEY_NOTES"),
])
def test_a_declaration_posref_cannot_use_is_an_error_row(tmp_path, body, problem):
    _module(tmp_path, "rope/mod.py", body)
    (row,) = discover.discover(tmp_path)
    assert row.problem and problem in row.problem
    cell = grade.grade_row(row, 1, 10.0, tmp_path / "scratch")  # never run
    assert cell.status == "error" and problem in cell.text()


def test_row_options_are_conform_options():
    (row,) = [r for r in discover.discover() if r.module == "rope/lib_liger.py" and r.function == "apply"]
    assert row.options == {"triton_interpret": True} and row.declared == {"triton-interpret": True}


def test_the_most_specific_note_wins():
    notes = {"apply rope.apply": "both", "apply": "function", "rope.cache": "protocol"}
    assert discover.note_for(notes, "apply", "rope.apply") == "both"
    assert discover.note_for(notes, "apply", "rope.module") == "function"
    assert discover.note_for(notes, "cache", "rope.cache") == "protocol"
    assert discover.note_for(notes, "cache", "rope.apply") is None


def test_family_filter_and_a_folder_without_declarations(tmp_path):
    folder = _fake_folder(tmp_path)
    with pytest.raises(UsageError, match="no adapter module of family rope in"):
        discover.discover(folder, ["rope"])
    with pytest.raises(UsageError, match="no examples folder at"):
        discover.discover(tmp_path / "nowhere")


# ---------------------------------------------------------------- cells


def _report(verdicts, identities=(), codes=()):
    cases = [CaseResult(id=f"p/c{i}", dtype="float32", verdict=v,
                        diagnoses=[Diagnosis(c, "m") for c in codes] if v == "fail" else [],
                        notes=["unsupported: no"] if v == "skip" else [])
             for i, v in enumerate(verdicts)]
    ids = [IdentityResult(id=f"id{i}", dtype="float32", verdict=v) for i, v in enumerate(identities)]
    return Report(suite_version="9.9", vectors_digest="sha256:ab", protocol="p", target="t", environment={},
                  profile="standard", cases=cases, identities=ids)


@pytest.mark.parametrize("code, verdicts, identities, status, text", [
    (0, ["pass", "skip"], ["pass"], "passed", "passed"),
    (0, ["pass", "acceptable"], [], "acceptable", "acceptable"),
    (1, ["skip", "skip"], [], "unsupported", "unsupported"),
    (1, ["pass", "fail", "fail"], [], "failed", "failed: code-b, code-a"),
    (1, ["pass"], ["fail"], "failed", "failed: identity id0"),
])
def test_a_report_becomes_a_cell(code, verdicts, identities, status, text):
    codes = ("code-b", "code-a") if "fail" in verdicts else ()
    report = _report(verdicts, identities, codes)
    if status == "unsupported":
        code = 1  # nothing graded: exit 1, yet not a failure of the library
    cell = grade.cell_of(code, "line", report, 2.0)
    assert (cell.status, cell.text()) == (status, text.replace("code-b, code-a", "code-a, code-b"))
    assert cell.summary == report.summary() and cell.suite_version == "9.9"


def test_runs_without_a_report_are_errors_or_not_installed():
    cell = grade.cell_of(2, "cannot import /x/lib_y.py: ModuleNotFoundError: No module named 'y'", None)
    assert cell.status == "not installed" and cell.detail == "ModuleNotFoundError: No module named 'y'"
    assert grade.cell_of(2, "unknown protocol", None).text() == "error: unknown protocol"
    assert grade.cell_of(-9, "ended by signal 9", None).text() == "error: ended by signal 9"
    passing = _report(["pass"])
    assert grade.cell_of(1, "the adapter ended the run", passing).status == "error"


# ---------------------------------------------------------------- matrix


def _row(**kw):
    base = dict(module="rope/lib_x.py", path=Path("/x/rope/lib_x.py"), library="xlib", distributions=("xlib",),
                function="apply", protocol="rope.apply", version="1.0")
    return discover.Row(**dict(base, **kw))


def test_matrix_explains_every_cell_that_does_not_pass():
    rows = [_row(), _row(function="cache", protocol="rope.cache", note="A real bug | with a pipe."),
            _row(function="module", protocol="rope.module"),
            _row(library="ylib", version=None, module="rope/lib_y.py", missing="ylib is not installed")]
    cells = [grade.Cell("acceptable", "1 passed, 1 acceptable", summary={"pass": 1}),
             grade.Cell("failed", "1 failed", codes={"yarn-ramp": 3}, summary={"fail": 1}),
             grade.Cell("unsupported", "2 skipped", summary={"skip": 2}),
             grade.Cell("not installed", "ylib is not installed", installed=False)]
    doc = matrix.document(rows, cells, dict(suite_version="0.6.0", vectors_digest="sha256:00", seed=7, torch="2.x",
                                            date="today", command="posref survey --seed 7"))
    recs = doc["rows"]
    assert [r["explanation"] for r in recs] == [None, "A real bug | with a pipe.", matrix.UNEXPLAINED,
                                               matrix.NOT_GRADED]
    assert recs[1]["codes"] == {"yarn-ramp": 3} and recs[3]["installed"] is False
    text = matrix.render(doc)
    assert "posref survey --seed 7" in text and "sha256:00" in text
    assert "| xlib | 1.0 | rope.cache | `rope/lib_x.py:cache` | failed: yarn-ramp | 1 failed |" in text
    deviations = text.split("## Deviations", 1)[1]
    assert "A real bug \\| with a pipe." in deviations and "rope.module" in deviations and \
        matrix.UNEXPLAINED in deviations
    assert "rope/lib_x.py:apply" not in deviations  # an acceptable cell passes
    assert matrix.read_json(matrix.to_json(doc)) == doc
    assert matrix.counts(doc) == {"acceptable": 1, "failed": 1, "unsupported": 1, "not installed": 1}


# ---------------------------------------------------------------- the command, for real


def test_survey_grades_a_fake_adapter_folder(tmp_path, capsys):
    folder = _fake_folder(tmp_path)
    out, js = tmp_path / "c.md", tmp_path / "c.json"
    code = main(["survey", "--examples", str(folder), "--out", str(out), "--json", str(js), "--seed", "5",
                 "--timeout", "240"])
    err = capsys.readouterr().err
    assert code == 0, err
    doc = matrix.read_json(js.read_text())
    status = {(r["module"], r["protocol"]): r for r in doc["rows"]}
    assert status[("alibi/good.py", "alibi.slopes")]["status"] in grade.PASSING
    bad = status[("alibi/bad.py", "alibi.slopes")]
    assert bad["status"] == "failed" and "slopes-power-of-two-rule" in bad["codes"]
    assert bad["explanation"] == "MLX's form for every head count."
    assert status[("alibi/absent.py", "alibi.slopes")]["cell"] == \
        "not installed: posref-no-such-distribution is not installed"
    for protocol in ("alibi.slopes", "alibi.bias"):  # the second row reuses the first's failed import
        broken = status[("alibi/broken.py", protocol)]
        assert broken["status"] == "not installed" and "posref_no_such_module" in broken["detail"]
        assert broken["installed"] is True
    assert doc["seed"] == 5 and doc["command"].startswith("posref survey --examples ")
    assert out.read_text() == matrix.render(doc)
    assert err.count("posref survey: [") == 5 and "[5/5, " in err  # one progress line per row


def test_ctrl_c_interrupts_the_rows_being_graded_and_writes_nothing(tmp_path, capsys):
    import os
    import signal
    import threading
    import time

    folder = tmp_path / "examples"
    _module(folder, "alibi/slow.py", """\
        import time
        LIBRARY = "torch"
        SURVEY = [("alibi.slopes", "slopes")]
        def slopes(spec):
            time.sleep(600)
        """)
    out = tmp_path / "c.md"
    timer = threading.Timer(6.0, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    timer.start()
    try:
        code = main(["survey", "--examples", str(folder), "--out", str(out), "--timeout", "500"])
    finally:
        timer.cancel()
    assert code == 130 and not out.exists()
    assert time.monotonic() - started < grade.STOP_GRACE  # the row's run stopped when told, not at its limit
    assert "interrupted: nothing written" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--examples", "{tmp}/nowhere"], "no examples folder at"),
    (["--examples", "{tmp}"], "declares LIBRARY and SURVEY"),
    (["--family", "ropee"], "no family 'ropee' (did you mean 'rope'?)"),
    (["--timeout", "0"], "--timeout must be a positive"),
    (["--jobs", "0"], "--jobs must be from 1"),
    (["--seed", "-1"], "argument --seed: an integer from 0"),
    (["--out", "{tmp}"], "--out:"),
])
def test_usage_errors_are_one_line(tmp_path, capsys, args, message):
    try:
        code = main(["survey", *[a.format(tmp=tmp_path) for a in args]])
    except SystemExit as exc:  # argparse's own errors exit (cli._Parser: one line, code 2)
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1, err


# ---------------------------------------------------------------- the committed matrix


def test_the_committed_matrix_is_its_json_rendered_and_explains_every_deviation():
    doc = matrix.read_json(DOC_JSON.read_text())
    assert DOC_MD.read_text() == matrix.render(doc)
    assert not [(r["module"], r["function"], r["protocol"]) for r in doc["rows"]
                if r["explanation"] == matrix.UNEXPLAINED]
    litgpt = {r["protocol"]: r for r in doc["rows"] if r["module"] == "rope/lib_litgpt.py"}
    if litgpt["rope.apply"]["status"] != "not installed":  # the generating machine had litgpt
        for rec in litgpt.values():
            assert rec["status"] == "failed" and "YaRN" in rec["explanation"]
    # Every row the checkout declares is in the matrix (regenerate it after declaring a new one).
    declared = {r.key for r in discover.discover()}
    committed = {(r["module"], r["function"], r["protocol"]) for r in doc["rows"]}
    assert declared == committed, (sorted(declared - committed), sorted(committed - declared))


@pytest.mark.slow
def test_regenerated_matrix_keeps_every_passing_library_passing(tmp_path, capsys):
    """The survey run again (its committed seed): a row that passed in docs/compatibility.json
    must still pass, unless its library is not installed on this machine at all."""
    committed = matrix.read_json(DOC_JSON.read_text())
    js = tmp_path / "now.json"
    assert main(["survey", "--json", str(js), "--out", str(tmp_path / "now.md"),
                 "--seed", str(committed["seed"])]) == 0
    now = {(r["module"], r["function"], r["protocol"]): r for r in json.loads(js.read_text())["rows"]}
    compared, lost = 0, []
    for rec in committed["rows"]:
        if rec["status"] not in grade.PASSING:
            continue
        key = (rec["module"], rec["function"], rec["protocol"])
        mine = now.get(key)
        if mine is not None and mine["status"] == "not installed" and not mine["installed"]:
            continue  # a distribution absent here: nothing to compare
        compared += 1
        if mine is None or mine["status"] not in grade.PASSING:
            lost.append((key, rec["status"], mine and mine["cell"]))
    assert compared, "no passing row of the committed matrix could be graded here"
    assert not lost, lost
