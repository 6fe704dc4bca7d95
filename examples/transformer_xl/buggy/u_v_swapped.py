"""Bug: r_w_bias (u) and r_r_bias (v) swapped: v added to the query for the content term AC and u
for the position term BD.

Adapter: score (transformer_xl.score). Expected diagnosis: ``xl-u-v-swapped``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "xl-u-v-swapped"
PROTOCOL = "transformer_xl.score"

correct = load_target(f"{Path(__file__).resolve().parents[1] / 'mem_transformer_style.py'}:score")


def score(q, k, u, v, r_weight, spec):
    return correct(q, k, v, u, r_weight, spec)  # BUG: the biases in each other's place
