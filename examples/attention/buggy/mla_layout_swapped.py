"""Bug: the rope features are turned in rotate_half pairs (j, j + d_rope/2) whatever spec.layout
says, as a kernel written for Llama-style checkpoints runs DeepSeek's interleaved q_pe and k_pe
(transformers handles it with rope_interleave; code that drops the flag turns the wrong pairs).

Adapter: mla (attention.mla). Expected diagnosis: ``attention-encoding`` (the other pair layout).
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "attention-encoding"
PROTOCOL = "attention.mla"

_mla = load_target(f"{Path(__file__).resolve().parents[1] / 'mla_torch.py'}:mla")


def mla(q_nope, q_pe, k_nope, k_pe, v, positions, spec):
    return _mla(q_nope, q_pe, k_nope, k_pe, v, positions, spec, layout="half")  # BUG: ignores spec.layout
