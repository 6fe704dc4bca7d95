"""Bug: Qwen3-VL's interleaved M-RoPE with its h and w slots one pair early: h at pairs 0, 3, 6, ...
and w at 1, 4, 7, ... instead of 1, 4, ... and 2, 5, ... (the slice offsets of
``apply_interleaved_mrope`` written as 0 and 1), so pair i reads the stream pair i + 1 should.
Qwen2-VL's consecutive sections are computed correctly.

Text tokens (t = h = w) cannot show it: only image tokens fail. Adapter: apply (mrope.apply).
Expected diagnosis: ``interleave-shifted``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "interleave-shifted"
PROTOCOL = "mrope.apply"

_qwen = Path(__file__).resolve().parents[1] / "qwen_vl.py"
stream_angles = load_target(f"{_qwen}:stream_angles")
select = load_target(f"{_qwen}:select")
rotate = load_target(f"{_qwen}:rotate")


def apply(x, positions, spec):
    angles = stream_angles(positions, spec)
    if spec.variant != "qwen3":
        return rotate(x, select(angles, spec), spec)
    out = angles[0].clone()
    for k, offset in ((1, 0), (2, 1)):  # BUG: offsets (1, 2) shifted by one
        idx = slice(offset, 3 * spec.mrope_section[k], 3)
        out[..., idx] = angles[k][..., idx]
    return rotate(x, out, spec)
