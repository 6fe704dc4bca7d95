"""Fuzzing (issue 9): corrupted, truncated, oversized or hand-edited vectors files and odd command
lines always give a clear one-line error and the documented exit code, never a traceback.

Each test copies the vectors once, then lets hypothesis rewrite one file per example (restored
afterwards) and runs ``posref vectors verify`` (exit 3 expected: every hash still matches the
manifest only when the manifest is re-hashed, which the "careful attacker" cases do).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.cli import main
from support import rehash_vectors

NPZ = "rope.cache/worked-example.npz"
META = "rope.cache/worked-example.json"
FUZZ = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A one-group vectors directory (fast to verify), generated and certified like the real one."""
    from reference.golden import generate

    path = tmp_path_factory.mktemp("fuzz") / "vectors"
    generate.regenerate(path, family="rope.cache/worked-example", backend="numpy", progress=None)
    return path


def _verify_fails_cleanly(root, capsys, rehash):
    """Without re-hashing the edit must be caught (exit 3); re-hashed, the files may still hold
    the same arrays (bytes after a zip's end, say), so exit 0 is allowed too. Never a traceback."""
    saved = (root / "MANIFEST.json").read_bytes()
    try:
        if rehash:
            rehash_vectors(root)
        code = main(["vectors", "verify", "--dir", str(root)])
    finally:
        (root / "MANIFEST.json").write_bytes(saved)
    out = capsys.readouterr()
    assert code in ((0, 3) if rehash else (3,)), out.out + out.err
    assert "Traceback" not in out.out + out.err
    if code == 3:
        assert all(line.startswith("FAIL ") for line in out.out.splitlines())
        assert out.err.count("\n") == 1


@FUZZ
@given(data=st.binary(max_size=2000), cut=st.integers(0, 4000), rehash=st.booleans())
def test_fuzzed_npz(root, capsys, data, cut, rehash):
    original = (root / NPZ).read_bytes()
    mutated = original[:cut] + data if data else original[:cut]
    if mutated == original:
        mutated += b"\0"
    try:
        (root / NPZ).write_bytes(mutated)
        _verify_fails_cleanly(root, capsys, rehash)
    finally:
        (root / NPZ).write_bytes(original)


@FUZZ
@given(value=json_values, key=st.sampled_from(["testGroups", "protocol", "numberOfTests", "notes",
                                                "suiteVersion", "arraysFile", None]))
def test_fuzzed_metadata(root, capsys, value, key):
    original = (root / META).read_text()
    meta = json.loads(original)
    if key is None:
        meta = value
    else:
        meta[key] = value
    try:
        (root / META).write_text(json.dumps(meta))
        if json.loads((root / META).read_text()) == json.loads(original):
            return
        _verify_fails_cleanly(root, capsys, rehash=True)
    finally:
        (root / META).write_text(original)


@FUZZ
@given(value=json_values, key=st.sampled_from(["files", "digest", "suite_version", "certification",
                                                "number_of_cases", None]), raw=st.binary(max_size=200))
def test_fuzzed_manifest(root, capsys, value, key, raw):
    original = (root / "MANIFEST.json").read_bytes()
    data = json.loads(original)
    if key is None:
        text = raw
    else:
        data[key] = value
        text = json.dumps(data).encode()
    if text == original:
        return
    try:
        (root / "MANIFEST.json").write_bytes(text)
        code = main(["vectors", "verify", "--dir", str(root)])
        out = capsys.readouterr()
        assert code == 3 and "Traceback" not in out.out + out.err, out.out + out.err
    finally:
        (root / "MANIFEST.json").write_bytes(original)


WORDS = ["conform", "vectors", "verify", "list", "show", "regenerate", "identities", "--protocol",
         "rope.apply", "--dtype", "float8", "--cases", "*", "--timeout", "-1", "nan", "--device",
         "cuda:x", "--max-time", "0", "--json", "/", "--dir", "/nonexistent", "--family", "nosuch",
         "--layout", "diagonal", "--profile", "lax", "x.py:f", "::", "", "\x00", "\udcff",
         # issue 24: a device index torch cannot parse, $ in names, a full device, a missing
         # vectors folder, reports over a symlink or a FIFO (made in the scratch folder), paths
         # inside the vectors in use, case ids that are paths
         "cpu:99999999999999999999999", "cuda:99999999999", "cpu:1", "a$^$b.py:f", "$", "--plot", "p$.png",
         "/dev/full", "--vectors-dir", "--junit", "--markdown", "--write-expected-failures", "link.json",
         "fifo.json", "vectors/MANIFEST.json", "../evil3/span", "rope.apply/../../x"]


def _scratch_with_traps(scratch):
    """In the scratch folder: link.json -> victim (a file that must keep its bytes) and
    fifo.json, a FIFO (writing to it, or reading it, would block)."""
    import os
    from pathlib import Path

    victim = Path(scratch) / "victim"
    victim.write_text("keep me")
    (Path(scratch) / "link.json").symlink_to(victim)
    os.mkfifo(Path(scratch) / "fifo.json")
    return victim


class _Hung(Exception):
    pass


def _bounded(seconds):
    """A context that fails the test (instead of hanging it) after ``seconds``: SIGALRM."""
    import contextlib
    import signal

    @contextlib.contextmanager
    def ctx():
        def alarm(*_):
            raise _Hung(f"still running after {seconds} s (blocked on a FIFO?)")

        old = signal.signal(signal.SIGALRM, alarm)
        signal.alarm(seconds)
        try:
            yield
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)

    return ctx()


@settings(max_examples=60, deadline=None)
@given(argv=st.lists(st.sampled_from(WORDS), max_size=6))
def test_fuzzed_command_lines(argv):
    """Any command line built from these words ends with an exit code of 0-3, not a traceback
    (argparse's own usage errors exit 2 through SystemExit), and never writes through the
    symlink or blocks on the FIFO planted in its folder."""
    import contextlib
    import io
    import os
    import stat
    import tempfile

    if argv[:1] == ["vectors"] and "regenerate" in argv:
        return  # writes files: covered by tests/core/test_vectors_regenerate.py
    err = io.StringIO()
    # a report path among the words ("identities --json nan") lands in a scratch folder, not the checkout
    with tempfile.TemporaryDirectory() as scratch, contextlib.chdir(scratch), \
            contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        victim = _scratch_with_traps(scratch)
        try:
            with _bounded(300):
                code = main(argv)
        except SystemExit as exc:
            code = exc.code
        assert victim.read_text() == "keep me", argv
        assert os.path.islink("link.json") and stat.S_ISFIFO(os.lstat("fifo.json").st_mode), argv
    assert code in (0, 1, 2, 3), (argv, err.getvalue()[-500:])
    assert "Traceback" not in err.getvalue(), (argv, err.getvalue()[-2000:])


@pytest.fixture(scope="module")
def vectors_in_use(tmp_path_factory):
    """A copy of the shipped vectors for POSREF_VECTORS_DIR: a test that names the vectors in
    use as a report path must never risk the checkout's own."""
    import shutil

    from reference.golden import store

    copy = tmp_path_factory.mktemp("in-use") / "vectors"
    shutil.copytree(store.vectors_dir(), copy)
    return copy


# Options of `posref conform` and `posref identities` with the values a script may pass them:
# hostile ones (issue 24) and one harmless one each. {trap}: a path made in the scratch folder.
HOSTILE = {
    "report": ["", "{link}", "{fifo}", "/dev/full", "{manifest}", "{target}", "{scratch}"],
    "--device": ["cpu:99999999999999999999999", "cpu:1", "cpu:", "cuda:99999999999"],
    "--vectors-dir": ["/nonexistent", "", "{link}", "{fifo}"],
}
HARMLESS = {"--json": "r.json", "--junit": "r.xml", "--markdown": "r.md", "--plot": "r.png",
            "--write-expected-failures": "base.txt", "--device": "cpu", "--vectors-dir": "{vectors}"}
REPORTS = ("--json", "--junit", "--markdown", "--plot", "--write-expected-failures")
option_values = st.sampled_from(sorted(HARMLESS)).flatmap(lambda option: st.tuples(
    st.just(option), st.sampled_from(HOSTILE["report" if option in REPORTS else option] + [HARMLESS[option]])))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(["conform", "identities"]),
       options=st.lists(option_values, max_size=3, unique_by=lambda pair: pair[0]))
def test_fuzzed_option_values(vectors_in_use, command, options):
    """Command lines with the argument shapes of issue 24 (a device index torch cannot parse,
    empty strings, $ in the target's file name, /dev/full, a missing folder, a symlink or a FIFO
    as a report path, the vectors in use or the target's source as a report): exit 2 with one
    line before grading when any value is hostile, else a graded run (0 or 1); never a
    traceback, and every trap left as it was."""
    import contextlib
    import io
    import os
    import shutil
    import stat
    import tempfile
    from pathlib import Path

    from reference.golden import store

    if command == "identities":
        options = [(o, v) for o, v in options if o == "--json"]
    before = (vectors_in_use / "MANIFEST.json").read_bytes()
    err = io.StringIO()
    old_env = os.environ.get(store.ENV_VAR)
    with tempfile.TemporaryDirectory() as scratch, contextlib.chdir(scratch), \
            contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        victim = _scratch_with_traps(scratch)
        target = Path(scratch) / "a$^$b.py"
        shutil.copy(Path(__file__).resolve().parents[2] / "examples" / "rope" / "hf_rotate_half.py", target)
        source = target.read_bytes()
        traps = {"{link}": "link.json", "{fifo}": "fifo.json", "{manifest}": str(vectors_in_use / "MANIFEST.json"),
                 "{target}": str(target), "{scratch}": scratch, "{vectors}": str(vectors_in_use)}
        argv = [command] + (["--family", "nope"] if command == "identities" else
                            [f"{target}:apply", "--protocol", "rope.apply", "--cases", "rope.apply/llama2-d128/prefill-8",
                             "--no-fresh", "--dtype", "float32", "-q"])
        hostile = False
        for option, value in options:
            hostile |= value != HARMLESS[option]
            argv += [option, traps.get(value, value)]
        os.environ[store.ENV_VAR] = str(vectors_in_use)
        try:
            with _bounded(300):
                code = main(argv)
        except SystemExit as exc:
            code = exc.code
        finally:
            if old_env is None:
                os.environ.pop(store.ENV_VAR, None)
            else:
                os.environ[store.ENV_VAR] = old_env
        assert victim.read_text() == "keep me" and target.read_bytes() == source, argv
        assert os.path.islink("link.json") and stat.S_ISFIFO(os.lstat("fifo.json").st_mode), argv
    assert (vectors_in_use / "MANIFEST.json").read_bytes() == before, argv
    assert "Traceback" not in err.getvalue(), (argv, err.getvalue()[-2000:])
    if hostile:
        assert code == 2 and err.getvalue().count("\n") == 1, (argv, err.getvalue()[-500:])
    else:
        assert code in (0, 1), (argv, err.getvalue()[-500:])


# Every command that writes a file, with the option naming it (issue 24: identities and bench
# wrote through symlinks and blocked on FIFOs; conform wrote into the vectors it graded).
WRITERS = {
    "conform --json": ["conform", "x.py:f", "--protocol", "rope.apply", "--json"],
    "conform --junit": ["conform", "x.py:f", "--protocol", "rope.apply", "--junit"],
    "conform --markdown": ["conform", "x.py:f", "--protocol", "rope.apply", "--markdown"],
    "conform --plot": ["conform", "x.py:f", "--protocol", "rope.apply", "--plot"],
    "conform --write-expected-failures": ["conform", "x.py:f", "--protocol", "rope.apply",
                                          "--write-expected-failures"],
    "identities --json": ["identities", "--family", "nope", "--json"],
    "bench --json": ["bench", "--families", "only", "--repeat", "1", "--skip-slow", "--json"],
    "export --out": ["vectors", "export", "rope.apply/llama2-d128/decode-4095", "--out"],
}
PATHS = ["symlink", "fifo", "/dev/full", "/dev/null", "", "directory", "under-a-file", "vectors"]


@pytest.mark.parametrize("writer,kind", [(w, k) for w in sorted(WRITERS) for k in PATHS
                                         if k != "vectors" or w.startswith(("conform", "export"))])  # they read the vectors
def test_every_command_that_writes_refuses_a_hostile_report_path(writer, kind, tmp_path, monkeypatch, capsys,
                                                                 vectors_in_use):
    """One line, exit 2, before any work (the target x.py does not even exist: the path is
    refused first), and the path left as it was."""
    import os
    import stat

    from reference.golden import store

    monkeypatch.chdir(tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (tmp_path / "afile").write_text("a file")
    monkeypatch.setenv(store.ENV_VAR, str(vectors_in_use))
    manifest = vectors_in_use / "MANIFEST.json"
    path = {"symlink": "link.png", "fifo": "fifo.png", "directory": str(tmp_path),
            "under-a-file": "afile/r.png", "vectors": str(manifest)}.get(kind, kind)
    if kind == "symlink":
        os.symlink(victim, path)
    if kind == "fifo":
        os.mkfifo(path)
    if kind.startswith("/dev/") and not os.path.exists(kind):
        pytest.skip(f"this system has no {kind}")
    before = manifest.read_bytes()
    with _bounded(120):
        code = main(WRITERS[writer] + [path])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (writer, kind, err)
    option = writer.split()[1]
    assert err.startswith(f"posref: error: {option}"), err
    assert victim.read_text() == "keep me" and manifest.read_bytes() == before
    if kind == "symlink":
        assert os.path.islink(path)
    if kind == "fifo":
        assert stat.S_ISFIFO(os.lstat(path).st_mode)
