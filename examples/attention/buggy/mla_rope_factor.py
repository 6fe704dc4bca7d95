"""Bug: the rope part's cos and sin carry YaRN's generic attention factor 0.1 ln(factor) + 1, as a
YaRN implementation that ignores mscale and mscale_all_dim computes it (the DeepSeek-V4 port in
Avarok-Cybersecurity/atlas PR 342 applied HF's default this way; llama.cpp issue 7118 found the
same difference for DeepSeek-V2): DeepSeek's factor is mscale(s, mscale) / mscale(s,
mscale_all_dim), 1 on V2 and V3, so their rope logits grow by 1.87.

Adapter: mla (attention.mla). Expected diagnosis: ``mla-rope-factor``.
"""

import math
from pathlib import Path

from conformance.loader import load_target

CODE = "mla-rope-factor"
PROTOCOL = "attention.mla"

_EXAMPLE = Path(__file__).resolve().parents[1] / "mla_torch.py"
_mla = load_target(f"{_EXAMPLE}:mla")
_tables = load_target(f"{_EXAMPLE}:yarn_tables")


def generic_tables(spec, positions):
    cos, sin = _tables(spec, positions)
    sc = spec.scaling or {}
    ms, all_dim = sc.get("mscale"), sc.get("mscale_all_dim")
    if ms and all_dim:  # undo DeepSeek's ratio, apply the generic factor: the BUG
        s = float(sc["factor"])
        ratio = (0.1 * ms * math.log(s) + 1) / (0.1 * all_dim * math.log(s) + 1)
        generic = 0.1 * math.log(s) + 1
        cos, sin = cos / ratio * generic, sin / ratio * generic
    return cos, sin


def mla(q_nope, q_pe, k_nope, k_pe, v, positions, spec):
    return _mla(q_nope, q_pe, k_nope, k_pe, v, positions, spec, tables=generic_tables)
