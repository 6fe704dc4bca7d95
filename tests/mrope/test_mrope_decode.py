"""mrope.decode (issue 28): M-RoPE positions of a session over two generations.

The reference (reference/mrope/decode.py: t = h = w = c + delta_r, delta_r = max + 1 - s of the
current prompt) against its brute-force definition (a generated token is a text token appended to
the prompt, laid out by get_rope_index); the scripts change every row's delta between
generations; the correct session passes; each buggy example gets its code with the generation
named; a call that raises or answers the wrong shape is named by generation and step; and what
transformers 5.24 does over two generations (examples/mrope/lib_transformers_decode.py).
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import numpy as np
import pytest
import torch

from conformance import run_conformance
from reference.golden import store
from reference.golden.fresh import Draw, fresh_cases
from reference.mrope import decode_vectors
from reference.mrope.decode import deltas, generation
from reference.mrope.positions import rope_index
from support import load_file

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "mrope"
SESSION = EXAMPLES / "decode_session.py"
LIB = EXAMPLES / "lib_transformers_decode.py"
COMMITTED = "mrope.decode/two-generations/*"
# The committed cases, read once: run_conformance given them skips the vectors' integrity check
# (2 s a run; tests/test_family_contract.py runs the buggy examples through it).
CASES = list(store.iter_cases("mrope.decode"))


def _run(target, **options):
    return run_conformance(target, "mrope.decode", golden_cases=CASES, identities=False, **options)


def _brute_force(types, grids, steps) -> np.ndarray:
    """The prompt extended by text tokens up to the last cache position, laid out whole; the
    prompt's columns and the cache positions' columns."""
    b, s = types.shape
    extended = np.concatenate([types, np.zeros((b, int(steps.max()) + 1 - s), dtype=types.dtype)], axis=1)
    full = rope_index(extended, grids)
    return full[:, :, list(range(s)) + [int(c) for c in steps]]


def _scripts():
    """The committed scripts and those 200 seeds draw."""
    tests = list(decode_vectors.tests())
    for seed in range(200):
        (group,) = decode_vectors.fresh(Draw(seed, decode_vectors.PROTOCOL))
        tests += list(group.tests)
    return [decode_vectors.script(decode_vectors.build("x", {}, t)[1]) for t in tests]


def test_reference_matches_the_brute_force_definition():
    scripts = _scripts()
    for gens in scripts:
        for types, grids, steps in gens:
            assert np.array_equal(generation(types, grids, steps), _brute_force(types, grids, steps))
    # and non-contiguous cache positions (a token decoded further on)
    types, grids, _ = scripts[0][0]
    far = np.array([types.shape[1] + 5, types.shape[1] + 40])
    assert np.array_equal(generation(types, grids, far), _brute_force(types, grids, far))


def test_deltas_of_text_and_images():
    """delta 0 for text, h w - max(h, w) fewer positions than tokens for a still image."""
    text = np.zeros((1, 7), dtype=np.int64)
    assert deltas(rope_index(text, np.zeros((0, 3)))).tolist() == [0]
    row = np.array([decode_vectors.image_row(2, (1, 3, 5), 1)])
    assert deltas(rope_index(row, [(1, 3, 5)])).tolist() == [-(15 - 5)]
    with pytest.raises(ValueError, match="after the prompt"):
        generation(text, np.zeros((0, 3)), [6])


def test_every_script_changes_every_rows_delta():
    """Otherwise a stale or row-0 delta could pass: in every committed and drawn batched script,
    each row's delta differs between the generations, and the rows' deltas differ in some generation."""
    for gens in _scripts():
        d1, d2 = (deltas(rope_index(types, grids)) for types, grids, _ in gens)
        assert np.all(d1 != d2), (d1, d2)
        if d1.size > 1:
            assert np.any(d1 != d1[0]) or np.any(d2 != d2[0]), (d1, d2)
        for types, _, steps in gens:
            assert types.shape[1] <= 40 and 2 <= steps.size <= 3
            assert steps.tolist() == list(range(types.shape[1], types.shape[1] + steps.size))


def test_each_wrong_delta_rule_is_named_alone_on_every_script():
    """The diagnosis on each candidate's exact output, over the committed and 200 drawn scripts:
    that code alone (one row: row 0's delta is the truth, so no code), and nothing for the truth."""
    from types import SimpleNamespace

    from conformance.mrope.decode import CANDIDATES, _generations, diagnose_decode
    from reference.mrope.decode import decode_positions

    tests = list(decode_vectors.tests()) + [decode_vectors.fresh(Draw(seed, decode_vectors.PROTOCOL))[0].tests[0]
                                            for seed in range(200)]
    for test in tests:
        gens = _generations(SimpleNamespace(arrays=decode_vectors.build("x", {}, test)[1]))
        for g in gens:
            g.decode_out = decode_positions(g.deltas, g.cache_positions)
        assert diagnose_decode(gens) == []
        for code, rule, _ in CANDIDATES:
            for g in gens:
                g.decode_out = decode_positions(rule(gens, g), g.cache_positions)
            found = [d.code for d in diagnose_decode(gens)]
            alone = code == "mrope-deltas-row0" and gens[0].deltas.size == 1
            assert found == ([] if alone else [code]), (test.name, code, found)


def test_drawn_inputs_never_equal_committed_ones():
    """tests/core/test_fresh_cases.py checks one seed; by construction (three images, prompts
    past 20 tokens) no seed can draw a committed prompt, grid list or cache positions."""
    stored = {role: {c.arrays[role].tobytes() for c in CASES} for role in decode_vectors.INPUTS}
    for seed in range(200):
        (group,) = decode_vectors.fresh(Draw(seed, decode_vectors.PROTOCOL))
        _, inputs = decode_vectors.build("x", {}, group.tests[0])
        for role, seen in stored.items():
            assert inputs[role].tobytes() not in seen, (seed, role)


def test_the_correct_session_passes():
    for seed in (0, 1):
        report = run_conformance(f"{SESSION}:decode", "mrope.decode", identities=False,
                                 golden_cases=CASES + fresh_cases("mrope.decode", seed), fresh=False)
        assert report.cases and all(c.verdict == "pass" for c in report.cases), \
            [(c.id, c.verdict, [d.message for d in c.diagnoses]) for c in report.cases]
        assert len(report.cases) == 4  # three committed scripts and one drawn


@pytest.mark.parametrize("stem, generation_named", [("decode_stale_deltas", "generation 2"),
                                                    ("decode_deltas_ignored", "generation 1"),
                                                    ("decode_deltas_row0", "generation 1")])
def test_each_buggy_session_gets_its_code_naming_the_generation(stem, generation_named):
    module = load_file(EXAMPLES / "buggy" / f"{stem}.py")
    report = _run(f"{EXAMPLES / 'buggy' / stem}.py:decode", cases=COMMITTED, fresh=False)
    failing = [c for c in report.cases if c.verdict == "fail"]
    assert failing
    for case in failing:
        codes = [d.code for d in case.diagnoses]
        assert codes == [module.CODE], (case.id, codes)
        message = case.diagnoses[0].message
        assert message.startswith(generation_named) and "decode step 0 (cache_position" in message, message
    if module.CODE == "mrope-stale-deltas":  # the first generation decodes right
        assert {c.id.rsplit("/", 1)[1] for c in failing} == {"image-then-image", "image-then-text", "one-row"}
    if module.CODE == "mrope-deltas-row0":  # one row: nothing to confuse
        assert [c.verdict for c in report.cases if c.id.endswith("one-row")] == ["pass"]


class _Raising:
    """Raises at generation 2's decode step 1."""

    def __init__(self, spec):
        self.inner, self.generation, self.steps = load_file(SESSION).decode(spec), 0, 0

    def prefill(self, token_types, grids):
        self.generation, self.steps = self.generation + 1, 0
        return self.inner.prefill(token_types, grids)

    def decode(self, cache_position):
        self.steps += 1
        if self.generation == 2 and self.steps == 2:
            raise RuntimeError("cache full")
        return self.inner.decode(cache_position)


def _one(fn, case="mrope.decode/two-generations/image-then-image", **options):
    report = _run(fn, cases=case, fresh=False, **options)
    (result,) = report.cases
    return result


def test_a_call_that_raises_is_named_by_generation_and_step():
    result = _one(_Raising)
    assert result.verdict in ("fail", "error")
    (d,) = [d for d in result.diagnoses if d.code == "raised"]
    assert d.message.startswith("generation 2, decode step 1 (cache_position 18): RuntimeError: cache full")


def test_wrong_shapes_and_non_sessions_are_named():
    class Flat(load_file(SESSION).Session):
        def decode(self, cache_position):
            return super().decode(cache_position)[0]  # [b, 1]: the t stream only

    result = _one(Flat)
    assert [d.code for d in result.diagnoses] == ["shape-changed"]
    assert result.diagnoses[0].message.startswith("generation 1, decode step 0 (cache_position 11)")
    result = _one(lambda spec: (lambda *a: None))
    assert [d.code for d in result.diagnoses] == ["shape-changed"]
    assert "not a session with prefill and decode" in result.diagnoses[0].message


def test_a_wrong_prefill_gets_the_positions_diagnosis_of_its_generation():
    class Swapped(load_file(SESSION).Session):
        def prefill(self, token_types, grids):
            out = super().prefill(token_types, grids[:, [0, 2, 1]])  # h and w exchanged
            return out[[0, 2, 1]]

    result = _one(Swapped)
    assert result.verdict == "fail"
    assert [d.code for d in result.diagnoses] == ["image-axes-swapped"]
    assert result.diagnoses[0].message.startswith("generation 1, prefill: ")


def test_isolate_leaves_the_cases_out_with_the_reason():
    """--isolate is the user's option: a session cannot cross the process boundary."""
    from types import SimpleNamespace

    from conformance.mrope.decode import PROTOCOL

    spec = PROTOCOL.spec(CASES[0])
    assert "cannot come back from an isolated process" in PROTOCOL.excluded(spec, SimpleNamespace(isolate=True))
    assert PROTOCOL.excluded(spec, SimpleNamespace(isolate=False, layout="auto")) is None


def _transformers_major() -> int:
    try:
        return int(importlib.metadata.version("transformers").split(".")[0])
    except importlib.metadata.PackageNotFoundError:
        return 0


needs_transformers = pytest.mark.skipif(_transformers_major() < 5, reason="transformers >= 5 is not installed "
                                        "(pip install -e '.[test]')")


@pytest.mark.slow  # 12 s: transformers' import and three tiny models
@needs_transformers
def test_transformers_forward_loop_reuses_the_image_prompts_deltas_for_a_text_prompt():
    """Finding, transformers 5.24: a loop calling Qwen2VLModel.forward recomputes rope_deltas for
    a new image prompt (passes image-then-image, one-row) but keeps the image prompt's for a
    text-only prompt (no image_grid_thw): the decode steps land at c - 12 and c - 4."""
    report = _run(f"{LIB}:decode", cases=COMMITTED, fresh=False)
    verdicts = {c.id.rsplit("/", 1)[1]: c for c in report.cases}
    assert {k: c.verdict for k, c in verdicts.items()} == {"image-then-image": "pass", "image-then-text": "fail",
                                                          "one-row": "pass"}
    (d,) = verdicts["image-then-text"].diagnoses
    assert d.code == "mrope-stale-deltas"
    assert d.message.startswith("generation 2 decodes with generation 1's deltas [-12, -4] instead of its own [0, 0]")


@pytest.mark.slow  # transformers' import and a tiny model's generate
@needs_transformers
def test_transformers_generate_resets_the_deltas_for_a_text_prompt():
    """The other half of the finding: ``generate`` (``_prepare_position_ids_for_generation``) sets
    rope_deltas to 0 for a text-only prompt, so the same two generations decode right through it
    (position ids as the rotary embedding receives them)."""
    from transformers import Qwen2VLConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLForConditionalGeneration

    rope = {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]}
    text = dict(hidden_size=16, intermediate_size=16, num_hidden_layers=1, num_attention_heads=1, num_key_value_heads=1,
                head_dim=16, vocab_size=16, bos_token_id=None, eos_token_id=None, pad_token_id=0, rope_parameters=rope)
    vision = dict(depth=1, embed_dim=8, hidden_size=16, num_heads=1, mlp_ratio=1, spatial_merge_size=2)
    model = Qwen2VLForConditionalGeneration(Qwen2VLConfig(text_config=text, vision_config=vision,
                                                          image_token_id=15)).eval()
    seen = []
    model.model.language_model.rotary_emb.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(args[1][:, :, -1].clone()), with_kwargs=True)
    types = torch.tensor([decode_vectors.image_row(1, (1, 4, 4), 1)])  # 20 tokens, delta -12
    ids = torch.where(types == 1, 15, 3)
    with torch.no_grad():
        model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), mm_token_type_ids=types.int(),
                       image_grid_thw=torch.tensor([[1, 8, 8]]), max_new_tokens=3, min_new_tokens=3, do_sample=False)
        first = [int(p[0, 0]) for p in seen]
        seen.clear()
        ids = torch.full((1, 10), 3)
        model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=3, min_new_tokens=3,
                       do_sample=False)
    # the prompt's last position, then the decoded tokens at c + delta (c = 20, 21; then 10, 11)
    assert first == [7, 8, 9]
    assert [int(p[0, 0]) for p in seen] == [9, 10, 11]
