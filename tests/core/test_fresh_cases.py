"""Fresh cases (issue 9): cases drawn at run time from a printed seed, in no file, so that an
adapter that looks the answers up in the shipped vectors fails, and --seed repeats a run. Their
ids say what was drawn, never the seed (issue 25), and each has a kind that every seed's draw of
its place matches."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import subprocess
import sys

import jsonschema
import numpy as np
import pytest
import torch

from conformance import run_conformance
from conformance.runner import OptionError
from reference.golden import catalog, certify, store
from reference.golden.fresh import KIND_SEEDS, SHAPES, Draw, fresh_cases, kind_of, kinds, names
from tests.support import ROOT

PROTOCOLS = sorted(p for p, vp in catalog.protocols().items() if vp.fresh is not None)


def test_every_protocol_with_vectors_draws_fresh_cases():
    assert PROTOCOLS == sorted(catalog.protocols())


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_same_seed_same_cases_other_seed_other_cases(protocol):
    # The inputs and parameters: the expected values are the reference's of those (computed on
    # demand; their rounding is checked below), so comparing them again would only re-run it.
    inputs = catalog.protocol(protocol).inputs
    a, b, c = fresh_cases(protocol, 7), fresh_cases(protocol, 7), fresh_cases(protocol, 8)
    assert a and [x.id for x in a] == [x.id for x in b]
    for x, y in zip(a, b):
        assert x.params == y.params and x.arrays.keys() == y.arrays.keys()
        assert all(np.array_equal(x.arrays[k], y.arrays[k]) for k in inputs if k in x.arrays)
    assert all(x.id.startswith(f"{protocol}/fresh/") and "Fresh" in x.flags for x in a)

    def content(cases):
        return [(x.params, {k: x.arrays[k].tobytes() for k in inputs if k in x.arrays}) for x in cases]

    assert content(a) != content(c)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_fresh_inputs_are_in_no_file(protocol):
    stored = {role: {store_case.arrays[role].tobytes() for store_case in store.iter_cases(protocol)}
              for role in catalog.protocol(protocol).inputs}
    for case in fresh_cases(protocol, 11):
        for role, seen in stored.items():
            # An empty input (no cached keys yet) carries nothing an adapter could look up.
            if case.arrays[role].size:
                assert case.arrays[role].tobytes() not in seen, (case.id, role)


@pytest.mark.parametrize("protocol", PROTOCOLS)
# A second seed, far from the first, in the slow selection (rope.apply alone takes 24 s a seed).
@pytest.mark.parametrize("seed", [0, pytest.param(2**40 + 3, marks=pytest.mark.slow)])
def test_fresh_expected_values_are_correctly_rounded(protocol, seed):
    """Computed on the spot in golden mode, they meet the same mpmath certification as the
    committed vectors."""
    proto = catalog.protocol(protocol)
    total = certify.Certificate(proto.rounding)
    for case in fresh_cases(protocol, seed):
        inputs = {r: case.arrays[r] for r in proto.inputs}
        outputs = {r: case.arrays[r] for r in proto.outputs}
        total.add(certify.certify_case(proto, case.params, inputs, outputs, where=case.id))
    assert total.ok and total.certified > 0, total.examples[:3]


def test_ids_say_what_was_drawn_and_the_inputs_still_change_with_the_seed():
    """Issue 25: an id names the draw, not the seed, so two seeds that draw the same thing give
    one id (a baseline can list it); its inputs still differ (nothing to look up)."""
    shared = 0
    for protocol in PROTOCOLS:
        a, b = ({c.id: c for c in fresh_cases(protocol, seed)} for seed in (5, 6))
        assert all(i.split("/")[1] == "fresh" for i in [*a, *b])
        for case_id in a.keys() & b.keys():
            shared += 1
            inputs = catalog.protocol(protocol).inputs
            assert any(a[case_id].arrays[r].tobytes() != b[case_id].arrays[r].tobytes() for r in inputs), case_id
    assert shared >= len(PROTOCOLS)  # every protocol has some place whose name is the same in both


def _digest(cases) -> str:
    h = hashlib.sha256()
    for c in cases:
        h.update(c.id.split("/", 2)[2].encode())
        for role in sorted(c.arrays):
            h.update(role.encode() + c.arrays[role].tobytes())
    return h.hexdigest()[:16]


def test_a_seed_draws_the_values_it_drew_before_the_ids_lost_the_seed():
    # Pinned with suite 0.5.0's reference/golden/fresh.py (ids <protocol>/fresh-<seed>/<test>):
    # the inputs are still derived from that name, so --seed N repeats a run of 0.5.0 too.
    assert _digest(fresh_cases("rope.apply", 7)) == "92fbe8cddb99ff13"
    assert _digest(fresh_cases("alibi.bias", 7)) == "5124e547b6858a29"


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("shapes", SHAPES)
def test_each_kind_matches_every_draw_of_its_place(protocol, shapes):
    """The kinds are learnt from seeds 0..63; seeds never seen (64..263) must fall inside them, or a
    baseline that lists a kind would miss the next run's draw."""
    places = kinds(protocol, shapes)
    assert places, "the number of fresh cases changes with the seed"
    for seed in range(KIND_SEEDS, KIND_SEEDS + 200):
        drawn = names(protocol, seed, shapes)
        assert len(drawn) == len(places)
        for name, glob in zip(drawn, places):
            assert fnmatch.fnmatchcase(name, glob), (seed, name, glob)
            kind = kind_of(f"{protocol}/fresh/{name}", seed)
            # (a name the sample also draws gets the sample's kind, which is wider)
            assert kind == f"{protocol}/fresh/{glob}" or shapes == "full" and fnmatch.fnmatchcase(name, kind.split("/", 2)[2])


def test_kinds_read_as_what_each_place_draws():
    # seed 1 draws these (tests/core/test_baseline.py grades them)
    assert kind_of("rope.apply/fresh/shape-dim-d80-r20-interleaved", 1) == "rope.apply/fresh/shape-dim-*"
    assert kind_of("rope.apply/fresh/qwen3.6-yarn4-0", 1) == "rope.apply/fresh/*-0"
    assert kind_of("rope.apply/fresh/shape-seq-65-half", 1) == "rope.apply/fresh/shape-seq-65-half"
    assert kind_of("learned.lookup/fresh/shape-width-1024-bert-base", 1) == "learned.lookup/fresh/shape-width-*-bert-base"
    # not drawn by that seed: the id itself
    assert kind_of("rope.apply/fresh/shape-dim-d64-r16-half", 1) == "rope.apply/fresh/shape-dim-d64-r16-half"


def test_a_fresh_id_and_the_printed_seed_repeat_one_case():
    from tests.support import reference_adapter

    first = run_conformance(reference_adapter, "rope.apply", dtypes=("float32",), identities=False,
                            cases="rope.apply/fresh/shape-*", seed=3)
    case = first.cases[0]
    assert case.id.startswith("rope.apply/fresh/shape-") and "--seed 3" in case.repro
    assert f"--cases {case.id} " in case.repro
    again = run_conformance(reference_adapter, "rope.apply", dtypes=("float32",), identities=False,
                            cases=case.id, seed=3)
    assert _verdicts(again) == [(case.id, case.dtype, case.verdict, case.max_abs_error)]


def test_fresh_rope_cases_include_scaled_configurations():
    drawn = [c for seed in range(12) for c in fresh_cases("rope.apply", seed)]
    kinds = {(c.params["scaling"] or {}).get("rope_type", "default") for c in drawn}
    assert "default" in kinds and len(kinds) >= 3


def test_draw_is_platform_independent():
    # PCG64 raw words only: these values are fixed by the algorithm, not by numpy's samplers.
    draw = Draw(1, "rope.apply")
    assert draw.integers(0, 9, 6) == Draw(1, "rope.apply").integers(0, 9, 6)
    assert Draw(1, "rope.apply").integers(0, 2**20, 3) != Draw(1, "rope.cache").integers(0, 2**20, 3)
    # pinned: sha256 and PCG64's raw words fix these on every platform and numpy version
    assert Draw(1, "rope.apply").integers(0, 2**20, 3) == [802944, 822436, 289993]
    with pytest.raises(ValueError):
        draw.integer(3, 2)


def test_an_adapter_that_looks_answers_up_passes_the_files_but_not_the_fresh_cases():
    def key_of(positions, rotary_dim, base, scaling, seq_len):
        return positions.tobytes(), rotary_dim, base, repr(scaling), seq_len if scaling else None

    answers = {key_of(c.arrays["positions"], c.params["rotary_dim"], c.params["base"], c.params["scaling"],
                      c.params["seq_len"]): c for c in store.iter_cases("rope.cache")}

    def lookup(positions, spec):
        key = key_of(positions.numpy().astype(np.int64), spec.rotary_dim, spec.base, spec.scaling, spec.seq_len)
        case = answers.get(key)
        if case is None:  # not in the vectors: a guess
            shape = tuple(positions.shape) + (spec.rotary_dim // 2,)
            return torch.ones(shape, dtype=torch.float64), torch.zeros(shape, dtype=torch.float64)
        return torch.from_numpy(case.arrays["cos"].copy()), torch.from_numpy(case.arrays["sin"].copy())

    stored_only = run_conformance(lookup, "rope.cache", dtypes=("float32",), identities=False, fresh=False)
    assert stored_only.summary()["overall"] == "pass"
    report = run_conformance(lookup, "rope.cache", dtypes=("float32",), identities=False, seed=5)
    assert report.summary()["overall"] == "fail"
    failing = {c.id for c in report.cases if c.verdict == "fail"}
    assert failing and all(i.startswith("rope.cache/fresh/") for i in failing)


def _verdicts(report):
    return [(c.id, c.dtype, c.verdict, c.max_abs_error) for c in report.cases]


def test_seed_repeats_a_run_and_the_report_says_which_seed():
    from tests.support import reference_adapter

    kwargs = dict(dtypes=("float32",), identities=False, cases="rope.apply/fresh/*")
    first = run_conformance(reference_adapter, "rope.apply", **kwargs)
    from reference.golden.shapes import TAIL_LENGTHS
    from reference.rope.vectors import SAMPLE_KINDS

    # two drawn configurations, one case of each kind of the shape matrix's sample, and the
    # just-past-tile lengths in both layouts (graded by every run)
    assert first.seed is not None and len(first.cases) == 2 + len(SAMPLE_KINDS) + 2 * len(TAIL_LENGTHS)
    again = run_conformance(reference_adapter, "rope.apply", seed=first.seed, **kwargs)
    assert _verdicts(again) == _verdicts(first)
    assert any(f"--seed {first.seed}" in n for n in first.notes)
    assert all(f"--seed {first.seed}" in c.repro for c in first.cases)
    doc = first.to_json()
    schema = json.loads((ROOT / "conformance" / "schemas" / "report.schema.json").read_text())
    jsonschema.validate(doc, schema)
    assert doc["seed"] == first.seed


def test_a_cited_fresh_id_names_its_seed():
    from tests.support import reference_adapter

    # The ids of suite 0.5.0 named the seed; such a cited id still repeats its case.
    report = run_conformance(reference_adapter, "rope.apply", dtypes=("float32",), identities=False,
                             cases="rope.apply/fresh-424242/*")
    assert report.seed == 424242 and {c.id.split("/")[1] for c in report.cases} == {"fresh"}


def test_no_fresh_grades_the_files_only():
    from tests.support import reference_adapter

    report = run_conformance(reference_adapter, "rope.apply", dtypes=("float32",), identities=False,
                             fresh=False, cases="rope.apply/llama2-d128/*")
    assert report.seed is None and not any("/fresh" in c.id for c in report.cases)


@pytest.mark.parametrize("seed", [-1, 2**63, 1.5, "3", True])
def test_bad_seed_is_an_option_error(seed):
    from tests.support import reference_adapter

    with pytest.raises(OptionError, match="seed"):
        run_conformance(reference_adapter, "rope.apply", seed=seed)


def test_bad_seed_on_the_command_line_is_exit_2_with_one_line():
    # Through the supervised `posref` entry point: an argparse error is a usage error (exit 2),
    # not "the adapter ended the process".
    env = dict(os.environ, COLUMNS="100")
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from conformance.supervise import entry; sys.exit(entry())",
         "conform", "examples/rope/hf_rotate_half.py:apply", "--protocol", "rope.apply", "--seed", "x"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["posref: error: argument --seed: an integer from 0 to "
                                                "9223372036854775807, got 'x'"]


CORRECT = [
    ("examples/rope/hf_rotate_half.py:apply", "rope.apply"),
    ("examples/rope/hf_rotate_half.py:cache", "rope.cache"),
    ("examples/rope/hf_rotate_half.py:frequencies", "rope.frequencies"),
    ("examples/sinusoidal/vaswani_torch.py:table", "sinusoidal.table"),
    ("examples/learned/roberta_position_ids.py:lookup", "learned.lookup"),
]


@pytest.mark.parametrize("target, protocol", CORRECT)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_correct_examples_pass_fresh_cases(target, protocol, seed):
    """The budgets hold at positions and shapes nobody chose in advance; whatever a correct
    implementation cannot do (another layout or variant) is skipped, never failed."""
    report = run_conformance(str(ROOT / target), protocol, identities=False, seed=seed,
                             cases=f"{protocol}/fresh/*", timeout=60.0)
    assert report.summary()["overall"] in ("pass", "skip"), [(c.id, c.dtype, c.verdict, c.diagnoses)
                                                              for c in report.cases]


@pytest.mark.parametrize("target, protocol", [
    ("examples/rope/buggy/position_offset.py:apply", "rope.apply"),
    ("examples/sinusoidal/buggy/wrong_base.py:table", "sinusoidal.table"),
    ("examples/learned/buggy/length_wall_missing.py:lookup", "learned.lookup"),
])
def test_buggy_examples_fail_fresh_cases(target, protocol):
    report = run_conformance(str(ROOT / target), protocol, identities=False, seed=4,
                             cases=f"{protocol}/fresh/*", timeout=60.0)
    assert report.summary()["fail"] >= 1


def test_command_line_seed_and_no_fresh(tmp_path):
    from conformance.cli import main

    target = str(ROOT / "examples/rope/hf_rotate_half.py:cache")
    out = tmp_path / "r.json"
    assert main(["conform", target, "--protocol", "rope.cache", "--seed", "77", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["seed"] == 77 and any(c["id"].startswith("rope.cache/fresh/") for c in doc["cases"])
    assert main(["conform", target, "--protocol", "rope.cache", "--no-fresh", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["seed"] is None and not any("/fresh" in c["id"] for c in doc["cases"])
