"""The identity registry and the ``posref identities`` command, with temporary identities."""

import json
import math
import os
import subprocess
import sys

import pytest

from conformance import cli
from reference import identities
from reference.identities import Identity, grade, register, run_identities


def _temp(monkeypatch, id, residual, bound=1e-12, expect="holds"):
    """Register a temporary identity (removed again after the test) whose check returns residual."""
    def check():
        if isinstance(residual, Exception):
            raise residual
        return residual

    identity = Identity(id=id, family=id.split(".")[0], statement=f"temporary {id}",
                        check=check, bound=bound, expect=expect)
    monkeypatch.setitem(identities.REGISTRY, id, identity)
    return identity


# --------------------------------------------------------------------------------------------
# grading


@pytest.mark.parametrize("expect, residual, bound, verdict", [
    ("holds", 0.0, 0.0, "holds"),
    ("holds", 1e-16, 1e-15, "holds"),
    ("holds", 1e-15, 1e-15, "holds"),            # the bound itself is allowed
    ("holds", 2e-15, 1e-15, "failing"),
    ("holds", math.nan, 1e-15, "failing"),
    ("holds", math.inf, 1e-15, "failing"),
    ("violated-by-design", 0.3, 1e-6, "violated-by-design"),
    ("violated-by-design", math.inf, 1e-6, "violated-by-design"),
    ("violated-by-design", 1e-9, 1e-6, "failing"),  # it was supposed to be violated
    ("violated-by-design", 1e-6, 1e-6, "failing"),
    ("violated-by-design", math.nan, 1e-6, "failing"),
])
def test_grade(expect, residual, bound, verdict):
    assert grade(expect, residual, bound) == verdict


def test_violated_by_design_identity_is_reported_as_such(monkeypatch):
    _temp(monkeypatch, "tmpgauss.shift-invariance", 0.25, bound=1e-9, expect="violated-by-design")
    _temp(monkeypatch, "tmpgauss.norm-scaling", 1e-17, bound=1e-15)
    results = run_identities("tmpgauss")
    assert [(r["id"], r["verdict"]) for r in results] == [
        ("tmpgauss.shift-invariance", "violated-by-design"),
        ("tmpgauss.norm-scaling", "holds"),
    ]
    assert results[0]["residual"] == 0.25 and results[0]["bound"] == 1e-9


def test_a_check_that_raises_is_failing_with_its_error(monkeypatch):
    _temp(monkeypatch, "tmpraise.boom", ValueError("positions: bad\nsecond line"))
    (result,) = run_identities("tmpraise")
    assert result["verdict"] == "failing"
    assert math.isnan(result["residual"])
    assert result["error"] == "ValueError: positions: bad"


def test_results_are_grouped_by_family_in_registration_order(monkeypatch):
    monkeypatch.setattr(identities, "REGISTRY", {})  # the family modules are imported already
    for name in ("zzz.b", "aaa.y", "zzz.a", "mmm.x", "aaa.x"):
        _temp(monkeypatch, name, 0.0)
    assert [r["id"] for r in run_identities()] == ["aaa.y", "aaa.x", "mmm.x", "zzz.b", "zzz.a"]
    assert identities.families() == ["aaa", "mmm", "zzz"]


def test_unknown_family_raises_value_error_naming_known_families():
    with pytest.raises(ValueError, match=r"^family: unknown family 'nosuch'; known families: .*rope"):
        run_identities("nosuch")


# --------------------------------------------------------------------------------------------
# registration


def test_register_decorator_and_function_forms(monkeypatch):
    monkeypatch.setattr(identities, "REGISTRY", dict(identities.REGISTRY))

    @register(id="tmpdeco.answer", statement="the answer holds", bound=0.5)
    def answer():
        return 0.25

    assert answer() == 0.25  # the decorator hands the check back unchanged
    entry = identities.REGISTRY["tmpdeco.answer"]
    assert (entry.family, entry.expect, entry.bound, entry.check) == ("tmpdeco", "holds", 0.5, answer)

    same = Identity(id="tmpfn.x", family="tmpfn", statement="x", check=lambda: 0.0, bound=0.0)
    assert register(same) is same and identities.REGISTRY["tmpfn.x"] is same


def test_a_second_identity_under_the_same_id_is_refused(monkeypatch):
    monkeypatch.setattr(identities, "REGISTRY", dict(identities.REGISTRY))
    register(id="tmpdup.x", statement="one", bound=0.0)(lambda: 0.0)
    with pytest.raises(ValueError, match="^id: .*already registered"):
        register(id="tmpdup.x", statement="two", bound=0.0)(lambda: 1.0)


def test_reimporting_a_family_module_is_not_a_duplicate():
    import importlib

    import reference.rope.identities as rope_identities

    importlib.reload(rope_identities)
    assert "rope.orthogonality" in identities.REGISTRY


@pytest.mark.parametrize("kwargs, argument", [
    (dict(id="other.x"), "id"),                      # id outside its family
    (dict(statement="two\nlines"), "statement"),
    (dict(statement=""), "statement"),
    (dict(check=1.0), "check"),
    (dict(bound=-1.0), "bound"),
    (dict(bound=math.nan), "bound"),
    (dict(bound=math.inf), "bound"),
    (dict(expect="maybe"), "expect"),
])
def test_identity_rejects_bad_fields(kwargs, argument):
    fields = dict(id="fam.x", family="fam", statement="s", check=lambda: 0.0, bound=0.0, expect="holds")
    fields.update(kwargs)
    with pytest.raises(ValueError, match=f"^{argument}: "):
        Identity(**fields)


def test_identity_is_frozen():
    identity = Identity(id="fam.x", family="fam", statement="s", check=lambda: 0.0, bound=0.0)
    with pytest.raises(AttributeError):
        identity.bound = 1.0


def test_families_are_discovered_from_the_package():
    assert "rope" in identities.families()
    ids = [i for i, entry in identities.REGISTRY.items() if entry.family == "rope"]
    assert "rope.orthogonality" in ids and "rope.relative-position" in ids


# --------------------------------------------------------------------------------------------
# the command line


def test_cli_all_rope_identities_hold_without_importing_torch(tmp_path):
    # One full run, in a fresh interpreter so that nothing else has imported torch yet.
    out_file = tmp_path / "identities.json"
    code = ("import sys; from conformance import cli; "
            f"rc = cli.main(['identities', '--family', 'rope', '--json', {str(out_file)!r}]); "
            "assert 'torch' not in sys.modules, 'torch was imported'; sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr[-2000:]
    printed = done.stdout
    document = json.loads(out_file.read_text())
    assert document and all(set(item) == {"id", "family", "statement", "residual", "bound", "verdict"}
                            for item in document)
    assert {item["family"] for item in document} == {"rope"}
    assert all(item["verdict"] == "holds" for item in document)
    assert all(isinstance(item["residual"], float) or item["residual"] == 0 for item in document)
    for item in document:
        assert item["id"] in printed
    assert f"{len(document)} identities: {len(document)} hold, 0 violated by design, 0 failing" in printed


def test_cli_family_filter(monkeypatch, capsys, tmp_path):
    _temp(monkeypatch, "tmpfilter.a", 0.0)
    _temp(monkeypatch, "tmpfilter.b", 1e-20)
    out_file = tmp_path / "f.json"
    assert cli.main(["identities", "--family", "tmpfilter", "--json", str(out_file)]) == 0
    document = json.loads(out_file.read_text())
    assert [item["id"] for item in document] == ["tmpfilter.a", "tmpfilter.b"]
    printed = capsys.readouterr().out
    assert "tmpfilter.a" in printed and "rope.orthogonality" not in printed


def test_cli_failing_identity_exits_1_and_is_marked(monkeypatch, capsys, tmp_path):
    _temp(monkeypatch, "tmpfail.ok", 0.0)
    _temp(monkeypatch, "tmpfail.broken", 1e-3, bound=1e-15)
    _temp(monkeypatch, "tmpfail.raises", RuntimeError("kaput"))
    out_file = tmp_path / "f.json"
    assert cli.main(["identities", "--family", "tmpfail", "--json", str(out_file)]) == 1
    verdicts = {item["id"]: item for item in json.loads(out_file.read_text())}
    assert verdicts["tmpfail.ok"]["verdict"] == "holds"
    assert verdicts["tmpfail.broken"]["verdict"] == "failing"
    assert verdicts["tmpfail.broken"]["residual"] == 1e-3
    assert verdicts["tmpfail.raises"]["verdict"] == "failing"
    assert verdicts["tmpfail.raises"]["residual"] is None          # NaN is written as null
    assert verdicts["tmpfail.raises"]["error"] == "RuntimeError: kaput"
    printed = capsys.readouterr().out
    assert "failing" in printed and "2 failing" in printed and "kaput" in printed


def test_cli_violated_by_design_exits_0_but_an_unexpected_hold_exits_1(monkeypatch, capsys):
    _temp(monkeypatch, "tmpvbd.not-shift-invariant", 0.5, bound=1e-9, expect="violated-by-design")
    assert cli.main(["identities", "--family", "tmpvbd"]) == 0
    assert "violated-by-design" in capsys.readouterr().out
    _temp(monkeypatch, "tmpvbd.not-shift-invariant", 0.0, bound=1e-9, expect="violated-by-design")
    assert cli.main(["identities", "--family", "tmpvbd"]) == 1


def test_cli_unknown_family_is_a_one_line_usage_error(capsys):
    assert cli.main(["identities", "--family", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "unknown family 'nosuch'" in err and "rope" in err and "Traceback" not in err


def test_cli_unwritable_json_is_a_usage_error(capsys, tmp_path, monkeypatch):
    _temp(monkeypatch, "tmpjson.a", 0.0)
    target = tmp_path / "missing-dir" / "out.json"
    assert cli.main(["identities", "--family", "tmpjson", "--json", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--json" in err


def test_statements_with_brackets_are_printed_verbatim(monkeypatch, capsys):
    identity = Identity(id="tmpmarkup.perm", family="tmpmarkup", statement="f(x[perm]) = f(x)[perm] [bold]",
                        check=lambda: 0.0, bound=0.0)
    monkeypatch.setitem(identities.REGISTRY, identity.id, identity)
    assert cli.main(["identities", "--family", "tmpmarkup"]) == 0
    assert "f(x[perm]) = f(x)[perm] [bold]" in capsys.readouterr().out



def test_at_80_columns_the_statement_wraps_under_the_id(monkeypatch):
    """Issue 25: at 80 columns the table squeezed the statement column to 4 characters (509
    lines for 25 identities). Each identity is its id line, then its statement wrapped under it."""
    import dataclasses
    import io

    from rich.console import Console

    from conformance.commands.identities import print_table

    statement = ("causal attention with a KERPLE (log, power) or T5 bias is unchanged when every "
                 "position shifts by the same amount (shift 100, 6 tokens) x[perm]")
    _temp(monkeypatch, "tmpwide.a-rather-long-identity-name-that-is-one-word", 1.25e-16, bound=7e-15)
    name = "tmpwide.a-rather-long-identity-name-that-is-one-word"
    monkeypatch.setitem(identities.REGISTRY, name, dataclasses.replace(identities.REGISTRY[name], statement=statement))
    _temp(monkeypatch, "tmpwide.b", 0.5, bound=1e-9, expect="violated-by-design")
    out = io.StringIO()
    print_table(run_identities("tmpwide"), Console(file=out, width=80, highlight=False))
    lines = out.getvalue().splitlines()
    assert max(len(l) for l in lines) <= 80
    first = lines.index("  tmpwide.a-rather-long-identity-name-that-is-one-word: holds (residual")
    assert lines[first + 1] == "    1.25e-16, bound 7e-15)"  # the id and each number stay whole
    assert lines[first + 2].startswith("      causal attention with")
    assert lines[first + 3].startswith("        ")  # a hanging indent under the statement's start
    assert " ".join(l.strip() for l in lines[first + 2:first + 4]) == statement
    assert "  tmpwide.b: violated-by-design (residual 0.5, bound 1e-09)" in lines
    assert lines[-1] == "2 identities: 1 hold, 1 violated by design, 0 failing"
    assert len(lines) <= 12
