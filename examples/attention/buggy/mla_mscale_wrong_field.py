"""Bug: MLA's softmax scale computes m from ``mscale`` instead of ``mscale_all_dim``, as Megatron-LM's
multi_latent_attention.py did (issue 1429: ``yarn_get_mscale(scaling_factor, mscale)``). Equal on
every released DeepSeek config (mscale == mscale_all_dim), wrong wherever the two fields differ.

Adapter: mla (attention.mla). Expected diagnosis: ``mla-mscale-wrong-field``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "mla-mscale-wrong-field"
PROTOCOL = "attention.mla"

_EXAMPLE = Path(__file__).resolve().parents[1] / "mla_torch.py"
_mla = load_target(f"{_EXAMPLE}:mla")
_get_mscale = load_target(f"{_EXAMPLE}:get_mscale")


def mla(q_nope, q_pe, k_nope, k_pe, v, positions, spec):
    scale = spec.qk_head_dim ** -0.5
    sc = spec.scaling or {}
    if sc.get("mscale"):
        m = _get_mscale(float(sc["factor"]), sc["mscale"])  # BUG: mscale, not mscale_all_dim
        scale = scale * m * m
    return _mla(q_nope, q_pe, k_nope, k_pe, v, positions, spec, scale=scale)
