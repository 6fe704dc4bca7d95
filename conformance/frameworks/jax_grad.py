"""``--grad`` for a JAX adapter: the backward is ``jax.vjp``, run by the runner.

conformance.training.TrainingCall makes the inputs whose gradient is graded fresh torch leaves
(``requires_grad``) and calls :class:`conformance.frameworks.FrameworkCall`, which hands such a
call here. :class:`_VjpBridge` is a torch.autograd.Function: its forward converts the leaves to
JAX arrays and runs

    outputs, vjp = jax.vjp(g, *leaves)      g(*leaves) = the adapter's output pytree, the other
                                            arguments held fixed (converted once, as constants)

and returns the outputs as torch tensors; its backward converts the incoming cotangents (each in
its output's dtype, zeros for an output without one) and returns ``vjp(cotangents)`` as torch
tensors. So TrainingCall's ``torch.autograd.grad`` and the float64 ``torch.autograd.gradcheck``
(finite differences of the forward, against this backward) run unchanged: the gradient graded is
JAX's own reverse mode of the adapter, with the case's cotangent. An output that is not a JAX
array makes ``jax.vjp`` raise: the call's verdict is then ``raised`` with JAX's message.
"""

from __future__ import annotations


def wants_grad(args) -> bool:
    """True when an argument tensor (top level or in a dict, list or tuple) requires grad."""
    return bool(_leaves(args))


def _leaves(args) -> list:
    import torch

    found = []

    def walk(v, depth):
        if isinstance(v, torch.Tensor):
            if v.requires_grad:
                found.append(v)
        elif depth < 4 and type(v) in (list, tuple):
            for x in v:
                walk(x, depth + 1)
        elif depth < 4 and type(v) is dict:
            for x in v.values():
                walk(x, depth + 1)

    walk(args, 0)
    return found


def call(wrapped, args):
    """The adapter's output for ``args``, as torch tensors connected to the leaves by jax.vjp."""
    from conformance.frameworks import _jax

    leaves = _leaves(args)
    held = {"fn": wrapped.fn, "args": args, "ids": [id(t) for t in leaves], "treedef": None}
    outs = _bridge().apply(held, *leaves)
    jax = _jax.library()
    return jax.tree_util.tree_unflatten(held["treedef"], list(outs))


_BRIDGE = None


def _bridge():
    """The autograd.Function, made once (torch imported only when JAX gradients are wanted)."""
    global _BRIDGE
    if _BRIDGE is not None:
        return _BRIDGE
    import torch

    from conformance.frameworks import _jax, to_native_tree

    class _VjpBridge(torch.autograd.Function):
        @staticmethod
        def forward(ctx, held, *leaves):
            jax = _jax.library()
            ids = held["ids"]
            native = [_jax.to_native(t) for t in leaves]

            def g(*xs):
                by_id = dict(zip(ids, xs))
                args = to_native_tree(_jax, held["args"], convert=lambda t: by_id.get(id(t)) if id(t) in by_id
                                      else _jax.to_native(t))
                return held["fn"](*args)

            out, vjp = jax.vjp(g, *native)
            flat, treedef = jax.tree_util.tree_flatten(out)
            held["treedef"] = treedef
            ctx.vjp = vjp
            ctx.treedef = treedef
            ctx.out_meta = [(tuple(o.shape), o.dtype) for o in flat]
            return tuple(_jax.to_torch(o) for o in flat)

        @staticmethod
        def backward(ctx, *grads):
            jax = _jax.library()
            cots = []
            for g, (shape, dtype) in zip(grads, ctx.out_meta):
                if g is None:
                    cots.append(jax.numpy.zeros(shape, dtype))
                else:
                    cots.append(_jax.to_native(g.contiguous()).astype(dtype))
            back = ctx.vjp(jax.tree_util.tree_unflatten(ctx.treedef, cots))
            return (None, *(_jax.to_torch(b) for b in back))

    _BRIDGE = _VjpBridge
    return _BRIDGE
