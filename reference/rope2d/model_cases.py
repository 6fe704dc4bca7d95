"""The rope2d.apply cases of one model's vision 2-D RoPE (a reference.rope2d.model_config Setting),
drawn from a seed, at the encoder's own head size, base, pairs, axis order and number of heads.

Qwen-VL vision encoders: every token is one patch at (row h, column w) of its image's patch grid,
in the order the encoder holds them (merge x merge blocks, row-major inside each block, as
transformers' ``get_vision_position_ids``), no CLS token:

- ``image-drawn``: a non-square image of 1 x 2 or 2 x 1 merge blocks (drawn);
- ``image-448-last-blocks``: the last two merge blocks of a 448 x 448 px image;
- ``largest-last-blocks``: the last two merge blocks of the largest image (128 x 128 tokens, the
  processor's max_pixels): rows and columns up to 128 merge - 1;
- ``video-2-frames``: a video grid of two temporal patches of one merge block each: the same (h, w)
  again in the second frame (the encoder's rotary has no temporal axis).

RoPE-ViT: a CLS token (not rotated) and patches at (column x, row y) of the grid:

- ``grid-<n>x<n>-first-row`` / ``grid-<n>x<n>-last-row``: the training resolution's first and
  last patch rows (img_size / patch_size patches a side);
- ``resolution-drawn``: the last eight patches at a drawn larger resolution (RoPE-ViT's point: it
  extrapolates past the training grid);
- ``drawn``: eight drawn distinct patches of the training grid.

RoPE-Mixed (rope_mixed): the same cases with per-head frequencies drawn as RoPE-ViT's
``init_random_2d_freqs`` draws them at the model's theta: magnitudes theta^(-4k/d), k < d/4, turned
by a random angle per head (x and y parts cos / sin of it, the second half a quarter turn on).
"""

from __future__ import annotations

import math

from reference.golden.catalog import TestGroupSpec
from reference.rope2d.vectors import GridTest
from reference.zoo.vectors import seedless, two_heads

LARGEST_TOKENS = 128  # language-model tokens a side of the largest Qwen-VL image (max_pixels (128 x 28)^2)
VIT_RESOLUTIONS = (288, 320, 384, 448, 512)  # RoPE-ViT's multi-resolution evaluation sizes
ANGLE_STEPS = 2**20  # a head's drawn rotation angle: a multiple of 2 pi / 2^20


def groups(setting, draw, protocol: str = "rope2d.apply") -> list:
    """[TestGroupSpec] of rope2d.apply for ``setting`` (a Setting), coordinates drawn from ``draw``."""
    if setting.params["cls_tokens"] == 0:  # a Qwen-VL encoder (RoPE-ViT has its CLS token)
        tests, params = _qwen_tests(setting, draw), setting.params
    else:
        params = dict(setting.params)
        if setting.mixed:
            params["freqs"] = mixed_freqs(setting.params["head_dim"], setting.heads, setting.theta, draw)
        tests = _vit_tests(setting, draw)
    return [TestGroupSpec(params, tuple(tests))]


def mixed_freqs(head_dim: int, heads: int, theta: float, draw) -> list:
    """[2][heads][head_dim/2] (f_x, f_y) as RoPE-ViT's init_random_2d_freqs: per head a drawn angle
    a, f_x = [m cos a, m cos(a + pi/2)], f_y = [m sin a, m sin(a + pi/2)], m_k = theta^(-4k/d)."""
    mag = [theta ** (-4 * k / head_dim) for k in range(head_dim // 4)]
    fx, fy = [], []
    for _ in range(heads):
        a = 2 * math.pi * draw.integer(0, ANGLE_STEPS - 1) / ANGLE_STEPS
        fx.append([m * math.cos(a) for m in mag] + [m * math.cos(math.pi / 2 + a) for m in mag])
        fy.append([m * math.sin(a) for m in mag] + [m * math.sin(math.pi / 2 + a) for m in mag])
    return [fx, fy]


def merge_order(rows: int, cols: int, merge: int) -> list:
    """(x, y) = (column, row) of a rows x cols patch grid in the encoder's order: merge x merge
    blocks row-major, row-major inside each block (transformers' get_vision_position_ids)."""
    return [(bx * merge + j, by * merge + i) for by in range(rows // merge) for bx in range(cols // merge)
            for i in range(merge) for j in range(merge)]


def _grid(name, comment, coords, heads, flags=("Qwen2VLVision",), cls=0) -> GridTest:
    return GridTest(name, comment, tuple(flags), cls_tokens=cls, heads=heads,
                    coords=(tuple(((-1, -1),) * cls + tuple(coords)),))


def _qwen_tests(setting, draw) -> list:
    m, p, heads = setting.merge, setting.patch, setting.heads
    rb = draw.integer(1, 2)
    cb = 3 - rb  # never square: swapped axes show
    drawn = merge_order(rb * m, cb * m, m)
    side = setting.grid
    tail = merge_order(side, side, m)[-2 * m * m:]
    far = LARGEST_TOKENS * m
    far_tail = merge_order(far, far, m)[-2 * m * m:]
    frame = merge_order(m, m, m)
    return [
        _grid("image-drawn", f"A drawn image of {rb * m} x {cb * m} patches ({rb * m * p} x {cb * m * p} px), in merge-block "
              f"order: {drawn}.", drawn, heads, ("Qwen2VLVision", "NonSquare")),
        _grid(f"image-{side * p}-last-blocks", f"The last two merge blocks of a {side * p} x {side * p} px image "
              f"({side} x {side} patches): {tail}.", tail, heads),
        _grid("largest-last-blocks", f"The last two merge blocks of the largest image ({far} x {far} patches, the "
              f"processor's max_pixels): {far_tail}.", far_tail, heads),
        _grid("video-2-frames", f"A video of two temporal patches of one {m} x {m} block: the same (h, w) in both "
              "frames.", frame + frame, heads),
    ]


def _vit_tests(setting, draw) -> list:
    n, heads = setting.grid, setting.heads
    first = [(x, 0) for x in range(n)]
    last = [(x, n - 1) for x in range(n)]
    px = draw.choice(VIT_RESOLUTIONS)
    big = px // setting.patch
    far = [(x, big - 1) for x in range(big - 8, big)]
    picked = sorted(set(draw.integers(0, n * n - 1, 8)))
    drawn = [(k % n, k // n) for k in picked]
    return [
        _grid(f"grid-{n}x{n}-first-row", f"A CLS token and the first row of the {n} x {n} training grid (y = 0).",
              first, heads, ("RopeVit",), 1),
        _grid(f"grid-{n}x{n}-last-row", f"A CLS token and the last row of the {n} x {n} training grid (y = {n - 1}).",
              last, heads, ("RopeVit",), 1),
        _grid("resolution-drawn", f"A CLS token and the last eight patches at {px} px ({big} x {big} patches, past "
              f"the training grid): {far}.", far, heads, ("RopeVit",), 1),
        _grid("drawn", f"A CLS token and drawn patches of the training grid: {drawn}.", drawn, heads, ("RopeVit",), 1),
    ]


_undrawn = seedless(groups, drawn=("image-drawn", "resolution-drawn", "drawn"))


def committed(setting, protocol: str = "rope2d.apply") -> list:
    """The committed, certified cases of a zoo model (reference.zoo.vectors): the tests no seed
    draws, at two heads (every head turns alike; the drawn cases run the model's count). None for
    RoPE-Mixed: its per-head frequencies are drawn (they are the model's learned
    parameters, which a record does not hold)."""
    return [] if setting.mixed else two_heads(_undrawn(setting, protocol))
