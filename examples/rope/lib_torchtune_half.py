"""torchtune's rotate-half RoPE modules, ``Phi3RotaryPositionalEmbeddings`` (torchtune.models.phi3)
and ``Qwen2RotaryPositionalEmbeddings`` (torchtune.models.qwen2), graded through thin adapters.
Graded at torchtune 0.6.1.

Unlike torchtune's default ``RotaryPositionalEmbeddings`` (pairs (2i, 2i+1): examples/rope/
lib_torchtune.py) these pair (i, i + d/2) as Hugging Face checkpoints do (the half layout). Both
tabulate [cos | sin] of float32 angles seq_idx * theta for positions 0 .. max_seq_len - 1 at
construction, read it at ``input_pos`` and rotate every feature (no partial rotary, no scaling:
Phi-3's longrope is not in the module). They differ in precision: Phi-3's module multiplies x by
the float32 table (computed in float32, cast back once); Qwen2's casts cos and sin to x's dtype
first, so in bfloat16 the table and both products are rounded to bfloat16.

The table length, the module reuse and the tensor layouts are lib_torchtune.py's (loaded beside
this file). Adapters: ``phi3``, ``qwen2`` (rope.apply). Needs ``torchtune`` and a ``torchao`` it
can import (the ``test`` extra); the tests skip without them.
"""

from pathlib import Path

from torchtune.models.phi3 import Phi3RotaryPositionalEmbeddings
from torchtune.models.qwen2._positional_embeddings import Qwen2RotaryPositionalEmbeddings

from conformance import Unsupported
from conformance.loader import load_target

LIBRARY = ("torchtune", "torchao")
SURVEY = [("rope.apply", "phi3"), ("rope.apply", "qwen2")]
SURVEY_NOTES = {
    "phi3": "Phi3RotaryPositionalEmbeddings rotates (i, i + d/2) pairs of the whole head with no scaling, from a "
            "table up to 2^17 positions: the other cases are unsupported.",
    "qwen2": "Qwen2RotaryPositionalEmbeddings rotates (i, i + d/2) pairs of the whole head with no scaling, from a "
             "table up to 2^17 positions: the other cases are unsupported.",
}

_HERE = Path(__file__).resolve().parent
_table_length, _built, _run = (load_target(f"{_HERE / 'lib_torchtune.py'}:{name}")
                               for name in ("_table_length", "_built", "_run"))
MODULES = {"phi3": Phi3RotaryPositionalEmbeddings, "qwen2": Qwen2RotaryPositionalEmbeddings}


def _apply(name, x, positions, spec):
    if spec.layout != "half":
        raise Unsupported(f"torchtune's {MODULES[name].__name__} pairs (i, i + d/2): half layout only")
    if spec.rotary_dim != spec.head_dim:
        raise Unsupported("torchtune's RoPE rotates every feature of its input: no partial rotary")
    if spec.scaling:
        raise Unsupported(f"torchtune's {MODULES[name].__name__} implements no scaling")
    rope = _built((name, spec.head_dim, spec.base), _table_length(positions),
                  lambda n: MODULES[name](dim=spec.head_dim, max_seq_len=n, base=spec.base))
    return _run(rope.to(x.device), x, positions, spec)


def phi3(x, positions, spec):
    return _apply("phi3", x, positions, spec)


def qwen2(x, positions, spec):
    return _apply("qwen2", x, positions, spec)
