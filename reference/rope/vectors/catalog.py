"""RoPE's catalog: which cases exist, their parameters and why (the comment and flags of each test).
Groups per protocol: rope.apply (worked examples, model configurations, head sizes), rope.cache,
rope.frequencies, the scaled configurations of each, rope.apply_qk, then rope.module's
(module_vectors.py) and rope.cp_positions's (cp_vectors.py). ``groups()`` lists them in that fixed order.
"""

from __future__ import annotations

import math
from dataclasses import replace

from reference.golden.catalog import GroupSpec, TestGroupSpec
from reference.rope import cp_vectors, fp8_vectors, kv_write_vectors, module_vectors, qk_norm_vectors

from .models import HEAD_DIMS, MODELS, SCALED_MODELS, UNCOMMON_HEAD_DIMS, model_flags, scaling_flags
from .records import LAYOUT_FLAG, QkTest, RopeTest, rope_params


# --------------------------------------------------------------------------------------------
# Position patterns (one function per pattern; each returns a RopeTest)

def prefill(n=8, extra=""):
    return RopeTest(
        f"prefill-{n}",
        f"Prompt of {n} tokens at positions 0..{n - 1}; position 0 must be the identity.{extra}",
        ("Prefill",),
        (tuple(range(n)),),
    )


def decode(position, extra=""):
    return RopeTest(
        f"decode-{position}",
        f"One decode step with a KV cache: a single token at position {position}.{extra}",
        ("Decode",) + (("LongContext",) if position >= 2**17 else ()),
        ((position,),),
        heads=4,
    )


def _hf_left_padded(length, pads):
    # transformers: position_ids = attention_mask.cumsum(-1) - 1, then masked_fill(mask == 0, 1)
    return tuple(1 if j < pads else j - pads for j in range(length))


def left_padded():
    # Row 0 is not arange(seq): code that broadcasts row 0's positions to the batch and code that
    # ignores the positions (arange) then fail differently, and each gets its own diagnosis.
    rows = tuple(_hf_left_padded(6, p) for p in (2, 0, 4))
    return RopeTest(
        "left-padded",
        "Batch of 3 left-padded rows (2, 0 and 4 pad tokens) with Hugging Face position ids: "
        f"{[list(r) for r in rows]}. Real tokens start at different offsets; pads repeat position 1.",
        ("LeftPadding", "RepeatedPositions"),
        rows,
    )


def row_offsets(starts=(3, 100, 4093)):  # row 0 is not arange(seq), see left_padded
    rows = tuple(tuple(range(s, s + 4)) for s in starts)
    return RopeTest(
        "row-offsets",
        f"Three rows continuing from different cache lengths {list(starts)} (continuous batching): "
        "each row must use its own positions.",
        ("RowOffsets",),
        rows,
    )


def repeated():
    row = (0, 3, 3, 3, 9, 9)
    return RopeTest(
        "repeated",
        f"Positions {list(row)}: a position repeated within a row must give each token the same "
        "rotation (no running counter).",
        ("RepeatedPositions",),
        (row,),
    )


def around(power):
    p = 2**power
    base_rows = [p - 2, p - 1, p, p + 1]
    flags = {11: ("Float16IntegerLimit",), 16: ("Float16Overflow",), 20: ("LongContext",),
             24: ("Float32IntegerLimit", "LongContext")}[power]
    why = {
        11: "float16 holds every integer only up to 2048; 2049 is the first it cannot.",
        16: "65504 is the largest finite float16 and 65520 already rounds to inf; float16 "
        "positions overflow here.",
        20: "a long-context position: rounding m * theta to float32 moves the angle by up to "
        "about 2^-24 * m * theta, a sixteenth of a radian for theta_0 = 1.",
        24: "float32 holds every integer only up to 2^24; 2^24 + 1 is the first it cannot. "
        "Angles need extended precision for the float64 reference to stay within 1-2 ulp.",
    }[power]
    if power == 16:
        base_rows = [65503, 65504, p - 1, p, p + 1]
    return RopeTest(
        f"around-2p{power}",
        f"Positions {base_rows} around 2^{power}: {why}",
        flags,
        (tuple(base_rows),),
    )


def _configured(tests, layout, *extra_flags):
    """The pattern tests with the configuration's flags appended."""
    return tuple(replace(t, flags=t.flags + extra_flags + (LAYOUT_FLAG[layout],)) for t in tests)


# --------------------------------------------------------------------------------------------
# Model groups

def _model_group(protocol, name, tests):
    model = MODELS[name]
    layout = model["params"]["layout"]
    return GroupSpec(
        protocol,
        name,
        model["source"],
        (TestGroupSpec(model["params"], _configured(tests, layout, *model_flags(name)),
                       model["source"]),),
    )


# --------------------------------------------------------------------------------------------
# Worked examples

_PAIR_TRUE = (2 * math.cos(1.0) - 3 * math.sin(1.0), 2 * math.sin(1.0) + 3 * math.cos(1.0))
PAIR_COMMENT = (
    "The pair [2, 3] rotated at m = 1 with d = 2 (theta_0 = 1): [2 cos 1 - 3 sin 1, "
    f"2 sin 1 + 3 cos 1] = [{_PAIR_TRUE[0]:.4f}, {_PAIR_TRUE[1]:.4f}]. The source document "
    "misprints this as [-1.6245, 3.0252] (an arithmetic error); the expected values here are "
    "the true ones."
)
D512_COMMENT = (
    "theta_i = 10000^(-2i/512) for d = 512: theta_1 = 10000^(-2/512) = 0.96466 and theta_255 "
    "= 10000^(-510/512) = 1.0366e-4. The source document misprints theta_255 as about 1.58e-5; "
    "the expected values here are the true ones."
)
D512_APPLY_COMMENT = (
    "d = 512 (256 pairs) at positions 0, 1, 2: the worked example's frequency ladder, "
    "theta_1 = 0.96466 and theta_255 = 1.0366e-4 (the source misprints theta_255 as 1.58e-5)."
)


def _pair_test(name, layout):
    # One pair (r = 2) is the same in both layouts, so neither layout flag applies: the two ids
    # exist so that an implementation fixed to either layout grades the example.
    return RopeTest(name, PAIR_COMMENT + f" Stored under spec.layout = {layout!r}; with a single pair both "
                    "layouts pair (x0, x1).", ("WorkedExample", "SourceMisprint", "SinglePair"),
                    ((1,),), heads=1, x=((((2.0, 3.0),),),))


WORKED_APPLY = GroupSpec(
    "rope.apply",
    "worked-example",
    "Hand-checkable examples from the RoFormer formulas, with the values the seed document "
    "misprints recomputed.",
    (
        TestGroupSpec(rope_params(2, 1e4, "half"), (_pair_test("pair-2-3-m1", "half"),)),
        TestGroupSpec(rope_params(2, 1e4, "interleaved"),
                      (_pair_test("pair-2-3-m1-interleaved", "interleaved"),)),
        TestGroupSpec(
            rope_params(512, 1e4, "half"),
            (RopeTest("d512", D512_APPLY_COMMENT, ("WorkedExample", "SourceMisprint", "HalfSplit"),
                      ((0, 1, 2),), heads=1),),
        ),
    ),
)


# --------------------------------------------------------------------------------------------
# rope.apply


def _apply_groups():
    groups = [WORKED_APPLY]
    groups.append(_model_group("rope.apply", "llama2-d128", (
        prefill(), decode(4095, " The last position of Llama-2's 4096-token context."),
        decode(8191, " Twice Llama-2's context: positions past training are still well defined."),
        left_padded(), row_offsets(), repeated(),
        around(11), around(16), around(20), around(24),
    )))
    groups.append(_model_group("rope.apply", "llama2-d128-meta", (
        prefill(), decode(4095), left_padded(), around(16), around(24),
    )))
    groups.append(_model_group("rope.apply", "llama3-d128", (
        prefill(), decode(8191, " The last position of Llama-3's 8192-token context."),
        decode(131071, " The last position of a 128K context (Llama-3.1 length)."),
        row_offsets(), around(20), around(24),
    )))
    groups.append(_model_group("rope.apply", "codellama-d128-meta", (
        prefill(), decode(16383, " The last position of Code Llama's 16384-token training context."),
        decode(100000, " Code Llama's extrapolation range (up to 100K tokens, the reason for base 1e6)."),
        left_padded(), around(16), around(20),
    )))
    groups.append(_model_group("rope.apply", "qwen2-d128", (
        prefill(), decode(131071, " The last position of a 128K context."),
        left_padded(), around(16), around(24),
    )))
    groups.append(_model_group("rope.apply", "gpt-neox-20b", (
        prefill(), decode(2047, " The last position of GPT-NeoX-20B's 2048-token context."),
        left_padded(), around(11), around(16), around(24),
    )))
    groups.append(_model_group("rope.apply", "gpt-j-6b", (
        prefill(), decode(2047, " The last position of GPT-J's 2048-token context."),
        row_offsets(), around(11), around(24),
    )))
    groups.append(_head_dims_group((prefill(), around(16))))
    return groups


def _head_dims_group(tests):
    """rope.apply/head-dims: ``tests`` at every head size of HEAD_DIMS, in both layouts."""
    test_groups = []
    for d, why in HEAD_DIMS.items():
        for layout, layout_flag in LAYOUT_FLAG.items():
            flags = (layout_flag,) + (("UncommonHeadDim",) if d in UNCOMMON_HEAD_DIMS else ())
            configured = tuple(replace(t, name=f"d{d}-{layout}-{t.name}", flags=t.flags + flags,
                                       comment=f"{why}, {layout} layout, base 10000. {t.comment}")
                               for t in tests)
            test_groups.append(TestGroupSpec(rope_params(d, 1e4, layout), configured))
    return GroupSpec("rope.apply", "head-dims",
                     "Full rotary at the head sizes in common use, in both layouts.",
                     tuple(test_groups))


# --------------------------------------------------------------------------------------------
# rope.cache: cos and sin per pair, independent of layout


def _cache_groups():
    worked = GroupSpec(
        "rope.cache", "worked-example",
        "The cos/sin table of the worked example.",
        (TestGroupSpec(rope_params(2, 1e4, "half"), (RopeTest(
            "m1-d2", "d = 2 at m = 1: cos = cos 1 = 0.5403, sin = sin 1 = 0.8415 (the rotation "
            "behind the worked example [2, 3] -> [-1.4438, 3.3038]; the source misprints it).",
            ("WorkedExample", "SourceMisprint", "SinglePair"), ((0, 1),)),)),),
    )
    return [
        worked,
        _model_group("rope.cache", "llama2-d128", (prefill(), decode(4095), around(16), around(24))),
        _model_group("rope.cache", "llama3-d128", (decode(131071), around(20))),
        _model_group("rope.cache", "gpt-neox-20b", (prefill(), left_padded())),
        _model_group("rope.cache", "gpt-j-6b", (prefill(), around(11))),
    ]



# --------------------------------------------------------------------------------------------
# rope.frequencies


def frequency_test(name, comment, flags, seq_len):
    return RopeTest(name, comment, ("FrequencyTable",) + flags, seq_len=seq_len)


def _frequency_groups():
    groups = [GroupSpec(
        "rope.frequencies", "worked-example", "The d = 512 frequency ladder of the worked example.",
        (TestGroupSpec(rope_params(512, 1e4, "half"), (frequency_test(
            "d512-thetas", D512_COMMENT, ("WorkedExample", "SourceMisprint"), 512),)),),
    )]
    for name, model in MODELS.items():
        if name in ("llama2-d128-meta", "codellama-d128-meta"):
            continue  # same frequencies as llama2-d128 and qwen2-d128 (the pair layout does not matter)
        p = model["params"]
        comment = (f"inv_freq for rotary_dim {p['rotary_dim']}, base {p['base']:g}; "
                   "no scaling, so attention_factor is 1.")
        groups.append(GroupSpec("rope.frequencies", name, model["source"], (TestGroupSpec(
            p, (frequency_test("inv-freq", comment, model_flags(name), model["context"]),),
            model["source"]),)))
    test_groups = []
    for d, why in HEAD_DIMS.items():
        flags = ("UncommonHeadDim",) if d in UNCOMMON_HEAD_DIMS else ()
        test_groups.append(TestGroupSpec(rope_params(d, 1e4, "half"), (frequency_test(
            f"d{d}", f"{why}: inv_freq for base 10000.", flags, 4096),)))
    groups.append(GroupSpec("rope.frequencies", "head-dims",
                            "Frequency ladders at the head sizes in common use.", tuple(test_groups)))
    return groups



# --------------------------------------------------------------------------------------------
# Scaled RoPE: the groups of SCALED_MODELS

def _scaled_group(protocol, name, tests):
    model = SCALED_MODELS[name]
    layout = model["params"]["layout"]
    return GroupSpec(protocol, name, model["source"], (TestGroupSpec(
        model["params"], _configured(tests, layout, *scaling_flags(name)), model["source"]),))


def _scaled_position_tests(name):
    """prefill, a long decode and, for seq_len-dependent types, one case per seq_len (the
    positions fit below it, seq_len given explicitly)."""
    seq_lens = SCALED_MODELS[name]["seq_lens"]
    if seq_lens == (None,):
        decodes = SCALED_MODELS[name].get("decodes", (131071,))
        return (prefill(),) + tuple(decode(p, f" A {(p + 1) // 1024}K-context decode step, where scaling matters.")
                                    for p in decodes)
    tests = []
    for n in seq_lens:
        tests.append(replace(decode(n - 1, f" seq_len {n}."), name=f"decode-{n - 1}-seq{n}", seq_len=n))
    return tuple(tests)


def _scaled_groups():
    groups = [_scaled_group("rope.apply", name, _scaled_position_tests(name)) for name in SCALED_MODELS]
    # rope.cache and rope.frequencies do not depend on the pair layout: a model's other-layout
    # variant (same_tables_as) adds nothing there.
    tables = [name for name, model in SCALED_MODELS.items() if "same_tables_as" not in model]
    groups += [_scaled_group("rope.cache", name, _scaled_position_tests(name)) for name in tables]
    for name in tables:
        model = SCALED_MODELS[name]
        tests = tuple(frequency_test(f"inv-freq-seq{n}" if n else "inv-freq",
                                      f"inv_freq and attention_factor of {name}" + (f" at seq_len {n}." if n else "."),
                                      scaling_flags(name), n)
                      for n in model["seq_lens"])
        groups.append(GroupSpec("rope.frequencies", name, model["source"],
                                (TestGroupSpec(model["params"], tests, model["source"]),)))
    # The numerical snapshots of HF's tests/utils/test_modeling_rope_utils.py (dim 128, base 1e4,
    # factor 10, original 2048): the same configurations, certified here.
    hf = {"dynamic": {"rope_type": "dynamic", "factor": 10.0, "original_max_position_embeddings": 2048},
          "yarn": {"rope_type": "yarn", "factor": 10.0, "beta_fast": 32.0, "beta_slow": 1.0,
                   "original_max_position_embeddings": 2048},
          "llama3": {"rope_type": "llama3", "factor": 10.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 2048}}
    test_groups = tuple(TestGroupSpec(rope_params(128, 1e4, "half", scaling=sc), (frequency_test(
        f"{kind}-factor10", f"HF's {kind} snapshot: dim 128, base 10000, factor 10, original 2048"
        + (", seq_len 16384." if kind == "dynamic" else "."), ("Scaling",), 16384 if kind == "dynamic" else None),))
        for kind, sc in hf.items())
    groups.append(GroupSpec("rope.frequencies", "hf-snapshots", "The configurations of HF's RoPE "
                            "numerical tests (test_modeling_rope_utils.py).", test_groups))
    return groups


# --------------------------------------------------------------------------------------------
# rope.apply_qk: q and k rotated in one call, k with fewer heads (grouped-query attention)

def _qk_tests():
    rows = tuple((p,) for p in (4095, 131071, 17))
    return (
        QkTest("prefill-gqa4", "Prompt of 6 tokens, 8 query heads sharing 2 KV heads (groups of 4), as "
               "Llama-3-8B's 32 / 8.", ("Prefill", "GroupedQuery"), (tuple(range(6)),), heads=8, kv_heads=2),
        QkTest("decode-mqa-b3", f"Batched decode, one token per row at {[r[0] for r in rows]}, 4 query heads "
               "and one KV head (multi-query): a fused kernel that skips k when it has a single head fails.",
               ("Decode", "BatchedDecode", "GroupedQuery", "LongContext"), rows, heads=4, kv_heads=1),
        QkTest("left-padded-mqa", "Left-padded batch of 3 rows (HF position ids), 3 query heads, one KV head.",
               ("LeftPadding", "GroupedQuery"), tuple(_hf_left_padded(6, p) for p in (2, 0, 4)), heads=3,
               kv_heads=1),
    )


def _qk_groups():
    return [_model_group("rope.apply_qk", name, _qk_tests()) for name in ("llama3-d128", "llama2-d128-meta")]


def groups() -> list[GroupSpec]:
    """Every RoPE group, in a fixed order: rope.apply, rope.cache, rope.frequencies, then the
    scaled groups of each, then rope.apply_qk."""
    return (_apply_groups() + _cache_groups() + _frequency_groups() + _scaled_groups() + _qk_groups()
            + module_vectors.groups() + cp_vectors.groups() + cp_vectors.apply_groups()
            + kv_write_vectors.groups() + fp8_vectors.groups() + qk_norm_vectors.groups())
