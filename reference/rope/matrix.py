"""The dense RoPE rotation matrix R_{Theta,m} (for identities on small d).

Source: RoFormer (arXiv 2104.09864) eq. 15: R is block-diagonal over pairs with blocks
[[cos m theta_i, -sin m theta_i], [sin m theta_i, cos m theta_i]]. For layout "half" the blocks
sit on the index pairs (i, i + r/2) instead of (2i, 2i+1), so that apply(x) = R @ x per head.
"""

import numpy as np

from reference.numerics.layouts import pair_indices
from reference.numerics.phase import cos_sin_table, ladder
from reference.numerics.validate import MAX_ABS_POSITION, check_base, check_layout, check_rotary_dim


def rotation_matrix(position, rotary_dim, base=10000.0, layout="half"):
    """R_m as float64 [r, r] with rotate(x)[..., :r] = R_m @ x[..., :r] (position: an int)."""
    if isinstance(position, (bool, np.bool_)) or not isinstance(position, (int, np.integer)):
        raise ValueError(f"position: must be an integer, got {position!r}")
    if abs(int(position)) > MAX_ABS_POSITION:
        raise ValueError("position: |position| above 2**53 is not supported")
    r = check_rotary_dim(rotary_dim)
    layout = check_layout(layout)
    c, s = cos_sin_table(np.array(int(position), dtype=np.int64), ladder(r, check_base(base)), backend="numpy")
    first, second = pair_indices(r, layout)
    mat = np.zeros((r, r), dtype=np.float64)
    mat[first, first] = c
    mat[first, second] = -s
    mat[second, first] = s
    mat[second, second] = c
    return mat
