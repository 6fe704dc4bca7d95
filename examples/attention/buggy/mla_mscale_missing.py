"""Bug: MLA's softmax scale is (d_nope + d_rope)^-1/2 alone, YaRN's m^2 left out, as transformers'
DeepseekV2Attention and Mistral4Attention computed it before PR 47435 (``self.scaling =
self.qk_head_dim ** (-0.5)``; DeepseekV3Attention applied ``yarn_apply_mscale``). The rope part's
cos and sin are right (their factor is 1 when mscale == mscale_all_dim), so only the scale is off:
by m^2 = 1.59 at DeepSeek-V2's mscale_all_dim 0.707 and factor 40.

Adapter: mla (attention.mla). Expected diagnosis: ``mla-mscale-missing``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "mla-mscale-missing"
PROTOCOL = "attention.mla"

_mla = load_target(f"{Path(__file__).resolve().parents[1] / 'mla_torch.py'}:mla")


def mla(q_nope, q_pe, k_nope, k_pe, v, positions, spec):
    return _mla(q_nope, q_pe, k_nope, k_pe, v, positions, spec, scale=spec.qk_head_dim ** -0.5)  # BUG: no m^2
