"""Learned absolute position embedding golden vectors: the catalog (which cases exist, their
parameters and why), the protocol's arrays and parameter schema, how inputs are built and expected
values computed and certified.

Read by the generic machinery in ``reference.golden`` (docs/design.md). A case id is
``<protocol>/<group>/<test>``; ids are part of the public contract (reviews cite them), so rename
nothing here without bumping the suite version.

Protocol ``learned.lookup``: arrays ``x`` [b, s, d_model], ``positions`` int64 [b, s] and
``table`` [num_positions, d_model] (inputs), and ``expected`` = x + table[row] [b, s, d_model].

Sizes. The tables have the real lengths of the released models (BERT-base 512 rows, GPT-2 1024,
RoBERTa-base 514 with padding_idx 1): the length wall sits exactly where those models put it.
d_model is 8, not the models' 768: the table is a stored *input* of every case (an implementation
needs it to look anything up), vectors/ is stored uncompressed, and a 1024 x 768 float64 table
would weigh 6 MB per case; 8 columns keep the whole family near 0.6 MB. Nothing in a lookup
depends on the width (each column is one independent addition), so no case loses any power.

A zoo model's committed cases (``learned.lookup/gpt2-124m/...``, reference.learned.model_cases) keep
the model's own width (768) and name their table by a seed instead (group parameter ``table_from``
"seed", test parameters ``table_seed`` and ``table_sha256``; reference.golden.seeded): their
stored ``table`` is empty, shape (0, d_model), and ``table_of`` derives it.

Wall cases. A position whose row falls outside the table has no right value: the right answer is
an exception. Such a case has the parameter ``must_raise: true``, stores its inputs (x,
positions, table) and an empty ``expected`` (shape (0,)): there is no output. The conformance
protocol passes an implementation that raises on it and fails one that returns anything
(``length-wall-missing``). Generation checks that the reference itself refuses the case.

Every test carries a comment that says why it exists, and flags; ``NOTES`` explains each flag
(Wycheproof style: bugType, description, links).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference.golden import shapes as serving
from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol
from reference.golden.inputs import representable_inputs
from reference.golden.seeded import Seeded
from reference.learned import lookup, oracle, rows

SEEDED = Seeded("table")  # a zoo model's table, named by its seed

PROTOCOL = "learned.lookup"
D_MODEL = 8  # see the module docstring: the tables are stored inputs

# --------------------------------------------------------------------------------------------
# Flags

HF_GPT2 = "https://github.com/huggingface/transformers/blob/main/src/transformers/models/gpt2/modeling_gpt2.py"
HF_BERT = "https://github.com/huggingface/transformers/blob/main/src/transformers/models/bert/modeling_bert.py"
HF_ROBERTA = ("https://github.com/huggingface/transformers/blob/main/src/transformers/models/roberta/"
              "modeling_roberta.py")
FAIRSEQ_UTILS = "https://github.com/facebookresearch/fairseq/blob/main/fairseq/utils.py"
TORCH_EMBEDDING = "https://pytorch.org/docs/stable/generated/torch.nn.Embedding.html"
BERT_PAPER = "https://arxiv.org/abs/1810.04805"
GPT2_CONFIG = "https://huggingface.co/openai-community/gpt2/blob/main/config.json"
BERT_CONFIG = "https://huggingface.co/google-bert/bert-base-uncased/blob/main/config.json"
ROBERTA_CONFIG = "https://huggingface.co/FacebookAI/roberta-base/blob/main/config.json"

NOTES: dict[str, dict] = {
    "ModelConfig": {
        "bugType": "FUNCTIONALITY",
        "description": "The table length (and padding index) of a released model, so a port of "
        "that model is graded at its own length wall. The width is reduced to 8 (the table is a "
        "stored input); each column is an independent addition, so nothing depends on it.",
        "links": [BERT_CONFIG, GPT2_CONFIG, ROBERTA_CONFIG],
    },
    "Prefill": {
        "bugType": "BASIC",
        "description": "Prompt processing: positions 0, 1, ..., s-1 read the first rows of the "
        "table (rows padding_idx + 1 onwards for RoBERTa).",
        "links": [HF_GPT2, HF_BERT],
    },
    "Decode": {
        "bugType": "FUNCTIONALITY",
        "description": "KV-cache decode step: one token at a given position. Catches code that "
        "uses arange(seq_len) (row 0) instead of the given positions.",
        "links": [HF_GPT2],
    },
    "LastRow": {
        "bugType": "EDGE_CASE",
        "description": "The last row N-1 of the table exists and must be read: a wall placed one "
        "row too early (position >= N-1 refused) fails here.",
        "links": [TORCH_EMBEDDING],
    },
    "RowOffsets": {
        "bugType": "FUNCTIONALITY",
        "description": "Each batch row has its own positions (continuous batching, chunked "
        "prefill). Catches broadcasting one row's positions to the whole batch.",
        "links": [HF_GPT2],
    },
    "LengthWall": {
        "bugType": "EDGE_CASE",
        "description": "A position whose row is past the table's last row. A learned table has "
        "no row there and cannot extrapolate, so the lookup must raise (nn.Embedding raises an "
        "IndexError). Clamping to the last row, wrapping around or returning zeros is a silent "
        "wrong answer. The case passes when the implementation raises.",
        "links": [TORCH_EMBEDDING, HF_GPT2],
    },
    "OneTokenPastWall": {
        "bugType": "EDGE_CASE",
        "description": "Only one token of the batch (the last one of the last row) is past the "
        "wall: a check of the first row, the first token or seq_len alone misses it.",
        "links": [TORCH_EMBEDDING],
    },
    "NegativePosition": {
        "bugType": "EDGE_CASE",
        "description": "A negative position in an absolute lookup. Python and torch tensor "
        "indexing (table[positions]) wrap -1 to the last row silently; nn.Embedding raises. There "
        "is no row -1, so the lookup must raise.",
        "links": [TORCH_EMBEDDING],
    },
    "RobertaOffset": {
        "bugType": "FUNCTIONALITY",
        "description": "RoBERTa position ids: the real token at 0-based position p reads row "
        "p + padding_idx + 1 (row 2 for the first token of RoBERTa-base), as fairseq's "
        "make_positions and HF's create_position_ids_from_input_ids number them. Reading row p "
        "(BERT style) is a position offset of -(padding_idx + 1).",
        "links": [HF_ROBERTA, FAIRSEQ_UTILS],
    },
    "LeftPadding": {
        "bugType": "FUNCTIONALITY",
        "description": "Left-padded RoBERTa batch: padding tokens are marked -1 in positions and "
        "read row padding_idx; real tokens count from 0 after the pads (the cumulative sum of the "
        "attention mask), so rows start their real tokens at the same row padding_idx + 1.",
        "links": [HF_ROBERTA],
    },
    "PaddingRow": {
        "bugType": "EDGE_CASE",
        "description": "The padding row of the given table is not zero here (nn.Embedding zeroes "
        "it only at initialisation). HF RoBERTa looks the row up like any other; an "
        "implementation that masks padding tokens out instead of reading row padding_idx fails.",
        "links": [HF_ROBERTA, TORCH_EMBEDDING],
    },
    "ShapeMatrix": {
        "bugType": "FUNCTIONALITY",
        "description": "A case of the serving shape matrix (fresh only): batched decode, "
        "tile-boundary lengths and model widths, every position inside the table. `--shapes full` "
        "grades the whole matrix, a default run one case of each kind.",
        "links": [HF_GPT2],
    },
    "BatchedDecode": {
        "bugType": "FUNCTIONALITY",
        "description": "Continuous-batching decode: several rows of one token each, every row at "
        "its own position (0 and the table's last one among them). Code that takes the positions "
        "of row 0 for every row passes every batch-1 case.",
        "links": [HF_GPT2],
    },
    "TileBoundary": {
        "bugType": "EDGE_CASE",
        "description": "A sequence length at, just below or just above a power-of-two tile (1 to "
        "1000 tokens): a gather kernel that drops or repeats the last partial tile fails.",
        "links": [HF_GPT2],
    },
    "ModelWidth": {
        "bugType": "EDGE_CASE",
        "description": "A table width other than the catalog's 8 (1, 3, 40, 768 and 1024 columns), "
        "never equal to the batch or sequence size, so that code confusing two axes cannot pass "
        "by coincidence.",
        "links": [BERT_CONFIG],
    },
}

# --------------------------------------------------------------------------------------------
# Catalog records


@dataclass(frozen=True)
class LearnedTest(TestSpec):
    """One lookup case. ``positions`` holds one tuple per batch row (int64 in the vectors);
    ``must_raise``: the right answer is an exception (a position outside the table)."""

    positions: tuple[tuple[int, ...], ...] = ()
    must_raise: bool = False


def learned_params(num_positions: int, variant: str = "absolute", padding_idx=None) -> dict:
    return {"num_positions": num_positions, "d_model": D_MODEL, "variant": variant,
            "padding_idx": padding_idx}


MODELS = {
    "bert-base": dict(
        params=learned_params(512),
        source="BERT-base (bert-base-uncased): max_position_embeddings 512, hidden 768 (reduced "
        "to 8 here); position ids arange(seq_len) (" + BERT_CONFIG + ").",
    ),
    "gpt2": dict(
        params=learned_params(1024),
        source="GPT-2 (124M): n_positions 1024, n_embd 768 (reduced to 8 here); "
        "wpe = nn.Embedding(1024, 768), hidden = wte(ids) + wpe(position_ids) (" + GPT2_CONFIG + ").",
    ),
    "roberta-base": dict(
        params=learned_params(514, "roberta", 1),
        source="RoBERTa-base: max_position_embeddings 514, pad_token_id 1 = padding_idx, hidden "
        "768 (reduced to 8 here); 512 tokens at rows 2..513 (" + ROBERTA_CONFIG + ").",
    ),
}


def _test(name, comment, flags, positions, must_raise=False):
    return LearnedTest(name, comment, ("ModelConfig",) + tuple(flags), tuple(map(tuple, positions)),
                       must_raise)


def _left_padded_rows(length, pads_per_row):
    # RoBERTa counts only real tokens: 0-based among them, pads marked -1.
    return [[-1] * p + list(range(length - p)) for p in pads_per_row]


def _bert_tests():
    return (
        _test("prefill-8", "Two prompts of 8 tokens at positions 0..7: rows 0..7 are added.",
              ("Prefill",), [range(8), range(8)]),
        _test("last-row-511", "One decode step at position 511, BERT's last row: it exists and must "
              "be read (a wall placed at 511 instead of 512 fails here).", ("Decode", "LastRow"),
              [[511]]),
        _test("row-offsets", "Three rows at positions 0..3, 100..103 and 508..511 (up to the last "
              "row): each batch row must read its own rows.", ("RowOffsets", "LastRow"),
              [range(0, 4), range(100, 104), range(508, 512)]),
        _test("wall-512", "Position 512, one past BERT's 512 rows: there is no row 512, so the "
              "lookup must raise (the hard length wall), not clamp to row 511 or wrap to row 0.",
              ("LengthWall",), [[512]], must_raise=True),
        _test("wall-one-token", "Rows at positions 0..3 and 509..512: only the very last token is "
              "past the wall, and the whole call must still raise.",
              ("LengthWall", "OneTokenPastWall"), [range(0, 4), range(509, 513)], must_raise=True),
        _test("negative-1", "Positions -1, 0, 1, 2: -1 has no row; table[positions] would silently "
              "wrap it to row 511, so the lookup must raise.", ("NegativePosition",),
              [[-1, 0, 1, 2]], must_raise=True),
    )


def _gpt2_tests():
    return (
        _test("prefill-8", "A prompt of 8 tokens at positions 0..7: rows 0..7 of wpe are added.",
              ("Prefill",), [range(8)]),
        _test("decode-1023", "One decode step at position 1023, GPT-2's last row (its context is "
              "1024 tokens).", ("Decode", "LastRow"), [[1023]]),
        _test("wall-1024", "The decode step right after a full 1024-token context: position 1024 "
              "has no row in wpe, so the lookup must raise.", ("LengthWall", "Decode"), [[1024]],
              must_raise=True),
        _test("wall-2047", "Position 2047 (N + 1023, the last position of a doubled context, as a "
              "length-extrapolation attempt would ask for): a learned table cannot extrapolate, so "
              "the lookup must raise (clamping would return row 1023, wrapping row 1023 too).",
              ("LengthWall", "Decode"), [[2047]], must_raise=True),
    )


def _roberta_tests():
    rows = _left_padded_rows(6, (0, 2, 4))
    return (
        _test("prefill-8", "A prompt of 8 real tokens at positions 0..7 reads rows 2..9 "
              "(position + padding_idx + 1): RoBERTa's offset, which a BERT-style lookup misses.",
              ("Prefill", "RobertaOffset"), [range(8)]),
        _test("last-row-511", "Position 511, RoBERTa's last real position, reads row 513, the "
              "table's last row.", ("Decode", "LastRow", "RobertaOffset"), [[511]]),
        _test("left-padded", f"Batch of 3 left-padded rows (0, 2 and 4 pads) with positions {rows}: "
              "pads (-1) read row padding_idx = 1, real tokens rows 2, 3, ... in every row.",
              ("LeftPadding", "PaddingRow", "RobertaOffset"), rows),
        _test("wall-512", "Position 512 would read row 514, past RoBERTa's 514 rows: the lookup "
              "must raise (a BERT-style lookup would read row 512 and return a value).",
              ("LengthWall", "RobertaOffset"), [[512]], must_raise=True),
        _test("wall-one-token", "A padded row [-1, -1, 0, 1] and a row at positions 509..512: only "
              "the last token (row 514) is past the wall, and the whole call must raise.",
              ("LengthWall", "OneTokenPastWall", "LeftPadding", "RobertaOffset"),
              [[-1, -1, 0, 1], range(509, 513)], must_raise=True),
    )


def groups() -> list[GroupSpec]:
    """Every learned.lookup group, in a fixed order: BERT-base, GPT-2, RoBERTa-base."""
    tests = {"bert-base": _bert_tests(), "gpt2": _gpt2_tests(), "roberta-base": _roberta_tests()}
    return [
        GroupSpec(PROTOCOL, name, model["source"],
                  (TestGroupSpec(model["params"], tests[name], model["source"]),))
        for name, model in MODELS.items()
    ]


def _drawn_lookups(draw) -> list[TestGroupSpec]:
    """Drawn at run time (reference.golden.fresh): one model, a lookup at random positions below
    its wall (RoBERTa: pads -1 among them) and one with a random token past the wall, which must
    raise. Tables and x are seeded by the fresh case ids."""
    name = draw.choice(sorted(MODELS))
    model = MODELS[name]
    params = model["params"]
    roberta = params["variant"] == "roberta"
    last = params["num_positions"] - 1 - (params["padding_idx"] + 1 if roberta else 0)
    b, s = draw.integer(1, 3), draw.integer(1, 6)
    inside = [draw.integers(-1 if roberta else 0, last, s) for _ in range(b)]
    beyond = [list(row) for row in inside]
    beyond[draw.integer(0, b - 1)][draw.integer(0, s - 1)] = last + draw.integer(1, 1000)
    tests = (
        _test(f"{name}-inside", f"Drawn at run time: {b} x {s} positions up to {name}'s last one.",
              ("RobertaOffset",) if roberta else (), inside),
        _test(f"{name}-past-wall", "Drawn at run time: the same shape with one token past the "
              "wall, so the lookup must raise.", ("LengthWall",), beyond, must_raise=True),
    )
    return [TestGroupSpec(params, tests, model["source"])]


# The serving shape matrix (issue 14), as rope.apply's (reference/rope/vectors/fresh.py): batched decode,
# tile-boundary lengths and table widths (a lookup has no heads axis; its width is the axis an
# implementation could confuse with the batch or the sequence), every position drawn from the
# run's seed and inside the table (0 and the last position included). A lookup is one addition
# per value, so the matrix keeps rope.apply's sizes: two rows per prefill; about 47 000 values.
SAMPLE_KINDS = ("decode", "seq", "width")
WIDTHS = (1, 3, 40, 768, 1024)


def _last_position(params) -> int:
    """The largest position with a row (RoBERTa: padding_idx + 1 rows before position 0)."""
    roberta = params["variant"] == "roberta"
    return params["num_positions"] - 1 - (params["padding_idx"] + 1 if roberta else 0)


def _shape_case(kind, name, comment, flags, rows, model, d_model=D_MODEL):
    params = {**MODELS[model]["params"], "d_model": d_model}
    extra = ("RobertaOffset",) if params["variant"] == "roberta" else ()
    test = _test(f"shape-{name}-{model}", f"Drawn at run time ({model}'s table, {d_model} columns): {comment}",
                 tuple(flags) + extra + ("ShapeMatrix",), rows)
    return kind, TestGroupSpec(params, (test,), MODELS[model]["source"])


def shape_matrix(draw) -> list:
    """[(kind, TestGroupSpec)] of the whole matrix: batched decode on GPT-2's and RoBERTa's
    tables, the tile lengths on GPT-2's (1024 rows hold 1000 tokens), the widths on BERT's."""
    out = []
    for model in ("gpt2", "roberta-base"):
        last = _last_position(MODELS[model]["params"])
        for b in serving.DECODE_BATCHES:
            rows = serving.decode_rows(draw, b, last)
            out.append(_shape_case("decode", f"decode-b{b}", f"{b} rows of one token each, each at its own "
                                   f"position ({rows[:3]}...; 0 and {last} included).",
                                   ("Decode", "RowOffsets", "BatchedDecode"), [(p,) for p in rows], model))
    last = _last_position(MODELS["gpt2"]["params"])
    for n in serving.TILE_LENGTHS:
        starts = serving.distinct_rows(draw, 2, 0, last + 1 - n, {})
        out.append(_shape_case("seq", f"seq-{n}", f"2 rows of {n} tokens from positions {starts}.",
                               ("Prefill", "RowOffsets", "TileBoundary"),
                               [range(s0, s0 + n) for s0 in starts], "gpt2"))
    last = _last_position(MODELS["bert-base"]["params"])
    for d in WIDTHS:
        rows = [draw.integers(0, last, 5) for _ in range(2)]
        out.append(_shape_case("width", f"width-{d}", f"2 rows of 5 tokens at drawn positions, {d} columns.",
                               ("ModelWidth",), rows, "bert-base", d))
    return out


# learned.lookup's fresh cases: the drawn lookups, then the shape matrix: all of it when ``shapes``
# is "full", else one case of each kind of SAMPLE_KINDS (drawn).
fresh_lookups = serving.fresh_cases(_drawn_lookups, shape_matrix, SAMPLE_KINDS)


# --------------------------------------------------------------------------------------------
# Protocol: parameters, inputs, expected values, shapes, exact values


def _refused(params: dict, positions: np.ndarray) -> bool:
    """True when the reference refuses these positions (some row outside the table)."""
    try:
        rows(positions, params["num_positions"], variant=params["variant"],
             padding_idx=params["padding_idx"])
    except ValueError:
        return True
    return False


def build_lookup(case_id: str, params: dict, test: LearnedTest):
    """positions int64 [b, s] from the catalog; x [b, s, d_model] and table [N, d_model] seeded by
    the case id (roles "x" and "table") and exactly representable in bfloat16 and float16."""
    if len({len(r) for r in test.positions}) != 1:
        raise ValueError(f"{case_id}: position rows must have equal lengths")
    positions = np.array(test.positions, dtype=np.int64)
    if _refused(params, positions) != test.must_raise:
        raise ValueError(f"{case_id}: must_raise is {test.must_raise}, but the reference "
                         f"{'refuses' if not test.must_raise else 'accepts'} these positions")
    b, s = positions.shape
    x = representable_inputs(case_id, (b, s, params["d_model"]), "x")
    test_params = {"must_raise": bool(test.must_raise)}
    if SEEDED.is_seeded(params):  # a zoo model's committed case: the table named by its seed
        table = SEEDED.derive(case_id, _table_shape(params), {"table": 1.0})
        test_params.update(SEEDED.named(case_id, table, ["table"]))
        table = np.empty((0, params["d_model"]), dtype=np.float64)
    else:
        table = representable_inputs(case_id, (params["num_positions"], params["d_model"]), "table")
    return test_params, {"x": x, "positions": positions, "table": table}


def _table_shape(params) -> dict:
    return {"table": (params["num_positions"], params["d_model"])}


def table_of(params: dict, stored) -> np.ndarray:
    """The case's table: ``stored``, or for a zoo model's committed case the one its ``table_seed``
    derives, checked against ``table_sha256`` (reference.golden.seeded)."""
    return SEEDED.inputs_of(params, {"table": stored}, _table_shape(params), {"table": 1.0})["table"]


def compute_lookup(params: dict, inputs: dict, backend: str) -> dict:
    """``expected`` = reference.learned.lookup(x, positions, table) [b, s, d_model], float64 (one
    correctly rounded addition: golden and fast mode are the same). A ``must_raise`` case gets an
    empty ``expected`` after checking that the reference does refuse it."""
    kwargs = dict(variant=params["variant"], padding_idx=params["padding_idx"], backend=backend)
    table = table_of(params, inputs["table"])
    if params["must_raise"]:
        try:
            lookup(inputs["x"], inputs["positions"], table, **kwargs)
        except ValueError:
            return {"expected": np.empty((0,), dtype=np.float64)}
        raise ValueError("must_raise: the reference accepted a case that must raise")
    out = lookup(inputs["x"], inputs["positions"], table, **kwargs)
    return {"expected": np.asarray(out, dtype=np.float64)}


def shapes_lookup(params: dict, arrays: dict) -> dict:
    positions = arrays["positions"]
    if positions.ndim != 2:
        return {"positions": ("batch", "seq")}
    b, s = positions.shape
    d = params["d_model"]
    out = (0,) if params["must_raise"] else (b, s, d)
    rows_stored = 0 if SEEDED.is_seeded(params) else params["num_positions"]
    return {"x": (b, s, d), "table": (rows_stored, d), "expected": out}


def exact_lookup(params: dict, inputs: dict) -> dict:
    """The exact sums in mpmath (reference.learned.oracle), or nothing for a must_raise case."""
    if params["must_raise"]:
        return {"expected": np.empty((0,), dtype=object)}
    return {"expected": oracle.lookup_exact(inputs["x"], inputs["positions"],
                                            table_of(params, inputs["table"]),
                                            params["variant"], params["padding_idx"])}


PARAMS_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["num_positions", "d_model", "variant", "padding_idx", "must_raise"],
    "properties": {
        "num_positions": {"type": "integer", "minimum": 1},
        "d_model": {"type": "integer", "minimum": 1},
        "variant": {"enum": ["absolute", "roberta"]},
        "padding_idx": {"type": ["null", "integer"], "minimum": 0},
        "must_raise": {"type": "boolean"},
        # A zoo model's committed case: its table named by a seed, not stored (reference.golden.seeded).
        **SEEDED.schema()["properties"],
    },
    "dependentRequired": SEEDED.schema()["dependentRequired"],
}

PROTOCOLS = {
    PROTOCOL: VectorProtocol(
        PROTOCOL, {"x": "float64", "positions": "int64", "table": "float64", "expected": "float64"},
        ("x", "positions", "table"), PARAMS_SCHEMA, build_lookup, compute_lookup, shapes_lookup,
        exact_lookup, fresh=fresh_lookups,
        named=lambda params, arrays: {"table": table_of(params, arrays["table"])}),
}
