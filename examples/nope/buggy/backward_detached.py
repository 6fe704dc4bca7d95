"""Bug: a NoPE layer that keeps its keys for the KV cache and returns the cached tensor, detached
so that the cache does not hold on to the autograd graph. The values are x, so posref without
--grad passes it; in training nothing flows back to x through this layer.

Adapter: apply (nope.apply). Expected diagnosis with --grad: ``backward-missing`` (the output does
not require grad).
"""

CODE = "backward-missing"
PROTOCOL = "nope.apply"
OPTIONS = {"grad": True, "fresh": False}


class CachingNope:
    def __init__(self):
        self.cache = []

    def __call__(self, x, positions):
        self.cache.append(x.detach())  # BUG: the detached copy is also what the layer returns
        return self.cache[-1]


def apply(x, positions, spec):
    return CachingNope()(x, positions)
