"""The zoo's committed cases: for every zoo model a family reads, a small certified group stored in
vectors/ like the catalog's, with ids that no seed changes: ``<protocol>/<model>/<test>``, or
``<protocol>/<model>-<layer kind>/<test>`` for a model with several RoPEs (reference.zoo.cases's
``group_name``, as ``--model`` names its seeded cases) (issue 27).

A family opts in with ``committed(setting, protocol) -> [TestGroupSpec]`` in its
``model_cases`` module (beside ``groups``, the seeded cases of ``--model``): written out (RoPE's),
or ``committed = seedless(groups)``, its model groups without the tests the seed draws; ``merge``
adds these groups to the family's catalog (reference.golden.catalog), so adding a family edits
nothing here.
A model whose config the family cannot read (the reader's ConfigError, which ``--model`` reports)
has no committed group; the family's reader tests name each such record.

A catalog group of the same name (RoPE's ``gpt-j-6b`` existed before the zoo) takes the tests
it lacks when its parameters are the model's; other parameters under one name are an error, not
a silent choice.
"""

from __future__ import annotations

import functools
from dataclasses import replace

from reference import families, zoo
from reference.golden.catalog import GroupSpec
from reference.golden.fresh import Draw
from reference.zoo.cases import group_name


@functools.lru_cache(maxsize=None)
def groups(family: str) -> tuple:
    """(GroupSpec, ...) of the committed cases of every zoo model ``family`` reads, by model name.
    Cached: the records are package data, and the catalog (every ``all_groups``) and each
    ``--model`` run ask for them."""
    reader = families.part(family, "model_config")
    maker = families.part(family, "model_cases")
    if reader is None or not hasattr(maker, "committed"):
        return ()
    out = []
    for name in zoo.names():
        record = zoo.load(name)
        try:
            found = reader.settings(record["config"]) or ()
        except reader.ConfigError:
            continue
        source = record["source"]["url"]
        for setting in found:
            group = group_name(name, setting.kind)
            for protocol in reader.PROTOCOLS:
                test_groups = tuple(replace(t, source=source) for t in maker.committed(setting, protocol))
                if test_groups:
                    out.append(GroupSpec(protocol, group, f"The zoo's {name} "
                                         + (f"({setting.kind} layers) " if setting.kind != "all" else "")
                                         + f"at its recorded configuration ({source}).", test_groups))
    return tuple(out)


def seedless(groups_of, drawn=("drawn",)):
    """A ``committed(setting, protocol)`` made of a family's ``groups_of(setting, draw, protocol)``
    without the tests named in ``drawn``. What is left must not depend on the draw: it is built from
    two seeds and a difference is a ValueError (a family whose other tests draw too cannot use it)."""

    def committed(setting, protocol: str) -> list:
        one, two = (groups_of(setting, Draw(seed, f"{protocol}/committed"), protocol) for seed in (0, 1))
        kept = [replace(tg, tests=tuple(t for t in tg.tests if t.name not in drawn)) for tg in one]
        if kept != [replace(tg, tests=tuple(t for t in tg.tests if t.name not in drawn)) for tg in two]:
            raise ValueError(f"{protocol}: tests other than {list(drawn)} change with the seed; they cannot be committed")
        return [tg for tg in kept if tg.tests]

    return committed


def two_heads(test_groups: list) -> list:
    """``test_groups`` with every test's ``heads`` at most 2: a committed case keeps the model's
    positions and parameters, and its size stays small (every head turns alike)."""
    return [replace(tg, tests=tuple(replace(t, heads=min(t.heads, 2)) for t in tg.tests)) for tg in test_groups]


def merge(catalog: list, committed: list) -> list:
    """``catalog`` then the ``committed`` groups; a committed group whose key the catalog has is
    folded into it (the tests the catalog group lacks), ValueError when the parameters differ."""
    out = list(catalog)
    index = {g.key: i for i, g in enumerate(out)}
    for group in committed:
        if group.key not in index:
            out.append(group)
            continue
        old = out[index[group.key]]
        (mine,) = group.test_groups
        if [tg.params for tg in old.test_groups] != [mine.params]:
            raise ValueError(f"{group.key}: the catalog's group and the zoo's model have one name and "
                             "different parameters")
        have = {t.name for tg in old.test_groups for t in tg.tests}
        extra = tuple(t for t in mine.tests if t.name not in have)
        merged = replace(old.test_groups[0], tests=old.test_groups[0].tests + extra)
        out[index[group.key]] = replace(old, test_groups=(merged,))
    return out
