"""Protocol ``rope.cp_apply``: ``fn(x, cu_seqlens, spec) -> tensor like x``.

The rank's tokens of a packed batch under context parallelism, rotated: x [t_rank, heads, head_dim]
holds the tokens rank ``spec.rank`` holds (conformance.rope.cp_positions: sequence by sequence, its
chunks in the rank's order), cu_seqlens int64 [n + 1] bounds the whole pack, and each token must
turn by its position within its own sequence (reference.rope.cp_positions). spec is a
:class:`CpRopeSpec`: a RopeSpec (head_dim, rotary_dim, base, layout; tensor_layout "thd", with
``cu_seqlens`` the bounds of the rank's own slices, L_j / cp_size tokens each) plus cp_size, rank
and split.

Graded as rope.apply grades a thd case (conformance.core.rotation_apply: per pair, the rotation
budget of conformance.core.rotation_budgets at the token's angle). A failing output is first
compared with the rotation at each context-parallel mutant's positions (the candidates of
conformance.rope.cp_positions): the first within the standard budget names the fault; otherwise
RoPE's own diagnosis (layout, base, ...) at the right positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from conformance.core import rotation_reference as reference
from conformance.core.protocol import Graded, Prepared
from conformance.core.rotation_spec import RopeSpec
from conformance.core.tensors import abs_error
from conformance.rope.apply import RopeApply
from conformance.rope.cp_positions import candidates
from reference.rope.cp_positions import cp_positions


@dataclass(frozen=True)
class CpRopeSpec(RopeSpec):
    """RopeSpec plus the context-parallel split: cp_size, rank and split ("load_balanced" or
    "contiguous"), as conformance.rope.cp_positions.CpSpec."""

    cp_size: int = 1
    rank: int = 0
    split: str = "load_balanced"


def spec_of(params) -> CpRopeSpec:
    """The spec of a case (params: RoPE's, cp_size, rank, split). cu_seqlens is set in prepare,
    from the case's pack: the bounds of the rank's own slices."""
    return CpRopeSpec(head_dim=int(params["head_dim"]), rotary_dim=int(params["rotary_dim"]),
                      base=float(params["base"]), layout=str(params["layout"]), scaling=None,
                      seq_len=int(params.get("seq_len") or 0), tensor_layout="thd", cu_seqlens=None,
                      cp_size=int(params["cp_size"]), rank=int(params["rank"]), split=str(params["split"]))


def _local_bounds(cu: np.ndarray, cp_size: int) -> tuple:
    """The bounds of the rank's slices in x: every rank holds L_j / cp_size tokens of sequence j."""
    return tuple(int(v) for v in np.asarray(cu, dtype=np.int64) // cp_size)


class CpApply(RopeApply):
    name = "rope.cp_apply"
    family = "rope"
    signature = "fn(x, cu_seqlens, spec) -> tensor like x"

    def spec(self, case):
        spec = spec_of(case.params)
        return _with_bounds(spec, case.arrays["cu_seqlens"])

    def prepare(self, case, spec, dtype, device) -> Prepared:
        import torch

        cu = np.asarray(case.arrays["cu_seqlens"], dtype=np.int64)
        pos = cp_positions(cu, spec.cp_size, spec.rank, spec.split)
        prepared = self.prepare_arrays(np.asarray(case.arrays["x"])[None], pos[None], spec, dtype, device)
        cu_t = torch.from_numpy(cu.copy()).to(device)
        prepared.args = (prepared.args[0], cu_t, spec)
        prepared.watched["positions"] = (cu_t, cu_t.clone())  # the adapter gets cu_seqlens, not positions
        prepared.inputs_f64["cu_seqlens"] = cu
        return prepared

    def probe(self, invoker, cases, options):
        return None  # the pair layout is the case's; a probe would call with positions

    def blackbox(self, invoker, dtype, device, probe) -> list:
        return []  # rope.apply's identities need a positions argument

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        if graded.output_f64 is None:
            return []
        x, out = prepared.inputs_f64["x"], graded.output_f64
        for found, positions in candidates(prepared.inputs_f64["cu_seqlens"], spec):
            if positions is None or positions.shape != prepared.inputs_f64["positions"].shape[1:]:
                continue
            if self._within(spec, dtype, x, positions[None], out):
                return [found]
        return super().diagnose(case, spec, prepared, graded, dtype)

    def _within(self, spec, dtype, x, pos, out) -> bool:
        """Whether out is the rotation of x at positions pos within the standard budget."""
        trial = Graded()
        ref = reference.apply(x, pos, spec, spec.layout)
        self.ratios(trial, "standard", spec, dtype, x, pos, abs_error(out, ref))
        ratio = trial.ratio.get("standard")
        return ratio is not None and ratio <= 1.0

    # --grad: the gradient of x through the rank's positions, as rope.apply grades it; the
    # gradcheck identity of rope.apply calls with positions, so none runs here.
    def grad_blackbox(self, invoker, device, probe) -> list:
        return []


def _with_bounds(spec: CpRopeSpec, cu) -> CpRopeSpec:
    import dataclasses

    return dataclasses.replace(spec, cu_seqlens=_local_bounds(cu, spec.cp_size))


PROTOCOL = CpApply()
