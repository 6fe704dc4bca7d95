"""``posref vectors export``: one case's inputs and expected outputs in a file of its own (issue 25),
read back equal to what posref grades against, in every format; fresh cases from their seed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from reference.golden import catalog, fresh, store

ROOT = Path(__file__).resolve().parents[2]
CASE = "rope.apply/llama2-d128/decode-4095"


def _export(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "conformance.cli", "vectors", "export", *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


def _json_arrays(doc):
    def number(x):
        return float(x.replace("Infinity", "inf")) if isinstance(x, str) else x
    return {role: np.array(np.vectorize(number, otypes=[a["dtype"]])(np.array(a["data"], dtype=object))
                           if a["data"] else [], dtype=a["dtype"]).reshape(a["shape"])
            for role, a in doc["arrays"].items()}


def _read(path: Path, fmt: str):
    """(record without arrays, {role: numpy array}) from an exported file."""
    if fmt == "npz":
        with np.load(path, allow_pickle=False) as z:
            return json.loads(str(z["record"])), {k: z[k] for k in z.files if k != "record"}
    if fmt == "pt":
        import torch

        doc = torch.load(path, weights_only=True)
        return {k: v for k, v in doc.items() if k != "arrays"}, {k: v.numpy() for k, v in doc["arrays"].items()}
    doc = json.loads(path.read_text())
    return {k: v for k, v in doc.items() if k != "arrays"}, _json_arrays(doc)


@pytest.mark.parametrize("fmt", ["npz", "pt", "json"])
def test_a_committed_case_reads_back_as_posref_grades_it(tmp_path, fmt):
    proc = _export(tmp_path, CASE, "--format", fmt)
    assert proc.returncode == 0, proc.stderr
    record, arrays = _read(tmp_path / f"{CASE.replace('/', '__')}.{fmt}", fmt)
    case = store.get_case(CASE)
    assert record["id"] == CASE and record["seed"] is None and record["params"] == json.loads(json.dumps(case.params))
    assert record["suite_version"] == store.SUITE_VERSION and record["vectors_digest"].startswith("sha256:")
    assert sorted(arrays) == sorted(case.arrays)
    for role in case.arrays:
        stored = np.asarray(case.arrays[role])
        assert arrays[role].dtype == stored.dtype and np.array_equal(arrays[role], stored)  # bit for bit


@pytest.mark.parametrize("case_id", ["learned.lookup/gpt2-124m/prefill-8",
                                     "transformer_xl.score/transfo-xl-wt103/decode-1-mem-1600"])
def test_inputs_named_by_their_seed_are_written_out(tmp_path, case_id):
    """A model's committed case stores empty inputs and names them by a seed (reference.golden.seeded):
    the export holds the derived arrays, the ones the case is graded on."""
    proc = _export(tmp_path, case_id)
    assert proc.returncode == 0, proc.stderr
    _, arrays = _read(tmp_path / f"{case_id.replace('/', '__')}.npz", "npz")
    case = store.get_case(case_id)
    named = catalog.protocol(case.protocol).named(case.params, case.arrays)
    assert named and all(np.asarray(case.arrays[role]).size == 0 for role in named)
    for role, derived in named.items():
        assert derived.size and np.array_equal(arrays[role], derived)


def test_a_fresh_case_is_drawn_again_from_its_seed(tmp_path):
    drawn = fresh.fresh_cases("rope.apply", 7)[0]
    out = tmp_path / "case.json"
    proc = _export(tmp_path, drawn.id, "--seed", "7", "--format", "json", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    record, arrays = _read(out, "json")
    assert record["id"] == drawn.id and record["seed"] == 7
    for role in drawn.arrays:
        assert np.array_equal(arrays[role], np.asarray(drawn.arrays[role]))
    other = _export(tmp_path, drawn.id, "--seed", "8", "--format", "json", "--out", str(tmp_path / "other.json"))
    if other.returncode == 0:  # another seed draws other inputs under the same id
        assert not all(np.array_equal(a, b) for a, b in zip(_read(tmp_path / "other.json", "json")[1].values(),
                                                             arrays.values()))


@pytest.mark.parametrize("args, words", [
    (["rope.apply/fresh/shape-dim-d80-r20-half"], "give --seed"),
    (["rope.apply/llama2-d128/decode-4096"], "unknown case id"),
    (["../evil/x"], "unknown case id"),
    ([CASE, "--format", "csv"], "invalid choice"),
])
def test_bad_requests_are_one_line_and_exit_2(tmp_path, args, words):
    proc = _export(tmp_path, *args)
    assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr


def test_a_symlink_or_a_path_inside_the_vectors_is_refused(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "link.npz").symlink_to(victim)
    proc = _export(tmp_path, CASE, "--out", "link.npz")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and victim.read_text() == "keep"
    inside = store.vectors_dir() / "rope.apply" / "exported.npz"
    proc = _export(tmp_path, CASE, "--out", str(inside))
    assert proc.returncode == 2 and not inside.exists()
