"""`posref conform`: exit codes 0/1/2/3 and the report files it writes."""

import json
import shutil
import xml.etree.ElementTree as ET

import pytest

from conformance.cli import main
from reference.golden.store import SUITE_VERSION
from support import ROOT, style_target

SUBSET = "rope.apply/llama2-d128/prefill-8,rope.apply/llama2-d128/decode-4095"


def conform(*argv):
    return main(["conform", *argv])


def test_exit_0_when_everything_passes(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "220")  # case ids on one line
    code = conform(style_target("hf_rotate_half"), "--protocol", "rope.apply", "--cases", SUBSET, "-v")
    out = capsys.readouterr().out
    assert code == 0
    assert "PASS rope.apply/llama2-d128/decode-4095 [bfloat16]" in out  # -v lists every case
    assert "; detected layout: half" in out


def test_exit_1_when_a_case_fails(capsys):
    code = conform(style_target("bf16_angles"), "--protocol", "rope.apply", "--cases", SUBSET)
    assert code == 1
    assert "fail" in capsys.readouterr().out.lower()


def test_exit_1_when_the_adapter_raises(tmp_path, capsys):
    target = tmp_path / "raising.py"
    target.write_text("def fn(x, positions, spec):\n    raise ValueError('nope')\n")
    assert conform(f"{target}:fn", "--protocol", "rope.apply", "--cases", SUBSET) == 1


@pytest.mark.parametrize(
    "argv, message",
    [
        (["surely_missing_module_xyz:fn", "--protocol", "rope.apply"], "cannot import module"),
        (["missing_dir/adapter.py:fn", "--protocol", "rope.apply"], "no such file"),
        (["conformance.loader:nothing_here", "--protocol", "rope.apply"], "has no attribute"),
        (["conformance.loader:FORM", "--protocol", "rope.apply"], "not a callable"),
        (["conformance.loader:load_target", "--protocol", "rope.nonsense"], "unknown protocol"),
        (["conformance.loader:load_target", "--protocol", "rope.apply", "--cases", "zzz*"], "no rope.apply case"),
    ],
)
def test_exit_2_with_one_line(argv, message, capsys):
    assert conform(*argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1


def test_exit_2_for_a_bad_dtype(capsys):
    with pytest.raises(SystemExit) as info:
        conform("conformance.loader:load_target", "--protocol", "rope.apply", "--dtype", "int8")
    assert info.value.code == 2


def test_exit_2_for_cuda_without_gpu(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the check applies only without one")
    code = conform(style_target("hf_rotate_half"), "--protocol", "rope.apply", "--device", "cuda")
    assert code == 2
    assert "cuda" in capsys.readouterr().err


def _tampered_copy(tmp_path, monkeypatch):
    from reference.golden import store

    copy = tmp_path / "vectors"
    shutil.copytree(store.vectors_dir(), copy)
    monkeypatch.setenv("POSREF_VECTORS_DIR", str(copy))
    return copy


def test_exit_3_when_a_vector_file_changed(tmp_path, monkeypatch, capsys):
    copy = _tampered_copy(tmp_path, monkeypatch)
    # An untampered copy grades normally...
    assert conform(style_target("hf_rotate_half"), "--protocol", "rope.apply", "--cases", SUBSET) == 0
    capsys.readouterr()
    victim = copy / "rope.apply" / "llama2-d128.npz"
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    # ...a changed byte stops the run before grading.
    assert conform(style_target("hf_rotate_half"), "--protocol", "rope.apply", "--cases", SUBSET) == 3
    err = capsys.readouterr().err
    assert "integrity" in err and "llama2-d128.npz" in err


def test_exit_3_when_a_vector_file_is_missing(tmp_path, monkeypatch, capsys):
    copy = _tampered_copy(tmp_path, monkeypatch)
    (copy / "rope.cache" / "llama2-d128.json").unlink()
    assert conform(style_target("hf_cache"), "--protocol", "rope.cache") == 3


def test_report_files(tmp_path, capsys):
    paths = {k: tmp_path / f"report.{k}" for k in ("json", "xml", "md", "png")}
    code = conform(
        style_target("bf16_angles"), "--protocol", "rope.apply", "--cases", SUBSET,
        "--dtype", "float32", "--dtype", "bfloat16",
        "--json", str(paths["json"]), "--junit", str(paths["xml"]),
        "--markdown", str(paths["md"]), "--plot", str(paths["png"]),
    )
    assert code == 1
    doc = json.loads(paths["json"].read_text())
    for key in ("suite_version", "vectors_digest", "protocol", "target", "environment", "summary",
                "probe", "cases", "identities"):
        assert key in doc
    for key in ("python", "torch", "numpy", "numba", "device", "dtypes"):
        assert key in doc["environment"]
    assert doc["environment"]["dtypes"] == ["float32", "bfloat16"]
    assert doc["vectors_digest"].startswith("sha256:")
    assert doc["summary"]["overall"] == "fail"
    assert len(doc["cases"]) == 4
    for case in doc["cases"]:
        for key in ("id", "dtype", "verdict", "max_abs_error", "budget_ratio", "worst_index", "diagnoses", "repro"):
            assert key in case
        assert case["repro"].startswith("posref conform ")
    failing = [c for c in doc["cases"] if c["verdict"] == "fail"]
    assert failing and all(c["budget_ratio"] > 1 for c in failing)
    from conformance.reports import json_report

    json_report.validate(doc)

    suite = ET.parse(paths["xml"]).getroot()
    names = " ".join(f"{t.get('classname')} {t.get('name')}" for t in suite.iter("testcase"))
    assert names.count("rope.apply/llama2-d128/") >= 4  # one testcase per case and dtype
    md = paths["md"].read_text()
    assert doc["vectors_digest"].split(":")[1][:16] in md and "rope.apply/llama2-d128/decode-4095" in md
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_isolated_run_from_the_command_line(capsys):
    code = conform(style_target("meta_complex"), "--protocol", "rope.apply", "--isolate", "--timeout", "60",
                   "--cases", "rope.apply/llama2-d128-meta/prefill-8", "--dtype", "float16")
    assert code == 0
    assert "interleaved" in capsys.readouterr().out


def test_plot_must_be_a_png_file(tmp_path, capsys):
    code = conform(style_target("hf_rotate_half"), "--protocol", "rope.apply", "--cases", SUBSET,
                   "--plot", str(tmp_path / "error.txt"))
    assert code == 2
    assert "--plot" in capsys.readouterr().err
    assert not (tmp_path / "error.txt").exists()


def test_closed_stdout_still_writes_reports_and_keeps_the_exit_code(tmp_path):
    """`posref conform ... | head`: the reader leaves early; reports and exit code must survive."""
    import os
    import subprocess
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to stdout now fails with EPIPE
    report = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "conform", style_target("hf_rotate_half"),
         "--protocol", "rope.apply", "--cases", SUBSET, "--json", str(report)],
        stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=300,
    )
    os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    assert report.exists()


def test_cli_has_a_default_timeout_so_a_hang_cannot_stall_ci():
    from conformance.cli import build_parser

    args = build_parser().parse_args(["conform", "x.py:f", "--protocol", "rope.apply"])
    assert args.timeout is not None and 0 < args.timeout <= 600


@pytest.mark.parametrize("isolate", [False, True])
def test_an_adapter_of_another_protocol_is_a_usage_error_before_grading(isolate, capsys):
    args = ["conform", "examples/rope/hf_rotate_half.py:apply", "--protocol", "rope.cache"]
    assert main(args + (["--isolate"] if isolate else [])) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot be called as fn(positions, spec)" in err
    assert "another protocol" in err


@pytest.mark.parametrize("args, suggestion", [
    (["conform", "examples/rope/hf_rotate_half.py:aply", "--protocol", "rope.apply"], "did you mean 'apply'?"),
    (["conform", "examples/rope/hf_rotate_half.py:apply", "--protocol", "rope.aply"], "did you mean 'rope.apply'?"),
    (["conform", "examples/rope/hf_rotate_half.py:apply", "--protocol", "rope.apply", "--cases",
      "rope.apply/llama2-d128/decode-4096"], "did you mean 'rope.apply/llama2-d128/decode-4095'?"),
    (["vectors", "show", "rope.apply/llama2-d128/decode-4096"], "did you mean 'rope.apply/llama2-d128/decode-4095'?"),
    # Issue 25: case is ignored first ("RoPE.apply" was answered with 'xpos.apply').
    (["conform", "examples/rope/hf_rotate_half.py:apply", "--protocol", "RoPE.apply"], "did you mean 'rope.apply'?"),
    (["conform", "examples/rope/hf_rotate_half.py:apply", "--protocol", "ALiBi.Bias"], "did you mean 'alibi.bias'?"),
    (["conform", "examples/rope/hf_rotate_half.py:apply", "--protocol", "Rope.aply"], "did you mean 'rope.apply'?"),
])
def test_a_misspelled_name_gets_the_nearest_suggestion(args, suggestion, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and suggestion in err


@pytest.mark.parametrize("option, value, says", [
    ("--device", "cpu:abc", "device must be cpu or cuda"),
    ("--timeout", "1e10", "timeout must be a number of seconds in (0, 86400]"),
    ("--timeout", "nan", "timeout must be"),
])
def test_bad_device_or_timeout_is_one_line_exit_2(capsys, option, value, says):
    # Issue 9: these gave a RuntimeError / OverflowError traceback.
    assert conform(style_target("hf_rotate_half"), "--protocol", "rope.apply", option, value) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err


def test_json_to_stdout_is_only_json(capsys, monkeypatch):
    # Issue 9: `--json -` mixed the table into stdout.
    monkeypatch.setenv("COLUMNS", "220")  # case ids on one line
    code = conform(style_target("hf_rotate_half"), "--protocol", "rope.apply", "--cases", SUBSET, "--json", "-",
                   "-v")
    captured = capsys.readouterr()
    assert code == 0
    assert json.loads(captured.out)["summary"]["overall"] == "pass"
    assert "rope.apply/llama2-d128/decode-4095" in captured.err  # the case list, on stderr


@pytest.mark.parametrize("how", ["os._exit(0)", "sys.exit(0)", "os.kill(os.getpid(), 9)"])
def test_an_adapter_that_ends_the_process_cannot_make_the_run_pass(tmp_path, how):
    """Issue 9: os._exit(0) in-process ended the run with exit 0 and no report."""
    import subprocess
    import sys

    target = tmp_path / "ends.py"
    target.write_text(f"import os, sys\ndef apply(x, positions, spec):\n    {how}\n")
    report = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "conform", f"{target}:apply",
                           "--protocol", "rope.apply", "--cases", SUBSET, "--json", str(report)],
                          capture_output=True, text=True, timeout=300)
    if how == "sys.exit(0)":  # SystemExit is an exception: a verdict, and the run goes on
        assert proc.returncode == 1 and report.exists(), proc.stderr
    else:
        assert proc.returncode == 1, proc.stderr
        assert "the run ended before it finished" in proc.stderr


def test_the_package_pins_the_digest_of_the_vectors_it_ships():
    from reference.golden import store

    assert store.shipped_digest() == store.load_manifest()["digest"]


def test_edited_and_rehashed_vectors_are_graded_only_when_named(tmp_path, monkeypatch, capsys):
    """Issue 9: an identity function passed every case against vectors edited and re-hashed
    consistently. Such a directory is refused where posref looks by default, and graded only
    with --vectors-dir, with a note in every report."""
    import shutil

    from reference.golden import store
    from support import rehash_vectors

    root = tmp_path / "v"
    shutil.copytree(store.vectors_dir(), root)
    meta = root / "rope.apply" / "llama2-d128.json"
    meta.write_text(meta.read_text().replace('"comment": "', '"comment": "(edited) ', 1))
    rehash_vectors(root)
    target = style_target("hf_rotate_half")
    monkeypatch.setenv("COLUMNS", "400")  # the note on one line
    monkeypatch.setenv(store.ENV_VAR, str(root))
    assert conform(target, "--protocol", "rope.apply", "--cases", SUBSET) == 3
    assert "not the one this posref ships" in capsys.readouterr().err
    monkeypatch.delenv(store.ENV_VAR)
    report = tmp_path / "r.json"
    assert conform(target, "--protocol", "rope.apply", "--cases", SUBSET, "--vectors-dir", str(root),
                   "--json", str(report)) == 0
    notes = json.loads(report.read_text())["notes"]
    assert any("not the ones this posref ships" in n for n in notes)
    assert "not the ones this posref ships" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--help"], ["conform", "--help"]])
def test_help_shows_every_adapter_signature_an_example_and_the_exit_codes(capsys, argv):
    from conformance.core import registry

    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0
    out = capsys.readouterr().out
    for name in registry.protocol_names():
        assert f"{name}" in out and registry.get(name).signature in out
    assert "example:" in out and "posref conform examples/" in out
    for code in ("0  ", "1  ", "2  ", "3  "):
        assert f"\n  {code}" in out


def test_grad_help_names_the_protocols_with_a_backward(capsys):
    from conformance.core import registry

    with pytest.raises(SystemExit):
        main(["conform", "--help"])
    flat = " ".join(capsys.readouterr().out.split())
    listed = flat.split("gradcheck in float64 (protocols:", 1)[1].split(")", 1)[0]
    trainable = {n for n in registry.protocol_names() if registry.get(n).differentiable}
    assert {"rope.module", "attention.forward"} <= trainable
    assert {p.strip() for p in listed.split(",")} == trainable


def test_a_passing_run_of_the_bundled_example_is_short_and_summary_first(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert conform(str(ROOT / "examples/rope/hf_rotate_half.py:apply"), "--protocol", "rope.apply") == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) <= 30
    assert lines[0].startswith(f"posref {SUITE_VERSION} rope.apply: ") and lines[-1] == lines[0]
    assert sum("half layout only" in l for l in lines) == 1  # the adapter's skip reason, once
    assert max(len(l) for l in lines[1:-1]) <= 80


def test_quiet_prints_one_line(capsys):
    assert conform(str(ROOT / "examples/rope/hf_rotate_half.py:apply"), "--protocol", "rope.apply", "-q") == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith(f"posref {SUITE_VERSION} rope.apply: ")


def test_a_wrong_base_is_one_group_at_80_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    # the unscaled models (the example ignores scaling, which the scaled groups diagnose apart)
    code = conform(str(ROOT / "examples/rope/buggy/wrong_base.py:apply"), "--protocol", "rope.apply", "--seed", "1",
                   "--cases", "rope.apply/llama3-d128/*,rope.apply/qwen2-d128/*,rope.apply/fresh-*")
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    groups = [l for l in lines if l.startswith("  FAIL ") and "case" in l and ":" in l.split()[1]]
    assert len(groups) == 1 and groups[0].startswith("  FAIL wrong-base: ")
    assert max(len(l) for l in lines[1:-1]) <= 80
    for label in ("mismatched: ", "worst: batch row ", "first failing position: ", "$ posref conform "):
        assert any(l.strip().startswith(label) for l in lines), label


@pytest.mark.parametrize("example", ["position_offset", "dynamic_ntk_fixed_length", "output_deinterleaved",
                                     "shape_changed"])
def test_a_single_cause_failure_fits_a_screen_at_80_columns(example, capsys, monkeypatch):
    """Issue 25: one buggy example printed 494 lines at 80 columns. By default the summary, the
    causes, then the worst failures of each cause and how many more (-v lists them all): under 60
    lines, none wider than 80 columns, no line broken inside the digest."""
    monkeypatch.setenv("COLUMNS", "80")
    assert conform(str(ROOT / f"examples/rope/buggy/{example}.py:apply"), "--protocol", "rope.apply",
                   "--seed", "1") == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) < 60, "\n".join(lines)
    groups = [l for l in lines if l.startswith("  FAIL ") and ":" in l.split()[1]]
    assert len(groups) == 1, groups  # one cause
    more = [l for l in lines if l.startswith("  ... and ") and " more failing with " in l]
    assert len(more) == 1 and more[0].endswith("(-v lists them all)")
    # wider only where one word (a path, an id: never broken) does not fit after its indent
    assert all(len(l) <= 80 or len(l.rstrip(" \\").split()) == 1 for l in lines[1:-1])
    assert any(l.startswith("vectors sha256:") and len(l.split(":")[1]) == 64 for l in lines)


def test_dtype_on_a_dtype_free_protocol_is_said_once(tmp_path, capsys, monkeypatch):
    """Issue 25: --dtype bfloat16 on alibi.bias (its adapter gets no tensor in a dtype) graded
    float32 without a word. It says so once: a report note and one terminal note."""
    monkeypatch.setenv("COLUMNS", "200")
    out_json = tmp_path / "r.json"
    assert conform(str(ROOT / "examples/alibi/fairseq_style.py:bias"), "--protocol", "alibi.bias", "--dtype",
                   "bfloat16", "--json", str(out_json)) == 0
    out = capsys.readouterr().out
    says = "--dtype bfloat16 does not apply to alibi.bias"
    assert sum(says in l for l in out.splitlines()) == 1
    assert sum(says in n for n in json.loads(out_json.read_text())["notes"]) == 1
    assert conform(str(ROOT / "examples/alibi/fairseq_style.py:bias"), "--protocol", "alibi.bias", "-q") == 0
    assert conform(str(ROOT / "examples/alibi/fairseq_style.py:bias"), "--protocol", "alibi.bias") == 0
    assert "does not apply" not in capsys.readouterr().out  # the default dtypes: nothing to say
