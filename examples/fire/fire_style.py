"""FIRE as the public FIRE module computes it (the snippet whose docstring cites Li et al.,
arXiv 2310.04418; e.g. mcleish7/arithmetic cramming/architectures/embeddings.py), written for the
protocol.

The module holds c, L_multiplier (learnable), init_L (frozen, 512) and an MLP Linear(1, hidden) ->
ReLU -> Linear(hidden, heads); here they are loaded from the adapter's ``params`` dict, in the
dtype of the tensors given. As in the module, positions are float32 (float64 for a float64 model):
the feature psi(i - j) / (psi(max(i, L)) + eps) is computed there and cast to the model's dtype
for the MLP. forward takes the query and key positions (0-based) instead of
arange(seq_len), and returns [heads, sq, sk] instead of [1, heads, seq, seq].

Adapter: ``bias`` (fire.bias); differentiable in every parameter (``--grad``).
"""

import torch
from torch import nn


class FIRE(nn.Module):
    def __init__(self, num_heads=12, mlp_width=32, init_c=0.1, init_L=512.0, eps=1e-6, dtype=torch.float32):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(1, mlp_width, dtype=dtype), nn.ReLU(),
                                 nn.Linear(mlp_width, num_heads, dtype=dtype))
        self.c = nn.Parameter(torch.tensor(init_c, dtype=dtype))
        self.init_L = nn.Parameter(torch.tensor(init_L, dtype=dtype), requires_grad=False)
        self.L_multiplier = nn.Parameter(torch.tensor(1.0, dtype=dtype))
        self.eps = eps

    def forward(self, q_positions, k_positions):
        # The module builds its positions as float32 (arange(seq_len, dtype=torch.float)), so for a
        # half-precision model the distance feature is float32 and only the MLP runs in bf16/fp16.
        positions_dtype = torch.promote_types(self.c.dtype, torch.float32)
        q = q_positions.to(positions_dtype)
        k = k_positions.to(positions_dtype)
        rel_distance = q[:, None] - k[None, :]
        threshold = torch.abs(self.L_multiplier * self.init_L)
        pos_normalizer = torch.max(q, threshold)[:, None]
        rel_distance = torch.log(torch.abs(self.c * rel_distance) + 1)
        pos_normalizer = torch.log(torch.abs(self.c * pos_normalizer) + 1) + self.eps
        normalized_distance = rel_distance / pos_normalizer
        fire_bias = self.mlp(normalized_distance.unsqueeze(-1).to(self.c.dtype))
        return fire_bias.permute(2, 0, 1)


def load(params, spec):
    """A FIRE module holding the given weights (copies, in their dtype)."""
    dtype = params["W1"].dtype
    module = FIRE(spec.num_heads, spec.hidden, init_L=spec.init_L, eps=spec.eps, dtype=dtype)
    with torch.no_grad():
        module.c.copy_(params["c"])
        module.L_multiplier.copy_(params["L_multiplier"])
        module.mlp[0].weight.copy_(params["W1"])
        module.mlp[0].bias.copy_(params["b1"])
        module.mlp[2].weight.copy_(params["W2"])
        module.mlp[2].bias.copy_(params["b2"])
    return module.to(params["W1"].device)


# The module's parameter names for the params dict's keys.
PARAMETERS = {"c": "c", "L_multiplier": "L_multiplier", "W1": "mlp.0.weight", "b1": "mlp.0.bias",
              "W2": "mlp.2.weight", "b2": "mlp.2.bias"}


def bias(q_positions, k_positions, params, spec):
    # functional_call runs the module on the given tensors themselves, so autograd reaches them
    # (--grad); load's copies only give the module its shapes, dtype and init_L.
    module = load(params, spec)
    weights = {name: params[key] for key, name in PARAMETERS.items()}
    return torch.func.functional_call(module, weights, (q_positions, k_positions))
