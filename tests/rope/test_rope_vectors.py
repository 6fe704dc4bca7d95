"""RoPE's vector catalog (reference/rope/vectors/): flags that say what a case tests."""

from reference.golden import catalog, store


def test_layout_flags_only_where_the_layouts_differ():
    """Audit fault: the r = 2 worked examples carried HalfSplit / Interleaved flags, but one pair
    is the same in both layouts. A layout flag now needs r >= 4; r = 2 says SinglePair."""
    seen = 0
    for group in catalog.select("rope"):
        for tg in group.test_groups:
            if "rotary_dim" not in tg.params:
                continue  # rope.cp_positions: integer positions, no rotation
            for test in tg.tests:
                layout_flags = {"HalfSplit", "Interleaved"} & set(test.flags)
                if tg.params["rotary_dim"] == 2:
                    seen += 1
                    assert not layout_flags and "SinglePair" in test.flags, test.name
                elif group.protocol == "rope.apply":
                    assert len(layout_flags) == 1, test.name
    assert seen == 3  # pair-2-3-m1 in both layouts, and the cache's m1-d2
    for case_id in ("rope.apply/worked-example/pair-2-3-m1", "rope.apply/worked-example/pair-2-3-m1-interleaved"):
        assert "SinglePair" in store.get_case(case_id).flags


def test_offset_cases_have_a_row_0_that_is_not_arange():
    """So that 'row 0's positions for every row' and 'arange(seq) used' are different faults."""
    import numpy as np

    for case in store.iter_cases("rope.apply"):
        if {"RowOffsets", "LeftPadding"} & set(case.flags):
            pos = case.arrays["positions"]
            assert not np.array_equal(pos[0], np.arange(pos.shape[1])), case.id


def test_the_worked_example_stores_the_nearest_double():
    """Audit fault: 0.1.0 stored -1.4438083426874098 for 2 cos 1 - 3 sin 1, 1.45 ulp off."""
    import mpmath

    from reference.golden import certify

    case = store.get_case("rope.apply/worked-example/pair-2-3-m1")
    with mpmath.workprec(300):
        exact = (2 * mpmath.cos(1) - 3 * mpmath.sin(1), 2 * mpmath.sin(1) + 3 * mpmath.cos(1))
        want = [certify.nearest_double(v) for v in exact]
    assert case.arrays["expected"].ravel().tolist() == want
    assert want[0] != -1.4438083426874098
