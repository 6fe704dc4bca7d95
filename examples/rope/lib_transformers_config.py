"""transformers' own rotary code for a model, built from the model's config as the library builds it.

``adapter_for(name)`` reads the zoo record (reference.zoo), builds the model type's config class
(``AutoConfig.for_model``) and its ``*RotaryEmbedding`` module from it, and returns a rope.apply or
rope.apply_qk adapter that applies the module's cos and sin with the model's own
``apply_rotary_pos_emb``. It
ignores ``spec``: it is a port of one model, graded with ``posref conform ... --model NAME``
(tests/rope/test_model_grading.py). Needs ``transformers`` (the ``test`` extra).
"""

import importlib

from transformers import AutoConfig

from reference import zoo


def adapter_for(name: str, protocol: str = "rope.apply"):
    """A rope.apply (or rope.apply_qk: q and k with the model's kv heads) adapter running
    transformers' rotary code of zoo model ``name``."""
    config = dict(zoo.load(name)["config"])
    model_type = config.pop("model_type")
    config.pop("architectures", None)
    hf_config = AutoConfig.for_model(model_type, **config)
    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    rotary_class = next(getattr(module, n) for n in dir(module) if n.endswith("RotaryEmbedding"))
    rotary = rotary_class(hf_config)

    def apply(x, positions, spec):
        cos, sin = rotary(x, positions)
        q = x.transpose(1, 2)  # [b, h, s, d], as the attention layer holds it
        q_rot, _ = module.apply_rotary_pos_emb(q, q, cos, sin)
        return q_rot.transpose(1, 2)

    def apply_qk(q, k, positions, spec):
        cos, sin = rotary(q, positions)
        q_rot, k_rot = module.apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
        return q_rot.transpose(1, 2), k_rot.transpose(1, 2)

    return apply_qk if protocol == "rope.apply_qk" else apply
