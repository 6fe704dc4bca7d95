"""The zoo's committed groups for every family that commits them (reference/zoo/vectors.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conformance.model import model_cases, resolve
from reference import families, zoo
from reference.golden import store
from reference.golden import catalog
from reference.zoo import vectors as zoo_vectors
from reference.zoo.cases import group_name


def _committing():
    return [f for f in families.names() if hasattr(families.part(f, "model_cases"), "committed")]


def test_rope_alibi_and_t5_commit_cases():
    assert {"rope", "alibi", "t5"} <= set(_committing())


@pytest.mark.parametrize("family", ["alibi", "t5"])
def test_every_model_the_family_reads_is_stored(family):
    reader = families.part(family, "model_config")
    stored = {c.id.rsplit("/", 1)[0] for protocol in reader.PROTOCOLS for c in store.iter_cases(protocol)}
    read = 0
    for name in zoo.names():
        for setting in reader.settings(zoo.load(name)["config"]) or ():
            read += 1
            assert {f"{p}/{group_name(name, setting.kind)}" for p in reader.PROTOCOLS} <= stored, name
    assert read >= 4


def test_model_mode_grades_the_stored_cases_first_and_draws_the_rest():
    committed, drawn = model_cases(resolve("bloom-176b"), "alibi.bias", 3)
    assert [c.id for c in committed] == ["alibi.bias/bloom-176b/prefill-8", "alibi.bias/bloom-176b/decode-1048575"]
    assert [c.id for c in drawn] == ["alibi.bias/bloom-176b/drawn"]


def test_seedless_refuses_a_test_that_changes_with_the_seed():
    def groups(setting, draw, protocol):
        return [catalog.TestGroupSpec({}, (replace(setting, name=f"t-{draw.integer(0, 10**9)}"),))]

    from reference.alibi.vectors import AlibiTest

    with pytest.raises(ValueError, match="change with the seed"):
        zoo_vectors.seedless(groups)(AlibiTest("x", "", ()), "alibi.bias")


def test_no_model_group_takes_the_name_of_a_catalog_group_of_other_content():
    """A model's case ids (committed or drawn) never equal a stored id holding something else:
    where the catalog has a group under the model's name, it is the model's committed group."""
    stored = {c.id.rsplit("/", 1)[0] for c in store.iter_cases()}
    for family in families.names():
        reader = families.part(family, "model_config")
        if reader is None:
            continue
        committed = {g.key for g in zoo_vectors.groups(family)}
        for name in zoo.names():
            try:
                found = reader.settings(zoo.load(name)["config"]) or ()
            except reader.ConfigError:
                continue
            for setting in found:
                for protocol in reader.PROTOCOLS:
                    key = f"{protocol}/{group_name(name, setting.kind)}"
                    assert key not in stored or key in committed, key
