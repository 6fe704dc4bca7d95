"""T5 bucket golden vectors: protocol ``t5.bucket``.

``relative_positions`` int64 [n] (key minus query), ``expected`` int64 buckets, from the exact
logarithm ratio (reference.t5) and certified against oracle.py. Parameters: num_buckets,
max_distance, bidirectional.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol
from reference.t5 import bucket, oracle

PROTOCOL = "t5.bucket"
T5 = "https://arxiv.org/abs/1910.10683"
HF_T5 = "https://github.com/huggingface/transformers/blob/main/src/transformers/models/t5/modeling_t5.py"

NOTES = {
    "Bidirectional": {"bugType": "BASIC", "description": "The encoder's buckets: 16 per direction, r > 0 offset by "
                      "16.", "links": [T5, HF_T5]},
    "Causal": {"bugType": "BASIC", "description": "The decoder's buckets: 32 for earlier keys, later keys in "
               "bucket 0.", "links": [T5, HF_T5]},
    "BucketEdge": {"bugType": "EDGE_CASE", "description": "Distances where the exact log position is an integer "
                   "(16, 32, 64 for the encoder default): a float log one ulp low gives the bucket below, which "
                   "the protocol accepts there (acceptable), and says why.", "links": [HF_T5]},
    "ModelConfig": {"bugType": "FUNCTIONALITY", "description": "A released model's bucket count, maximum distance "
                    "and stack (the zoo's record: reference/zoo/models/), so a port of that model is graded on its "
                    "own configuration.", "links": [HF_T5]},
}


@dataclass(frozen=True)
class BucketTest(TestSpec):
    relative_positions: tuple = ()


def _params(bidirectional, num_buckets=32, max_distance=128):
    return {"num_buckets": num_buckets, "max_distance": max_distance, "bidirectional": bidirectional}


SPAN = tuple(range(-20, 21)) + (-1000, -129, -128, -127, -100, 100, 127, 128, 129, 1000, 100000)
EDGES = (-64, -63, -33, -32, -31, -17, -16, -15, 15, 16, 17, 31, 32, 33, 63, 64, 65)


def groups() -> list[GroupSpec]:
    return [
        GroupSpec(PROTOCOL, "t5-encoder", "T5's encoder: 32 buckets, max_distance 128, bidirectional.", (TestGroupSpec(
            _params(True), (
                BucketTest("span", "Relative positions -20..20 and far ones up to 100000.", ("Bidirectional",), SPAN),
                BucketTest("edges", "Distances around the bucket edges 16, 32 and 64.", ("Bidirectional", "BucketEdge"),
                           EDGES),
                BucketTest("near-boundaries", "Distances next to bucket boundaries (8 * 16^(b/8): 11.3, 22.6, 45.3, "
                           "90.5), where a log in bfloat16 already picks the wrong bucket at 90.",
                           ("Bidirectional",), (-91, -90, -46, -45, -23, -22, -12, -11, 11, 12, 22, 23, 45, 46, 90, 91)),
            ), T5),)),
        GroupSpec(PROTOCOL, "t5-decoder", "T5's decoder: 32 buckets, max_distance 128, causal.", (TestGroupSpec(
            _params(False), (
                BucketTest("span", "Relative positions -20..20 and far ones.", ("Causal",), SPAN),
                BucketTest("edges", "Distances around the edge 16.", ("Causal", "BucketEdge"), EDGES),
            ), T5),)),
    ]


def fresh_groups(draw) -> list:
    bidirectional = draw.choice((True, False))
    r = tuple(draw.integers(-3000, 3000, draw.integer(4, 16)))
    return [TestGroupSpec(_params(bidirectional), (BucketTest("drawn", f"Drawn at run time: {len(r)} relative "
                                                                        "positions.", (), r),))]


def build(case_id, params, test):
    return {}, {"relative_positions": np.array(test.relative_positions, dtype=np.int64)}


def compute(params, inputs, backend):
    return {"expected": bucket(inputs["relative_positions"], num_buckets=params["num_buckets"],
                               max_distance=params["max_distance"], bidirectional=params["bidirectional"])}


def shapes(params, arrays):
    return {"expected": arrays["relative_positions"].shape}


def exact(params, inputs):
    return {"expected": oracle.bucket_exact(inputs["relative_positions"], params["num_buckets"],
                                            params["max_distance"], params["bidirectional"])}


PARAMS_SCHEMA = {"type": "object", "additionalProperties": False,
                 "required": ["num_buckets", "max_distance", "bidirectional"],
                 "properties": {"num_buckets": {"type": "integer", "minimum": 2},
                                "max_distance": {"type": "integer", "minimum": 2},
                                "bidirectional": {"type": "boolean"}}}

PROTOCOLS = {PROTOCOL: VectorProtocol(PROTOCOL, {"relative_positions": "int64", "expected": "int64"},
                                      ("relative_positions",), PARAMS_SCHEMA, build, compute, shapes, exact,
                                      fresh=fresh_groups)}
