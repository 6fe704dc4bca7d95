"""--isolate copies back in-place writes into tensors nested in the arguments (dict values, list
and tuple items, dataclass fields), so the input-mutation check sees them as it does in-process:
attention's adapter gets its weights in a dict and its KV cache in an AttentionSpec.
"""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest
import torch

from conformance import run_conformance, wire
from conformance.isolation import _copy_back, _encode, _snapshot, _tensor_paths, Outcome

ROOT = Path(__file__).resolve().parents[2]
SDPA = ROOT / "examples" / "attention" / "sdpa_rope.py"

ADAPTERS = textwrap.dedent(
    f"""
    from conformance.loader import load_target

    _correct = load_target({str(SDPA) + ":forward"!r})

    def writes_wq(hidden, weights, positions, spec):
        out = _correct(hidden, weights, positions, spec)
        weights["wq"].add_(1.0)  # a hostile adapter: the caller's weights change
        return out

    def writes_cache(hidden, weights, positions, spec):
        out = _correct(hidden, weights, positions, spec)
        if spec.past_keys is not None:
            spec.past_keys.mul_(2)
        return out

    def rebinds_wq(hidden, weights, positions, spec):
        weights["wq"] = weights["wq"] * 1.0  # a new tensor in the dict: no write into an input
        return _correct(hidden, weights, positions, spec)
    """
)


@pytest.fixture(scope="module")
def adapters(tmp_path_factory):
    path = tmp_path_factory.mktemp("nested") / "mutating_attention.py"
    path.write_text(ADAPTERS)
    return path


def _run(path, name, cases, isolate=True):
    return run_conformance(f"{path}:{name}", "attention.forward", dtypes=("float32",), fresh=False,
                           identities=False, cases=cases, isolate=isolate, timeout=120.0)


def test_a_write_into_weights_is_caught_under_isolate(adapters):
    report = _run(adapters, "writes_wq", "attention.forward/rope-llama-causal/*")
    assert report.cases
    for c in report.cases:
        assert c.verdict == "fail", (c.id, c.verdict)
        assert "input-mutated" in [d.code for d in c.diagnoses]
        assert any("wq" in d.message for d in c.diagnoses if d.code == "input-mutated")


def test_a_write_into_the_spec_cache_is_caught_under_isolate(adapters):
    report = _run(adapters, "writes_cache", "attention.forward/rope-decode-cache/*")
    assert report.cases and all(c.verdict == "fail" for c in report.cases)
    assert all([d.code for d in c.diagnoses] == ["input-mutated"] for c in report.cases)


def test_rebinding_a_dict_entry_is_not_a_write(adapters):
    report = _run(adapters, "rebinds_wq", "attention.forward/rope-llama-causal/*")
    assert report.cases and all(c.verdict in ("pass", "acceptable") for c in report.cases), \
        [(c.id, c.verdict, [d.code for d in c.diagnoses]) for c in report.cases]


# -- the mechanism, without a child process -----------------------------------------------------


@dataclasses.dataclass
class Spec:
    name: str
    cache: torch.Tensor = None
    extra: dict = None


def _args():
    w = {"wq": torch.zeros(2, 2), "wk": torch.ones(2), 3: torch.arange(3.0)}
    spec = Spec("s", torch.zeros(3), {"inner": [torch.zeros(1), (torch.ones(2),)]})
    return (torch.zeros(4), w, [torch.zeros(2)], spec)


def test_every_nested_tensor_is_found_with_its_path():
    paths = [p for p, _ in _tensor_paths(_args())]
    assert paths == [(0,), (1, "wq"), (1, "wk"), (1, 3), (2, 0), (3, "cache"), (3, "extra", "inner", 0),
                     (3, "extra", "inner", 1, 0)]


def test_nested_writes_travel_on_the_wire_and_are_copied_back():
    child, parent = _args(), _args()
    pristine = _snapshot(child)
    child[0].add_(1)
    child[1]["wq"][0, 0] = 5.0
    child[1][3][2] = -1.0
    child[3].cache.fill_(7.0)
    child[3].extra["inner"][1][0][1] = 9.0
    child[2][0].neg_()  # -0.0: a write too, though equal as numbers
    reply = wire.loads(_encode(Outcome("ok", None), child, pristine))
    assert [m[0] for m in reply["mutated"]] == [0, (1, "wq"), (1, 3), (2, 0), (3, "cache"),
                                                 (3, "extra", "inner", 1, 0)]
    _copy_back(parent, reply["mutated"])
    assert parent[0].tolist() == [1.0] * 4
    assert parent[1]["wq"].tolist() == [[5.0, 0.0], [0.0, 0.0]]
    assert parent[1][3].tolist() == [0.0, 1.0, -1.0]
    assert parent[1]["wk"].tolist() == [1.0, 1.0]
    assert parent[3].cache.tolist() == [7.0] * 3
    assert parent[3].extra["inner"][1][0].tolist() == [1.0, 9.0]
    assert torch.signbit(parent[2][0]).all()


@pytest.mark.parametrize("where", [
    5,                              # no such argument
    (1, "nope"),                    # no such key
    (3, "__class__"),               # not a dataclass field
    (3, "name"),                    # a field that is no tensor
    (2, 7),                         # past the list
    (1, True),                      # a bool is no index
    (1, 2.0),                       # nor a float
    ("1", "wq"),                    # the argument index must be an int
    (),                             # empty path
])
def test_a_path_that_names_no_input_tensor_is_a_wire_error(where):
    with pytest.raises(wire.WireError):
        _copy_back(_args(), [(where, torch.zeros(1))])
