"""Protocol ``mrope.positions``: ``fn(token_types, grids, spec) -> positions [3, batch, seq]``.

The helper of M-RoPE (Qwen2-VL's ``get_rope_index`` for images): token_types int64 [batch, seq]
(0 text, 1 image token), grids int64 [images, 3] (t, h, w per image block, in order); the answer
is the integer (t, h, w) of every token (reference.mrope.positions). Graded exactly: an integer
tensor of that shape, equal element for element. Dtype-free.
"""

from __future__ import annotations

import numpy as np

from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.tensors import adapter_inputs, argmax_index, check_integer_tensor, mutation_problems, \
    over_budget
from conformance.mrope.spec import spec_of
from conformance.results import Diagnosis
from reference.mrope.positions import rope_index


class MropePositions(Protocol):
    name = "mrope.positions"
    family = "mrope"
    signature = "fn(token_types, grids, spec) -> positions [3, batch, seq] (integers)"
    dtype_free = True

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> Prepared:
        args, inputs, watched = adapter_inputs(case.arrays, (), ("token_types", "grids"), dtype, device)
        return Prepared((*args, spec), inputs, watched, None, device)

    def grade(self, case, spec, prepared, value) -> Graded:
        types = prepared.inputs_f64["token_types"]
        out, problems = check_integer_tensor(value, "the positions", (3,) + types.shape)
        problems += mutation_problems(prepared.watched)
        if out is None:
            return Graded(problems=problems)
        ref = rope_index(types, prepared.inputs_f64["grids"])
        err = np.abs(out - ref).astype(np.float64)
        graded = Graded(problems=problems, output_f64=out.astype(np.float64), max_abs_error=float(err.max(initial=0)))
        ratio = err / 0.5  # any integer off by one or more is over
        for profile in ("standard", "strict"):
            graded.ratio[profile] = float(ratio.max(initial=0))
            graded.worst_index[profile] = argmax_index(ratio) if ratio.size else None
            graded.mismatch[profile] = over_budget(ratio) + ("position ids",)
        return graded

    def locate(self, case, spec, prepared, index) -> str:
        k, b, s = index
        kind = "image" if prepared.inputs_f64["token_types"][b, s] else "text"
        return f"{'thw'[k]} of batch row {b}, token {s} ({kind})"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        out = graded.output_f64
        types, grids = prepared.inputs_f64["token_types"], prepared.inputs_f64["grids"]
        if out is None:
            return []
        if np.array_equal(out, rope_index(types, grids[:, [0, 2, 1]])[[0, 2, 1]]):
            return [Diagnosis("image-axes-swapped", "image tokens get h from the column and w from the row")]
        linear = np.broadcast_to(np.arange(types.shape[1]), types.shape)
        ref = rope_index(types, grids)
        text = types == 0
        if np.array_equal(out[:, ~text], ref[:, ~text]) and np.array_equal(out[:, text], np.stack([linear] * 3)[:, text]):
            return [Diagnosis("positions-resume", "text after an image resumes at its token index instead of at the "
                              "image block's max + 1")]
        flat = (out[0] == out[1]) & (out[1] == out[2])  # t = h = w: a 1-D position
        if np.all(flat[~text]) and not np.array_equal(out, ref):
            how = ("every stream is the token index (get_rope_index never called)"
                   if np.array_equal(out, np.stack([linear] * 3)) else "t = h = w on every image token")
            return [Diagnosis("positions-1d", f"image tokens get 1-D positions: {how}")]
        return []


PROTOCOL = MropePositions()
