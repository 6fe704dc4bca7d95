"""attention.forward's float64 reference on arrays: the reference.attention configuration of a
spec, the learned bias's weights, the reference's arguments for the dtype-rounded inputs and its
stages (cached per prepared call). The protocol (forward.py), its budgets, fault models and
backward read them.
"""

from __future__ import annotations

import numpy as np

from reference import attention
from reference.attention import Config
from reference.attention.vectors import BIAS_WEIGHTS

WEIGHTS = ("wq", "wk", "wv", "wo")


def reference_config(spec):
    return Config(spec.num_heads, spec.num_kv_heads, spec.head_dim, spec.causal, spec.encoding, spec.base,
                  spec.rotary_dim, spec.layout, spec.scaling, spec.seq_len, spec.kerple_variant, spec.kerple_r1,
                  spec.kerple_r2, spec.num_buckets, spec.max_distance, spec.logit_scale)


def bias_weights(spec) -> dict:
    """{stored array role: key in the weights dict} of the encoding's learned bias (FIRE's MLP,
    T5's table; empty otherwise)."""
    return BIAS_WEIGHTS.get(spec.encoding, {})


def reference_args(inputs, spec):
    """((hidden, weights, positions, Config), keywords) of reference.attention for the inputs."""
    weights = {n: inputs[n] for n in WEIGHTS}
    weights.update({key: inputs[role] for role, key in bias_weights(spec).items()})
    if spec.encoding == "fire":
        weights.update(c=float(np.ravel(weights["c"])[0]), L_multiplier=float(np.ravel(weights["L_multiplier"])[0]))
    kw = dict(attention_mask=inputs["attention_mask"].astype(bool), past_keys=inputs["past_keys"],
              past_values=inputs["past_values"])
    return (inputs["hidden"], weights, inputs["positions"], reference_config(spec)), kw


def stages(prepared, spec) -> dict:
    """reference.attention's stages of the case's dtype-rounded inputs and the float64 output
    ("reference"), computed once per prepared call (cached on prepared)."""
    st = getattr(prepared, "_attention_stages", None)
    if st is None:
        args, kw = reference_args(prepared.inputs_f64, spec)
        st = attention.stages(*args, **kw)
        st["reference"] = attention.forward(*args, **kw, backend="cpu")
        prepared._attention_stages = st
    return st
