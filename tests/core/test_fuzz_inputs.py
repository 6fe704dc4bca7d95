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
         "--layout", "diagonal", "--profile", "lax", "x.py:f", "::", "", "\x00", "\udcff"]


@settings(max_examples=60, deadline=None)
@given(argv=st.lists(st.sampled_from(WORDS), max_size=6))
def test_fuzzed_command_lines(argv):
    """Any command line built from these words ends with an exit code of 0-3, not a traceback
    (argparse's own usage errors exit 2 through SystemExit)."""
    import contextlib
    import io
    import tempfile

    if argv[:1] == ["vectors"] and "regenerate" in argv:
        return  # writes files: covered by tests/core/test_vectors_regenerate.py
    err = io.StringIO()
    # a report path among the words ("identities --json nan") lands in a scratch folder, not the checkout
    with tempfile.TemporaryDirectory() as scratch, contextlib.chdir(scratch), \
            contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    assert code in (0, 1, 2, 3), (argv, err.getvalue()[-500:])
    assert "Traceback" not in err.getvalue(), (argv, err.getvalue()[-2000:])
