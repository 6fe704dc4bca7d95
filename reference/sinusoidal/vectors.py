"""Sinusoidal table golden vectors: the catalog (which cases exist, their parameters and why), the
protocol's arrays and parameter schema, and how expected values are computed and certified.

Read by the generic machinery in ``reference.golden`` (docs/design.md). A case id is
``sinusoidal.table/<group>/<test>``; ids are part of the public contract.

Protocol ``sinusoidal.table``: ``positions`` int64 [n] (1-D tables) or [n, 2] (2-D: the two
coordinates of each token) is the only input; ``expected`` [n, d_model] the table rows. There is
no input in a dtype under test, so the conformance protocol is dtype-free.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol
from reference.sinusoidal import oracle, table

PROTOCOL = "sinusoidal.table"

VASWANI = "https://arxiv.org/abs/1706.03762"
T2T = ("https://github.com/tensorflow/tensor2tensor/blob/master/tensor2tensor/layers/"
       "common_attention.py")
FAIRSEQ = ("https://github.com/facebookresearch/fairseq/blob/main/fairseq/modules/"
           "sinusoidal_positional_embedding.py")
TXL = "https://github.com/kimiyoung/transformer-xl/blob/master/pytorch/mem_transformer.py"
MAE = "https://github.com/facebookresearch/mae/blob/main/util/pos_embed.py"
DIFFUSERS = "https://github.com/huggingface/diffusers/blob/main/src/diffusers/models/embeddings.py"

NOTES: dict[str, dict] = {
    "Interleaved": {
        "bugType": "FUNCTIONALITY",
        "description": "The paper's layout: column 2i = sin(p w_i), column 2i + 1 = cos(p w_i).",
        "links": [VASWANI],
    },
    "Concatenated": {
        "bugType": "FUNCTIONALITY",
        "description": "[sin | cos] halves: columns 0..h-1 are sines, h..2h-1 cosines (tensor2tensor, "
        "fairseq, Transformer-XL, MAE). Swapping it with the interleaved layout moves every column.",
        "links": [T2T, FAIRSEQ, TXL],
    },
    "ExponentD": {
        "bugType": "FUNCTIONALITY",
        "description": "Frequencies w_i = base**(-2i/d): the paper, Transformer-XL and MAE.",
        "links": [VASWANI, TXL, MAE],
    },
    "ExponentDMinus2": {
        "bugType": "FUNCTIONALITY",
        "description": "Frequencies w_i = base**(-i/(d/2 - 1)) = base**(-2i/(d-2)): tensor2tensor's "
        "and fairseq's log-spaced timescales, whose last frequency is exactly 1/base. Using 2i/d "
        "instead (or the reverse) is the frequency-exponent fault.",
        "links": [T2T, FAIRSEQ],
    },
    "Prefill": {
        "bugType": "BASIC",
        "description": "The first positions 0, 1, 2, ...: row 0 is (0, 1, 0, 1, ...) in the "
        "interleaved layout, which any layout confusion already breaks.",
        "links": [VASWANI],
    },
    "LongPositions": {
        "bugType": "EDGE_CASE",
        "description": "Positions from 1000 up to 2**20: the angle p w_0 = p radians must be "
        "reduced accurately; float32 angles drift by up to p * 2**-24 there.",
        "links": [VASWANI],
    },
    "FairseqPositions": {
        "bugType": "FUNCTIONALITY",
        "description": "fairseq numbers tokens from padding_idx + 1 (2 with padding_idx 1): the "
        "table is evaluated at those positions. Code that numbers from 0 is a position offset.",
        "links": [FAIRSEQ],
    },
    "DescendingPositions": {
        "bugType": "FUNCTIONALITY",
        "description": "Transformer-XL evaluates the table at relative distances klen-1, ..., 1, 0 "
        "(pos_seq = arange(klen - 1, -1, -1)).",
        "links": [TXL],
    },
    "NegativePositions": {
        "bugType": "EDGE_CASE",
        "description": "Negative positions (relative distances in both directions): sin is odd and "
        "cos even, so PE(-p) mirrors PE(p).",
        "links": [TXL],
    },
    "OddDModel": {
        "bugType": "EDGE_CASE",
        "description": "Odd d_model. Interleaved: the last column is the sine of frequency "
        "(d - 1) / 2 with w_i = base**(-2i/d). Concatenated: fairseq, tensor2tensor and diffusers "
        "append one zero column after [sin | cos] of h = floor(d / 2) frequencies; the 2i/d rule "
        "is then i / h (diffusers get_timestep_embedding, downscale_freq_shift 0).",
        "links": [FAIRSEQ, T2T, DIFFUSERS],
    },
    "Grid2D": {
        "bugType": "FUNCTIONALITY",
        "description": "2-D table for vision (MAE / ViT): the first d/2 columns are the [sin | cos] "
        "table of coordinate 0, the last d/2 that of coordinate 1, each with w_i = "
        "base**(-2i/(d/2)). MAE's coordinate 0 is the column w of token h * W + w (its grid is "
        "np.meshgrid(grid_w, grid_h)).",
        "links": [MAE],
    },
    "ModelConfig": {
        "bugType": "FUNCTIONALITY",
        "description": "A released model's table (the zoo's record: reference/zoo/models/): its width, "
        "layout, exponent and base, up to the largest position it feeds.",
        "links": [TXL],
    },
}


@dataclass(frozen=True)
class SinusoidalTest(TestSpec):
    """One table case: ``positions`` (ints, or (c0, c1) pairs for a 2-D table)."""

    positions: tuple = ()


def sinusoidal_params(d_model, layout, exponent, base=10000.0, dims=1) -> dict:
    return {"d_model": d_model, "layout": layout, "exponent": exponent, "base": base, "dims": dims}


def _flags(params):
    return (("Interleaved" if params["layout"] == "interleaved" else "Concatenated"),
            ("ExponentD" if params["exponent"] == "2i/d" else "ExponentDMinus2"))


def _group(name, description, params, tests, source):
    tests = tuple(SinusoidalTest(t.name, t.comment, _flags(params) + t.flags, t.positions) for t in tests)
    return GroupSpec(PROTOCOL, name, description, (TestGroupSpec(params, tests, source),))


def _t(name, comment, flags, positions):
    return SinusoidalTest(name, comment, tuple(flags), tuple(positions))


LONG = (1000, 4095, 65535, 2**20)


def groups() -> list[GroupSpec]:
    """Every sinusoidal.table group, in a fixed order."""
    vaswani = sinusoidal_params(512, "interleaved", "2i/d")
    t2t = sinusoidal_params(512, "concatenated", "2i/(d-2)")
    txl = sinusoidal_params(410, "concatenated", "2i/d")
    mae = sinusoidal_params(768, "concatenated", "2i/d", dims=2)
    grid = tuple((w, h) for h in (0, 1, 13) for w in (0, 1, 13))
    return [
        _group("transformer-base", "Transformer base (Vaswani et al. 2017): d_model 512, interleaved "
               "sin/cos, w_i = 10000**(-2i/512).", vaswani, (
                   _t("prefill-16", "Positions 0..15: the start of every sequence.", ("Prefill",), range(16)),
                   _t("long", f"Positions {', '.join(map(str, LONG))}: long contexts.", ("LongPositions",), LONG),
               ), VASWANI),
        _group("tensor2tensor", "tensor2tensor get_timing_signal_1d at d_model 512: [sin | cos], "
               "timescales from 1 to 10000, w_i = 10000**(-i/255).", t2t, (
                   _t("prefill-8", "Positions 0..7: the start of every sequence.", ("Prefill",), range(8)),
                   _t("long", f"Positions {', '.join(map(str, LONG))}: long contexts.", ("LongPositions",), LONG),
               ), T2T),
        _group("fairseq", "fairseq SinusoidalPositionalEmbedding at d_model 512 with padding_idx 1: "
               "tokens at positions 2, 3, ...", t2t, (
                   _t("from-padding-idx", "Positions 2..9: fairseq's first token is at padding_idx + 1 = 2.",
                      ("FairseqPositions",), range(2, 10)),
               ), FAIRSEQ),
        _group("transformer-xl", "Transformer-XL (WikiText-103 base, d_model 410): inv_freq = "
               "1 / 10000**(arange(0, d, 2) / d), [sin | cos].", txl, (
                   _t("relative-8", "Relative distances 7, 6, ..., 0 (klen 8).", ("DescendingPositions",),
                      range(7, -1, -1)),
                   _t("negative", "Distances -1, -2, -1000, -65535: PE(-p) mirrors PE(p).",
                      ("NegativePositions",), (-1, -2, -1000, -65535)),
               ), TXL),
        _group("mae-vit-base", "MAE / ViT-Base 2-D sin-cos table (d_model 768, 14 x 14 patches): the "
               "tokens at rows and columns 0, 1 and 13, coordinates (w, h).", mae, (
                   _t("grid-corners", "Tokens (w, h) for w, h in {0, 1, 13}: both coordinates, and the "
                      "far corner of the 14 x 14 grid.", ("Grid2D",), grid),
               ), MAE),
        GroupSpec(PROTOCOL, "odd-d-model", "Odd d_model in both layouts.", (
            TestGroupSpec(sinusoidal_params(7, "interleaved", "2i/d"), (
                SinusoidalTest("interleaved-d7", "d_model 7, interleaved: columns sin, cos, sin, cos, "
                               "sin, cos, sin (frequencies 0..3 of 10000**(-2i/7)).",
                               ("Interleaved", "ExponentD", "OddDModel"), (0, 1, 2, 100, 4095)),
            ), VASWANI),
            TestGroupSpec(sinusoidal_params(9, "concatenated", "2i/(d-2)"), (
                SinusoidalTest("fairseq-d9", "d_model 9, fairseq: [sin | cos] of 4 frequencies "
                               "10000**(-i/3), then a zero column.",
                               ("Concatenated", "ExponentDMinus2", "OddDModel"), (0, 1, 2, 100, 4095)),
            ), FAIRSEQ),
            TestGroupSpec(sinusoidal_params(9, "concatenated", "2i/d"), (
                SinusoidalTest("timestep-d9", "d_model 9, diffusers get_timestep_embedding "
                               "(downscale_freq_shift 0): [sin | cos] of 4 frequencies 10000**(-i/4), "
                               "then a zero column.",
                               ("Concatenated", "ExponentD", "OddDModel"), (0, 1, 2, 100, 999)),
            ), DIFFUSERS),
        )),
    ]


def fresh_tables(draw) -> list[TestGroupSpec]:
    """Two tables drawn at run time (reference.golden.fresh): a d_model in [2, 1024], a layout,
    an exponent and an integer base in [100, 10^6], at up to 8 positions in [-2^20, 2^20] (a 2-D
    table: coordinates in [0, 63])."""
    groups = []
    for k in range(2):
        dims = draw.choice((1, 1, 2))
        d = 4 * draw.integer(1, 256) if dims == 2 else draw.integer(2, 1024)
        exponent = "2i/d" if dims == 2 or d < 4 else draw.choice(("2i/d", "2i/(d-2)"))
        params = sinusoidal_params(d, "concatenated" if dims == 2 else draw.choice(("interleaved", "concatenated")),
                                   exponent, float(draw.integer(100, 10**6)), dims)
        n = draw.integer(1, 8)
        if dims == 2:
            positions = tuple(zip(draw.integers(0, 63, n), draw.integers(0, 63, n)))
        else:
            positions = tuple(draw.integers(-(2**20), 2**20, n))
        test = SinusoidalTest(f"d{d}-{k}", f"Drawn at run time: d_model {d}, {params['layout']}, "
                              f"exponent {exponent}, base {params['base']:g}, {n} positions.",
                              _flags(params), positions)
        groups.append(TestGroupSpec(params, (test,)))
    return groups


# --------------------------------------------------------------------------------------------
# Protocol: inputs, expected values, shapes, exact values


def build_table(case_id: str, params: dict, test: SinusoidalTest):
    """positions int64 [n] or [n, 2] from the catalog; nothing is seeded."""
    positions = np.array(test.positions, dtype=np.int64)
    if params["dims"] == 2 and (positions.ndim != 2 or positions.shape[1] != 2):
        raise ValueError(f"{case_id}: a 2-D table needs (c0, c1) positions")
    return {}, {"positions": positions}


def _kwargs(params):
    return dict(layout=params["layout"], exponent=params["exponent"], base=params["base"],
                dims=params["dims"])


def compute_table(params: dict, inputs: dict, backend: str) -> dict:
    """``expected`` = reference.sinusoidal.table(positions, mode="golden") [n, d_model]: every
    value correctly rounded."""
    out = table(inputs["positions"], params["d_model"], backend=backend, mode="golden", **_kwargs(params))
    return {"expected": np.asarray(out, dtype=np.float64)}


def shapes_table(params: dict, arrays: dict) -> dict:
    positions = arrays["positions"]
    want = 1 if params["dims"] == 1 else 2
    if positions.ndim != want or (want == 2 and positions.shape[1] != 2):
        return {"positions": ("n",) if want == 1 else ("n", 2)}
    return {"expected": (positions.shape[0], params["d_model"])}


def exact_table(params: dict, inputs: dict) -> dict:
    return {"expected": oracle.table_exact(inputs["positions"], params["d_model"], params["layout"],
                                           params["exponent"], params["base"], params["dims"])}


PARAMS_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["d_model", "layout", "exponent", "base", "dims"],
    "properties": {
        "d_model": {"type": "integer", "minimum": 2},
        "layout": {"enum": ["interleaved", "concatenated"]},
        "exponent": {"enum": ["2i/d", "2i/(d-2)"]},
        "base": {"type": "number", "exclusiveMinimum": 1},
        "dims": {"enum": [1, 2]},
    },
}

PROTOCOLS = {
    PROTOCOL: VectorProtocol(
        PROTOCOL, {"positions": "int64", "expected": "float64"}, ("positions",), PARAMS_SCHEMA,
        build_table, compute_table, shapes_table, exact_table, fresh=fresh_tables),
}
