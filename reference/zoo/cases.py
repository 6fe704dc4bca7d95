"""A model's cases: drawn for its configuration from a seed, computed by the reference on the spot.

``cases(config, model, seed)`` reads the config (reference.zoo.plan) and asks each family that
reads it for its test groups (``reference/<family>/model_cases.py``: ``groups(setting, draw)``).
Case ids are ``<protocol>/<group>/<test>`` (``group_name``: the model, or the model and its layer
kind for a model with several RoPEs: ``gemma-3-12b-sliding-attention``); they name what was drawn,
the seed draws the values (as fresh cases do, reference.golden.fresh).
"""

from __future__ import annotations

from reference import families
from reference.golden.fresh import Draw, computed_cases
from reference.zoo.plan import plan

FLAG = "Model"


def group_name(model: str, kind: str) -> str:
    """The case group of one model's setting: ``model``, or ``model-<kind>`` for a layer kind
    (its underscores as hyphens: group names are file names in vectors/, reference.zoo.vectors)."""
    return model if kind == "all" else f"{model}-{kind.replace('_', '-')}"


def cases(config: dict, model: str, seed: int, backend: str = "cpu", only: str | None = None) -> dict:
    """{protocol: [GoldenCase]} for every protocol the config implies (``only``: that one's, the
    others keyed with no cases); ConfigError (one line) for a config posref cannot read."""
    out = {}
    for protocol, settings in plan(config).items():
        if only is not None and protocol != only:
            out[protocol] = []
            continue
        maker = families.part(protocol.split(".", 1)[0], "model_cases")
        if maker is None:
            continue
        for setting in settings:
            group = group_name(model, setting.kind)
            draw = Draw(seed, f"{protocol}/{group}")
            out.setdefault(protocol, []).extend(computed_cases(
                protocol, maker.groups(setting, draw, protocol), group=group, inputs_group=f"{group}-{int(seed)}",
                flag=FLAG, backend=backend))
    return out
