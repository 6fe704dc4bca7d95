"""`posref vectors verify`: passes on the committed set; every kind of tampering is caught with
exit code 3 and the file's name. Tampering happens on a copy in tmp_path."""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import shutil
import zipfile

import numpy as np
import pytest

from conformance.cli import main
from reference.golden import npzio, store, verify
from support import rehash_vectors

NPZ = "rope.apply/llama2-d128.npz"
META = "rope.apply/llama2-d128.json"


@pytest.fixture()
def vectors_copy(tmp_path):
    root = tmp_path / "vectors"
    shutil.copytree(store.vectors_dir(), root)
    return root


def _verify(capsys, root, *extra):
    code = main(["vectors", "verify", "--dir", str(root), *extra])
    out = capsys.readouterr()
    return code, out.out + out.err


def _assert_fails(capsys, root, *expected, args=()):
    """``posref vectors verify --dir root *args`` exits 3 and prints every ``expected`` problem."""
    code, out = _verify(capsys, root, *args)
    assert code == 3, out
    for problem in expected:
        assert problem in out, out


def _edit_manifest(root, fn):
    data = json.loads((root / "MANIFEST.json").read_text())
    fn(data)
    (root / "MANIFEST.json").write_text(json.dumps(data, indent=2))


def test_committed_vectors_verify(capsys):
    code, out = _verify(capsys, store.vectors_dir())
    assert code == 0, out
    assert "OK" in out and store.load_manifest()["digest"] in out


def test_default_directory_verifies(capsys):
    assert main(["vectors", "verify"]) == 0
    capsys.readouterr()


def test_copy_verifies_and_rederives_with_numpy(vectors_copy, capsys):
    code, out = _verify(capsys, vectors_copy, "--rederive", "--backend", "numpy", "--protocol", "rope.apply",
                        "--protocol", "t5.bucket")
    assert code == 0, out
    assert "re-derived with numpy (rope.apply, t5.bucket only)" in out


@pytest.mark.slow
def test_every_protocol_rederives_with_numpy(vectors_copy, capsys):
    code, out = _verify(capsys, vectors_copy, "--rederive", "--backend", "numpy")
    assert code == 0, out
    assert "re-derived with numpy" in out and "only" not in out


def test_protocol_limits_the_rederive_not_the_hash_check(vectors_copy, capsys):
    """--protocol: another protocol's changed value is not re-derived, but a changed file still fails."""
    blob = bytearray((vectors_copy / NPZ).read_bytes())
    blob[-20] ^= 0x01
    (vectors_copy / NPZ).write_bytes(bytes(blob))
    _assert_fails(capsys, vectors_copy, f"{NPZ}: changed", args=("--rederive", "--protocol", "t5.bucket"))


def test_changed_file(vectors_copy, capsys):
    blob = bytearray((vectors_copy / NPZ).read_bytes())
    blob[-20] ^= 0x01  # one bit in the last array's data
    (vectors_copy / NPZ).write_bytes(bytes(blob))
    _assert_fails(capsys, vectors_copy, f"{NPZ}: changed")


def test_truncated_file(vectors_copy, capsys):
    blob = (vectors_copy / NPZ).read_bytes()
    (vectors_copy / NPZ).write_bytes(blob[: len(blob) // 2])
    _assert_fails(capsys, vectors_copy, f"{NPZ}: truncated")


def test_missing_file(vectors_copy, capsys):
    (vectors_copy / META).unlink()
    _assert_fails(capsys, vectors_copy, f"{META}: missing")


def test_missing_manifest(vectors_copy, capsys):
    (vectors_copy / "MANIFEST.json").unlink()
    _assert_fails(capsys, vectors_copy, "MANIFEST.json: missing")


def test_unlisted_file(vectors_copy, capsys):
    (vectors_copy / "rope.apply" / "extra.npz").write_bytes(b"hello")
    _assert_fails(capsys, vectors_copy, "rope.apply/extra.npz: not listed in MANIFEST.json")


@pytest.mark.parametrize("bad_path", ["../outside.json", "/etc/hostname", "rope.apply/../../outside.json",
                                      "C:/outside.json", "rope.apply\\x.json"])
def test_manifest_path_escaping_the_directory(vectors_copy, capsys, bad_path):
    outside = vectors_copy.parent / "outside.json"
    outside.write_text("{}")
    digest = hashlib.sha256(outside.read_bytes()).hexdigest()
    _edit_manifest(vectors_copy, lambda d: d["files"].__setitem__(bad_path, {"sha256": digest, "bytes": 2}))
    _assert_fails(capsys, vectors_copy, f"{bad_path}: path escapes the vectors directory")


def test_symlink_escaping_the_directory(vectors_copy, capsys):
    outside = vectors_copy.parent / "outside.json"
    outside.write_text("{}")
    (vectors_copy / "rope.apply" / "link.json").symlink_to(outside)
    _edit_manifest(vectors_copy, lambda d: d["files"].__setitem__(
        "rope.apply/link.json", {"sha256": hashlib.sha256(b"{}").hexdigest(), "bytes": 2}))
    _assert_fails(capsys, vectors_copy, "rope.apply/link.json: a symbolic link")


def test_object_array_in_npz(vectors_copy, capsys):
    arrays = dict(np.load(vectors_copy / NPZ, allow_pickle=False))
    first = next(iter(arrays))
    buffer = io.BytesIO()
    np.savez(buffer, **{**arrays, first: np.array([{"evil": 1}], dtype=object)})
    (vectors_copy / NPZ).write_bytes(buffer.getvalue())
    rehash_vectors(vectors_copy)  # hashes agree: only the pickle check can catch it
    _assert_fails(capsys, vectors_copy, f"{NPZ}: object array or pickle refused")


def test_raw_pickle_member_in_npz(vectors_copy, capsys):
    with zipfile.ZipFile(vectors_copy / NPZ, "a") as zf:
        zf.writestr("payload.pkl", pickle.dumps({"evil": 1}))
    rehash_vectors(vectors_copy)
    _assert_fails(capsys, vectors_copy, f"{NPZ}: member 'payload.pkl' is not an .npy array")


def test_whole_file_pickle_instead_of_npz(vectors_copy, capsys):
    (vectors_copy / NPZ).write_bytes(pickle.dumps({"x": 1}))
    rehash_vectors(vectors_copy)
    _assert_fails(capsys, vectors_copy, f"{NPZ}: not a valid .npz")


def test_schema_violation_in_metadata(vectors_copy, capsys):
    meta = json.loads((vectors_copy / META).read_text())
    meta["testGroups"][0]["tests"][0]["flags"].append("not a flag")
    (vectors_copy / META).write_text(json.dumps(meta))
    rehash_vectors(vectors_copy)
    _assert_fails(capsys, vectors_copy, f"{META}: schema:")


def test_inconsistent_metadata(vectors_copy, capsys):
    meta = json.loads((vectors_copy / META).read_text())
    meta["numberOfTests"] += 1
    meta["testGroups"][0]["tests"][1]["id"] = meta["testGroups"][0]["tests"][0]["id"]
    (vectors_copy / META).write_text(json.dumps(meta))
    rehash_vectors(vectors_copy)
    _assert_fails(capsys, vectors_copy, f"{META}: numberOfTests", f"{META}: duplicate test ids")


def test_wrong_shape_array(vectors_copy, capsys):
    arrays = npzio.read_npz(vectors_copy / NPZ)
    arrays["decode-4095.expected"] = arrays["decode-4095.expected"][..., :64]
    npzio.write_npz(vectors_copy / NPZ, arrays)
    rehash_vectors(vectors_copy)
    _assert_fails(capsys, vectors_copy, "rope.apply/llama2-d128/decode-4095: expected has shape")


def test_digest_mismatch(vectors_copy, capsys):
    _edit_manifest(vectors_copy, lambda d: d.__setitem__("digest", "0" * 64))
    _assert_fails(capsys, vectors_copy, "MANIFEST.json: digest does not match")


def test_rederive_catches_a_value_off_by_a_little(vectors_copy, capsys):
    arrays = npzio.read_npz(vectors_copy / NPZ)
    bad = arrays["decode-4095.expected"].copy()
    bad[0, 0, 0, 5] += 1e-12
    arrays["decode-4095.expected"] = bad
    npzio.write_npz(vectors_copy / NPZ, arrays)
    rehash_vectors(vectors_copy)
    assert _verify(capsys, vectors_copy)[0] == 0  # hashes and schema are fine ...
    # ... but the values are not the reference's
    _assert_fails(capsys, vectors_copy, f"{NPZ}: rope.apply/llama2-d128/decode-4095: expected differs",
                  args=("--rederive", "--backend", "numpy", "--protocol", "rope.apply"))


def test_rederive_catches_changed_inputs(vectors_copy, capsys):
    arrays = npzio.read_npz(vectors_copy / NPZ)
    x = arrays["prefill-8.x"].copy()
    x[0, 1, 0, 0] = 0.5
    arrays["prefill-8.x"] = x
    npzio.write_npz(vectors_copy / NPZ, arrays)
    rehash_vectors(vectors_copy)
    _assert_fails(capsys, vectors_copy, "prefill-8: input x differs from the catalog's seeded input",
                  args=("--rederive", "--backend", "numpy", "--protocol", "rope.apply"))


def test_verify_dir_that_does_not_exist_is_a_usage_error(tmp_path, capsys):
    code, out = _verify(capsys, tmp_path / "nope")
    assert code == 2
    assert out.count("\n") == 1


def test_compare_scales():
    stored = np.array([1.0, 1e-6])
    assert verify.compare(stored, stored, "inv_freq") == 0.0
    assert verify.compare(stored, stored * (1 + 2.0**-52), "inv_freq") == pytest.approx(1.0)
    assert verify.compare(stored, stored + [0, 1e-15], "inv_freq") > 4
    assert verify.compare(np.zeros((2,)), np.ones((3,)), "expected") == float("inf")


def test_npz_bytes_are_deterministic_and_loadable(tmp_path):
    arrays = {"a.x": np.arange(6.0).reshape(2, 3), "a.p": np.array([[1, 2]], dtype=np.int64),
              "f": np.array(1.0)}
    blob = npzio.npz_bytes(arrays)
    assert blob == npzio.npz_bytes(dict(arrays))
    path = tmp_path / "a.npz"
    path.write_bytes(blob)
    loaded = npzio.read_npz(path)
    assert list(loaded) == list(arrays)
    for key in arrays:
        assert np.array_equal(loaded[key], arrays[key]) and loaded[key].dtype == arrays[key].dtype
    assert loaded["f"].shape == ()
    with zipfile.ZipFile(path) as zf:
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}
    with pytest.raises(npzio.NpzError):
        npzio.npz_bytes({"o": np.array([None], dtype=object)})


def test_metadata_whose_npz_is_unlisted_and_absent(vectors_copy, capsys):
    (vectors_copy / NPZ).unlink()
    _edit_manifest(vectors_copy, lambda d: d["files"].pop(NPZ))
    rehash_vectors(vectors_copy)
    _assert_fails(capsys, vectors_copy, f"{META}: its arrays file is not listed in MANIFEST.json")


# ---- issue 9: hostile files give exit 3 and one line per problem, never a traceback --------------


def _bomb_npz(path, inflated=64 * 2**20):
    """A small .npz whose one member inflates to ``inflated`` bytes (a deflate bomb)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        with zf.open("expected.npy", "w", force_zip64=True) as member:
            header = io.BytesIO()
            np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False,
                                                          "shape": (inflated // 8,)})
            member.write(header.getvalue())
            chunk = bytes(2**20)
            for _ in range(inflated // len(chunk)):
                member.write(chunk)


def test_a_file_whose_hash_fails_is_never_opened(vectors_copy, capsys, monkeypatch):
    _bomb_npz(vectors_copy / NPZ)
    opened = []
    real = npzio.read_npz
    monkeypatch.setattr(verify, "read_npz", lambda p, **kw: opened.append(p) or real(p, **kw))
    _assert_fails(capsys, vectors_copy, f"{NPZ}: truncated")  # smaller than listed: hash fails
    assert opened and not [p for p in opened if str(p).endswith(NPZ)]


def test_a_deflate_bomb_with_a_matching_hash_stops_at_the_size_limit(vectors_copy, capsys, monkeypatch):
    monkeypatch.setattr(npzio, "MAX_MEMBER_BYTES", 8 * 2**20)
    _bomb_npz(vectors_copy / NPZ)
    rehash_vectors(vectors_copy)  # a careful attacker: the hashes match
    _assert_fails(capsys, vectors_copy, f"{NPZ}: member 'expected.npy' claims")


def test_deeply_nested_json_is_a_problem_not_a_traceback(vectors_copy, capsys):
    (vectors_copy / "rope.apply" / "llama2-d128.json").write_text("[" * 100000 + "]" * 100000)
    rehash_vectors(vectors_copy)
    _assert_fails(capsys, vectors_copy, "rope.apply/llama2-d128.json: not valid JSON (nested too deeply)")
    (vectors_copy / "MANIFEST.json").write_text("[" * 100000 + "]" * 100000)
    _assert_fails(capsys, vectors_copy, "MANIFEST.json: not valid JSON (nested too deeply)")


def test_a_listed_file_that_is_a_symlink_to_itself(vectors_copy, capsys):
    loop = vectors_copy / "rope.apply" / "loop.json"
    loop.symlink_to(loop)
    _edit_manifest(vectors_copy, lambda d: d["files"].__setitem__(
        "rope.apply/loop.json", {"sha256": "0" * 64, "bytes": 2}))
    _assert_fails(capsys, vectors_copy, "rope.apply/loop.json: a symbolic link")


# ---- issue 24: hostile files, second pass: bounded depth, memory and time -----------------------


def test_a_copy_with_1100_nested_folders_is_a_problem_not_a_traceback(vectors_copy, capsys):
    """rglob recursed past Python's limit (RecursionError traceback); the walk is iterative and
    a folder inside a protocol folder is reported once, not entered."""
    import os

    deep = vectors_copy / "rope.apply"
    folders = []
    for _ in range(1100):  # one by one: os.makedirs itself recurses
        deep = deep / "d"
        os.mkdir(deep)
        folders.append(deep)
    (deep / "x.json").write_text("{}")
    try:
        code, out = _verify(capsys, vectors_copy)
    finally:  # and so would the clean-up of tmp_path
        (deep / "x.json").unlink()
        for folder in reversed(folders):
            os.rmdir(folder)
    assert code == 3 and "Traceback" not in out, out[-2000:]
    assert "rope.apply/d: a folder inside a protocol folder" in out
    assert out.count("FAIL ") == 1


def _sparse(path, size):
    path.unlink()
    with open(path, "wb") as f:
        f.truncate(size)


def test_a_listed_file_replaced_by_a_huge_sparse_file_is_never_read(vectors_copy, capsys, monkeypatch):
    """A listed npz replaced by a 4 GiB sparse file: MemoryError (the whole file was read to hash
    it). Its size is checked against the manifest first; re-hashed, against the limit. Small here:
    256 MiB sparse, peak memory measured."""
    import tracemalloc

    _sparse(vectors_copy / NPZ, 256 * 2**20)
    tracemalloc.start()
    try:
        code, out = _verify(capsys, vectors_copy)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert code == 3 and f"{NPZ}: changed: {256 * 2**20} bytes, listed" in out, out[-2000:]
    assert peak < 64 * 2**20, f"peak {peak / 2**20:.0f} MiB"
    rehash_vectors(vectors_copy)  # a careful attacker: the manifest lists the 256 MiB
    monkeypatch.setattr(verify, "MAX_FILE_BYTES", 64 * 2**20)
    _assert_fails(capsys, vectors_copy, f"{NPZ}: listed as {256 * 2**20} bytes, over the 64 MiB")


def _npz_with_extra_members(path, extra, size):
    """The npz with ``extra`` more deflated members of ``size`` zero bytes each (tiny on disk)."""
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as zf:
        for k in range(extra):
            with zf.open(f"extra{k}.npy", "w", force_zip64=True) as member:
                header = io.BytesIO()
                np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False,
                                                              "shape": (size // 8,)})
                member.write(header.getvalue())
                for _ in range(size // 2**20):
                    member.write(bytes(2**20))


def _spy_on_inflation(monkeypatch):
    opened = []
    real = zipfile.ZipFile.open

    def spy(self, name, mode="r", *args, **kwargs):
        if mode == "r":
            opened.append((str(self.filename), getattr(name, "filename", name)))
        return real(self, name, mode, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", spy)
    return opened


def test_unlisted_deflated_members_of_a_rehashed_npz_are_found_without_inflating(vectors_copy, capsys,
                                                                                 monkeypatch):
    """Six extra 256 MiB deflated members, re-hashed: "OK" after 2.15 GB and 22 s. Here six of
    8 MiB; none is inflated, and the file fails."""
    _npz_with_extra_members(vectors_copy / NPZ, 6, 8 * 2**20)
    rehash_vectors(vectors_copy)
    opened = _spy_on_inflation(monkeypatch)
    _assert_fails(capsys, vectors_copy, f"{NPZ}: member 'extra0.npy' is not an array the metadata lists")
    assert not [n for f, n in opened if f.endswith(NPZ)], opened  # nothing of it inflated


def test_a_listed_member_claiming_more_than_the_file_is_found_without_inflating(vectors_copy, capsys,
                                                                               monkeypatch):
    """A listed array replaced by a deflated one that inflates to more bytes than the manifest
    lists for the whole .npz (posref stores arrays uncompressed)."""
    meta = json.loads((vectors_copy / META).read_text())
    first = meta["testGroups"][0]["tests"][0]["arrays"]["x"] + ".npy"
    arrays = npzio.read_npz(vectors_copy / NPZ)
    with zipfile.ZipFile(vectors_copy / NPZ, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, array in arrays.items():
            if name + ".npy" == first:
                continue
            buf = io.BytesIO()
            np.lib.format.write_array(buf, array, allow_pickle=False)
            zf.writestr(name + ".npy", buf.getvalue())
    _npz_with_extra_members(vectors_copy / NPZ, 0, 0)
    with zipfile.ZipFile(vectors_copy / NPZ, "a", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(first, b"\x93NUMPY" + bytes(8 * 2**20))
    rehash_vectors(vectors_copy)
    opened = _spy_on_inflation(monkeypatch)
    _assert_fails(capsys, vectors_copy, f"{NPZ}: members claim")
    assert not [n for f, n in opened if f.endswith(NPZ)], opened
