"""Grading at a model's configuration: ``--model NAME`` (a zoo record) or ``--model-config FILE``
(a Hugging Face ``config.json``), issue 27.

The config is read by the families (reference.zoo.plan: one error naming the field posref cannot
read, never a silent default) and the cases are drawn for it from the run's seed and computed by
the reference on the spot (reference.zoo.cases): the model's own head size, rotary fraction, pair
layout, base, scaling, head count and context, at the positions that break real ports. The report
names the model (``Report.model``) beside the suite version, so that a review can cite
"posref 0.5.0, model llama-3.1-8b, case rope.apply/llama-3.1-8b/decode-131071".
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

from conformance.errors import UsageError, did_you_mean

MAX_CONFIG_BYTES = 16 << 20  # a config.json is kilobytes; LongRoPE's factor lists included


@dataclass(frozen=True)
class Model:
    name: str  # what case ids carry: the zoo name, or the config's file stem
    config: dict
    described: dict  # Report.model: {"name", "source"} or {"name", "config", "sha256"}


def resolve(name=None, config_path=None) -> Model:
    """The model of ``--model NAME`` or ``--model-config FILE``; UsageError (one line) for an
    unknown name or a file that is not a JSON object."""
    from reference import zoo

    if name is not None and config_path is not None:
        raise UsageError("--model and --model-config name one model each: give one of them")
    if name is not None:
        if name not in zoo.names():
            raise UsageError(f"--model: no model {name!r} in the zoo{did_you_mean(name, zoo.names())} "
                             "(`posref models` lists them; --model-config FILE reads a config.json)")
        record = zoo.load(name)
        return Model(name, record["config"], {"name": name, "source": record["source"]["url"]})
    try:
        with open(config_path, "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"--model-config: cannot read {config_path}: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise UsageError(f"--model-config: {config_path} is larger than {MAX_CONFIG_BYTES >> 20} MiB: not a config.json")
    try:
        config = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"--model-config: {config_path} is not JSON: {exc}") from None
    if not isinstance(config, dict):
        raise UsageError(f"--model-config: {config_path} holds a {type(config).__name__}, not a config object")
    stem = os.path.splitext(os.path.basename(config_path))[0]
    label = "".join(c if c.isalnum() or c in "._-" else "-" for c in stem) or "config"
    return Model(label, config, {"name": label, "config": os.path.abspath(config_path),
                                 "sha256": hashlib.sha256(data).hexdigest()})


def model_cases(model: Model, protocol: str, seed: int, directory=None) -> tuple:
    """(committed, drawn): a zoo model's stored, certified cases of ``protocol`` (the groups
    reference.zoo.vectors commits for it: ids no seed changes, ``rope.apply/codellama-7b/decode-16383``;
    none for a --model-config file, whose name is only its file's), then the cases drawn from ``seed``
    (``cases``) but those whose id a committed case has."""
    from reference.golden import store
    from reference.zoo import vectors as zoo_vectors

    drawn = cases(model, protocol, seed)
    if "source" not in model.described:
        return [], drawn
    groups = {c.id.rsplit("/", 1)[0] for c in drawn}
    keys = {g.key for g in zoo_vectors.groups(protocol.split(".", 1)[0])} & groups
    committed = [c for c in store.iter_cases(protocol, directory) if c.id.rsplit("/", 1)[0] in keys]
    ids = {c.id for c in committed}
    return committed, [c for c in drawn if c.id not in ids]


def cases(model: Model, protocol: str, seed: int) -> list:
    """The GoldenCases of ``protocol`` drawn for the model from ``seed``; UsageError when the
    config cannot be read or does not imply ``protocol``."""
    from reference.zoo.cases import cases as model_cases
    from reference.zoo.plan import ConfigError

    where = f"--model {model.name}" if "source" in model.described else f"--model-config {model.described['config']}"
    try:
        by_protocol = model_cases(model.config, model.name, seed, only=protocol)
    except ConfigError as exc:
        raise UsageError(f"{where}: {exc}") from None
    if protocol not in by_protocol:
        implied = ", ".join(by_protocol) or "no protocol posref grades at a model's configuration yet"
        raise UsageError(f"{where}: the model's configuration implies {implied}, not {protocol}")
    return by_protocol[protocol]


def reading_notes(model: Model, protocol: str) -> list:
    """What the families' readers said about the config for ``protocol``: a default taken, a field
    read but not graded by it (each Setting's ``notes``), once each, in order."""
    from reference.zoo.plan import plan

    out = []
    for setting in plan(model.config).get(protocol, ()):
        out += [n for n in getattr(setting, "notes", ()) if n not in out]
    return out
