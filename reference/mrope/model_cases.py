"""The mrope.positions and mrope.apply cases of one model's M-RoPE (a reference.mrope.model_config
Setting), drawn from a seed.

mrope.positions (get_rope_index's rule, cheap: integers only), sequences as the model's processor
lays them out: text, and images between <|vision_start|> and <|vision_end|> (two text tokens),
each image h x w language-model tokens = its patch grid over ``spatial_merge_size`` per side:

- ``image-448x448``: a drawn prompt, one 448 x 448 px image (the grid of a common resolution);
- ``images-drawn``: one to three images of drawn real resolutions (multiples of patch x merge,
  from the processor's minimum up to 1008 px a side), text between;
- ``image-wide``: a panorama (one token row, many columns): h and w far apart;
- ``batch-2``: two rows of the same length, text only and text with an image (each row its own
  running index).

Still images only (t = 1): the protocol's rule takes a video grid's frames at consecutive
temporal indices, which is Qwen2-VL's rule but not Qwen2.5-VL's (frames ``tokens_per_second``
apart) nor Qwen3-VL's (one block per frame with timestamps between); the mrope.apply ``video``
case below grades the temporal step itself.

mrope.apply, positions across the context L (max_position_embeddings) at the model's own head size,
base and section layout; x at the model's attention heads in ``prefill-8`` and ``batched-decode``
(a kernel that confuses the head axis with another shows there), at its key-value heads (the k
projection) elsewhere, to keep the golden reference's cost (about 70 us an output) to seconds:

- ``prefill-8``: text at 0..7 (t = h = w; 0 is the identity);
- ``text-drawn``: four text tokens drawn from [8, L - 1];
- ``powers-of-two``: text at 2^k - 1 and 2^k for k = 11, 16 below L (float16's integer limit and
  overflow);
- ``image-drawn``: text, a 2 x 3 image block and text, from a drawn start in the context;
- ``image-corner``: the last two tokens of the largest image (128 x 128 tokens, the processor's
  max_pixels), from a drawn start: t, h and w differ by up to 127;
- ``image-at-end``: an image block whose text ends at L - 1;
- ``video``: two video grid frames of 1 x 2 tokens, the temporal index stepping as the model's code
  does (1 per grid for Qwen2-VL, tokens_per_second for Qwen2.5-VL; Qwen3-VL: none, its frames are
  images with timestamps);
- ``decode-<L-1>``: the last position of the context;
- ``batched-decode``: three rows of one token each, a text token, an image token with t != h != w,
  and position L - 1.
"""

from __future__ import annotations

from reference.golden.catalog import TestGroupSpec
from reference.mrope.vectors import IndexTest, MropeTest, image_block
from reference.zoo.vectors import seedless, two_heads

MIN_SIDE, MAX_SIDE = 2, 36  # drawn image sides in tokens (56 to 1008 px at patch 14 and merge 2)
LARGEST = 128  # tokens a side of the largest image: max_pixels 12845056 = (128 x 28)^2 px
POWERS = (11, 16)


def groups(setting, draw, protocol: str = "mrope.apply") -> list:
    """[TestGroupSpec] of ``protocol`` for ``setting`` (a Setting), positions drawn from ``draw``."""
    if protocol == "mrope.positions":
        return [TestGroupSpec(setting.params, tuple(_positions_tests(setting, draw)))]
    return [TestGroupSpec(setting.params, tuple(_apply_tests(setting, draw)))]


def _image(types: list, grids: list, h: int, w: int):
    """Append one image of h x w tokens between its vision start and end tokens."""
    grids.append((1, h, w))
    types += [0] + [1] * (h * w) + [0]


def _positions_tests(setting, draw) -> list:
    side = setting.patch * setting.merge  # pixels a side of one language-model token
    tests = []
    types, grids, n = [0] * draw.integer(1, 40), [], 448 // side
    _image(types, grids, n, n)
    types += [0] * draw.integer(1, 20)
    tests.append(IndexTest(f"image-{n * side}x{n * side}", f"A drawn prompt of text, one {n * side} x {n * side} px "
                           f"image ({n} x {n} tokens: patches of {setting.patch} px merged {setting.merge} x "
                           f"{setting.merge}), text.",
                           ("ImageBlock",), (tuple(types),), tuple(grids)))
    types, grids = [0] * draw.integer(0, 10), []
    for _ in range(draw.integer(1, 3)):
        _image(types, grids, draw.integer(MIN_SIDE, MAX_SIDE), draw.integer(MIN_SIDE, MAX_SIDE))
        types += [0] * draw.integer(0, 12)
    tests.append(IndexTest("images-drawn", f"{len(grids)} image(s) of drawn resolutions {[g[1:] for g in grids]} "
                           "tokens, text between.", ("ImageBlock",), (tuple(types),), tuple(grids)))
    cols = draw.integer(40, 120)
    types, grids = [0] * 5, []
    _image(types, grids, 1, cols)
    types += [0] * 3
    tests.append(IndexTest("image-wide", f"A panorama of 1 x {cols} tokens ({side} x {cols * side} px): its w "
                           f"runs to start + {cols - 1} while t and h stay at start.", ("ImageBlock",),
                           (tuple(types),), tuple(grids)))
    h, w = draw.integer(2, 8), draw.integer(2, 8)
    row1, grids = [0] * 3, []
    _image(row1, grids, h, w)
    row1 += [0] * 4
    tests.append(IndexTest("batch-2", f"Two rows of {len(row1)} tokens: text only, and text with a {h} x {w} "
                           "image: each row runs its own index.", ("ImageBlock", "TextOnly"),
                           ((0,) * len(row1), tuple(row1)), tuple(grids)))
    return tests


def _text(positions) -> tuple:
    row = (tuple(positions),)
    return (row, row, row)


def _shifted(streams3, start: int) -> tuple:
    return tuple(tuple(tuple(v + start for v in row) for row in s) for s in streams3)


def _apply_tests(setting, draw) -> list:
    L, heads, kv = setting.max_positions, setting.heads, setting.kv_heads
    drawn = sorted(draw.integers(8, L - 1, 4))
    powers = [p for k in POWERS for p in (2**k - 1, 2**k) if 2**k < L]
    start = draw.integer(0, L - 16)
    corner = draw.integer(0, L - 2 * LARGEST)
    # the last two tokens of a LARGEST x LARGEST block starting at ``corner``: rows and columns 127, (126, 127)
    last = LARGEST - 1
    corner_streams = (((corner, corner),), ((corner + last, corner + last),), ((corner + last - 1, corner + last),))
    end_block = image_block(1, 2, 3, 2)  # text at 0, block at 1.., text up to 5: shift to end at L - 1
    end_shift = L - 1 - end_block[0][0][-1]
    mixed = (corner, corner + 5, corner + 9)  # an image token: t, h, w all different
    tests = [
        MropeTest("prefill-8", "Eight text tokens at 0..7 (t = h = w): position 0 is the identity.",
                  ("TextOnly",), _text(range(8)), heads),
        MropeTest("text-drawn", f"Four text tokens at drawn positions {drawn} (t = h = w).", ("TextOnly",),
                  _text(drawn), kv),
    ]
    if powers:
        tests.append(MropeTest("powers-of-two", f"Text at {powers}: float16's integer limit (2048) and overflow "
                               "(65504).", ("TextOnly",), _text(powers), kv))
    tests += [
        MropeTest("image-drawn", f"Text, a 2 x 3 image block (t = s, h = s + row, w = s + column) and text, from "
                  f"position {start}.", ("ImageBlock",), _shifted(image_block(1, 2, 3, 1), start), kv),
        MropeTest("image-corner", f"The last two tokens of a {LARGEST} x {LARGEST}-token image (the processor's "
                  f"largest) starting at {corner}: t = {corner}, h = t + {last}, w = t + {last - 1}, t + {last}.",
                  ("ImageBlock",), corner_streams, kv),
        MropeTest("image-at-end", f"Text, a 2 x 3 image block and text ending at the last position {L - 1}.",
                  ("ImageBlock",), _shifted(end_block, end_shift), kv),
    ]
    if setting.frame_step is not None:
        step, s = setting.frame_step, draw.integer(0, L - 16)
        t = tuple(s + f * step for f in range(2) for _ in range(2))
        h = (s,) * 4
        w = tuple(s + c for _ in range(2) for c in range(2))
        tests.append(MropeTest("video", f"Two video grid frames of 1 x 2 tokens from {s}: the temporal index steps "
                               f"by {step} a frame (t {list(t)}, w {list(w)}).", ("ImageBlock",),
                               ((t,), (h,), (w,)), kv))
    tests += [
        MropeTest(f"decode-{L - 1}", f"One text token at the last position of the model's {L}-token context.",
                  ("TextOnly",), _text([L - 1]), kv),
        MropeTest("batched-decode", f"Three rows of one token: text at {drawn[0]}, an image token at (t, h, w) = "
                  f"{mixed}, text at {L - 1}.", ("BatchedDecode", "ImageBlock"),
                  (((drawn[0],), (mixed[0],), (L - 1,)), ((drawn[0],), (mixed[1],), (L - 1,)),
                   ((drawn[0],), (mixed[2],), (L - 1,))), heads),
    ]
    return tests


_undrawn = seedless(groups, drawn=("text-drawn", "image-drawn", "image-corner", "video", "batched-decode"))


def committed(setting, protocol: str) -> list:
    """The committed, certified cases of a zoo model (reference.zoo.vectors): mrope.apply's tests
    that no seed draws (prefill-8 at the model's heads, the powers of two, the image block ending
    at L - 1, the last position), at two heads (every head turns alike; the drawn cases run the
    model's count). None for mrope.positions: every prompt there is drawn."""
    return [] if protocol == "mrope.positions" else two_heads(_undrawn(setting, protocol))
