"""transformers' own rotary code for a model, built from the model's config as the library builds it.

``adapter_for(name)`` reads the zoo record (reference.zoo), builds the model type's config class
(``AutoConfig.for_model``) and its ``*RotaryEmbedding`` module from it, and returns a rope.apply or
rope.apply_qk adapter that applies the module's cos and sin with the model's own
``apply_rotary_pos_emb``. It
ignores ``spec``: it is a port of one model, graded with ``posref conform ... --model NAME``
(tests/rope/test_model_grading.py). Needs ``transformers`` (the ``test`` extra).

A model with one RoPE per layer type (Gemma 3: ``Gemma3RotaryEmbedding`` holds a table per
``layer_types`` entry and its forward takes ``layer_type``) is ported one layer type at a time:
``adapter_for(name, layer_type="sliding_attention")`` runs that layer type's table, as the
model's sliding layers do (tests/rope/test_model_transformers_gemma.py).
"""

import importlib
import inspect

from transformers import AutoConfig

from reference import zoo


def adapter_for(name: str, protocol: str = "rope.apply", layer_type=None, interleave=None):
    """A rope.apply (or rope.apply_qk: q and k with the model's kv heads) adapter running
    transformers' rotary code of zoo model ``name`` (of its layers of ``layer_type``, for a model
    whose rotary module keeps one RoPE per layer type; ValueError naming them when not given).
    The applier is the one the model's attention calls: ``apply_rotary_pos_emb_interleave`` where
    the config sets ``rope_interleave`` (DeepSeek-V3), else ``apply_rotary_pos_emb``;
    ``interleave=False`` forces the plain one. The interleaved applier returns the rotated features
    de-interleaved (evens, then odds: transformers' DeepSeek checkpoints are permuted to match), so
    the adapter puts them back in their original order, as rope.apply compares them."""
    config = dict(zoo.load(name)["config"])
    model_type = config.pop("model_type")
    config.pop("architectures", None)
    hf_config = AutoConfig.for_model(model_type, **config)
    module = importlib.import_module(_modeling(hf_config))
    rotary_class = next(getattr(module, n) for n in dir(module) if n.endswith("RotaryEmbedding"))
    rotary = rotary_class(hf_config)
    if "layer_type" in inspect.signature(rotary.forward).parameters:
        kinds = sorted(set(hf_config.layer_types))
        if layer_type not in kinds:
            raise ValueError(f"{name}: one RoPE per layer type: give layer_type, one of {kinds}")
        rotary = _for_layer_type(rotary, layer_type)
    elif layer_type is not None:
        raise ValueError(f"{name}: one RoPE for every layer, no layer_type to choose")

    if interleave is None:
        interleave = bool(getattr(hf_config, "rope_interleave", False))
    applier = _reinterleaved(module.apply_rotary_pos_emb_interleave) if interleave else module.apply_rotary_pos_emb

    def apply(x, positions, spec):
        cos, sin = rotary(x, positions)
        q = x.transpose(1, 2)  # [b, h, s, d], as the attention layer holds it
        q_rot, _ = applier(q, q, cos, sin)
        return q_rot.transpose(1, 2)

    def apply_qk(q, k, positions, spec):
        cos, sin = rotary(q, positions)
        q_rot, k_rot = applier(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
        return q_rot.transpose(1, 2), k_rot.transpose(1, 2)

    return apply_qk if protocol == "rope.apply_qk" else apply


def _reinterleaved(applier):
    """``applier`` with its outputs' features back in the input's order: feature 2i from the first
    half, 2i + 1 from the second."""

    def apply(q, k, cos, sin):
        return tuple(y.unflatten(-1, (2, -1)).transpose(-1, -2).flatten(-2) for y in applier(q, k, cos, sin))

    return apply


def _for_layer_type(rotary, layer_type):
    """The module's forward at one layer type, as each decoder layer receives it."""

    def forward(x, positions):
        return rotary(x, positions, layer_type)

    return forward


def _modeling(hf_config) -> str:
    """The modeling module beside the config class (gemma3_text's lives in models/gemma3)."""
    package, _, name = type(hf_config).__module__.rpartition(".")
    return f"{package}.{name.replace('configuration_', 'modeling_', 1)}"
