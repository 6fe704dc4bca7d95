"""conformance/wire.py: what comes back from the isolated process is data only (issue 9: a
crafted return value used to be unpickled, and so run, in the runner's process)."""

from __future__ import annotations

import json
import math
import os
import pickle
import struct
import textwrap

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance import wire
from conformance.isolation import make_invoker

DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128]


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensors_come_back_with_dtype_shape_and_every_bit(dtype):
    src = (torch.randn(3, 4, 5, dtype=torch.float64) * 1e3).to(dtype)
    for t in (src, src.transpose(0, 2), src[:, 1], src[0, 0, 0], src[:0]):
        back = wire.loads(wire.dumps(t))
        assert back.dtype == t.dtype and back.shape == t.shape and back.device.type == "cpu"
        assert torch.equal(back.reshape(-1).view(torch.uint8), t.reshape(-1).view(torch.uint8))


def test_plain_values_round_trip():
    value = {"a": (1, 2.5, None, True, "x\udcff"), 7: [float("nan"), -math.inf, 2**80, -0.0],
             ("k", 1): np.arange(6, dtype=np.int32).reshape(2, 3), "s": np.float32(1.5)}
    back = wire.loads(wire.dumps(value))
    assert back["a"] == (1, 2.5, None, True, "x\udcff")
    assert math.isnan(back[7][0]) and back[7][1:3] == [-math.inf, 2**80]
    assert math.copysign(1, back[7][3]) == -1
    assert np.array_equal(back[("k", 1)], value[("k", 1)]) and back[("k", 1)].dtype == np.int32
    assert back["s"] == 1.5 and type(back["s"]) is float
    t = torch.ones(2, requires_grad=True) * 2  # carries autograd history: only values come back
    assert not wire.loads(wire.dumps(t)).requires_grad


class Exploit:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


@pytest.mark.parametrize("value", [Exploit(), lambda: 1, iter([1]), object(), np.array([Exploit()]),
                                   torch.ones(2).to_sparse(), [[[[[]]]]] * 0 + [Exploit()]])
def test_anything_but_plain_data_is_refused_when_sending(value):
    with pytest.raises(TypeError):
        wire.dumps(value)


def test_deep_nesting_is_refused_both_ways():
    deep = []
    for _ in range(200):
        deep = [deep]
    with pytest.raises(TypeError, match="nested"):
        wire.dumps(deep)
    header = b'{"l":' * 100000 + b"[]" + b"}" * 100000
    with pytest.raises(wire.WireError):
        wire.loads(len(header).to_bytes(8, "little") + header)


@pytest.mark.parametrize("data", [
    pickle.dumps(Exploit()),
    b"",
    wire.dumps(torch.ones(4))[:-1],  # truncated buffer
    wire.dumps(torch.ones(4)) + b"\0",  # bytes left over
    wire.dumps(torch.ones(4)).replace(b'"float32"', b'"object!"'),
    wire.dumps(torch.ones(4)).replace(b'"shape":[4]', b'"shape":[5]'),
    wire.dumps(torch.ones(4)).replace(b'"shape":[4]', b'"shape":[-4]'),
    wire.dumps(np.ones(2)).replace(b'"<f8"', b'"|O"'),
    wire.dumps(1).replace(b'{"i":"1"}', b'{"i":"1"}'[:-1] + b"x"),
    wire.dumps({"k": 1}).replace(b'"d"', b'"q"'),
])
def test_malformed_messages_are_a_wire_error(data):
    with pytest.raises(wire.WireError):
        wire.loads(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(0, 200))
def test_fuzzed_bytes_give_a_value_or_a_wire_error(noise, cut):
    base = wire.dumps({"kind": "ok", "value": (torch.arange(6.0), [1, "x"]), "mutated": []})
    for data in (noise, base[:cut] + noise, base[:8] + noise[::-1] + base[8:]):
        try:
            wire.loads(data)
        except wire.WireError:
            pass


HOSTILE = textwrap.dedent(
    """
    import os, pickle, socket, stat, struct, time

    MARK = os.environ["POSREF_WIRE_MARK"]

    class Exploit:
        def __reduce__(self):
            return (open, (MARK, "w"))  # creates the marker file when unpickled

    def returns_exploit(x):
        return Exploit()

    def writes_pickle_to_the_socket(x):
        # Answer on the runner's socket directly, as multiprocessing frames a message: a pickle
        # that would run code in whatever unpickles it.
        payload = pickle.dumps(("ok", Exploit(), {}))
        for fd in range(3, 256):
            try:
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    os.write(fd, struct.pack("!i", len(payload)) + payload)
            except OSError:
                pass
        time.sleep(0.5)
        os._exit(0)
    """
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="--isolate is POSIX only")
@pytest.mark.parametrize("name", ["returns_exploit", "writes_pickle_to_the_socket"])
def test_a_crafted_return_value_runs_nothing_in_the_runner(tmp_path, monkeypatch, name):
    mark = tmp_path / "pwned"
    monkeypatch.setenv("POSREF_WIRE_MARK", str(mark))
    (tmp_path / "hostile_wire.py").write_text(HOSTILE)
    with make_invoker(None, f"{tmp_path / 'hostile_wire.py'}:{name}", isolate=True, timeout=30,
                      preload=()) as inv:
        out = inv.call(torch.ones(2))
        if name == "returns_exploit":
            # sent back as an inert opaque value naming its type (issue 24), never unpickled
            assert out.kind == "ok" and type(out.value) is wire.Opaque and out.value.type_name == "Exploit", out
        else:
            assert out.kind in ("raised", "crashed"), out
        again = inv.call(torch.ones(2))  # the runner goes on
        assert again.kind in (("ok",) if name == "returns_exploit" else ("raised", "crashed"))
    assert not mark.exists()


def _claiming(device) -> bytes:
    """A tensor message whose header says the tensor lives on ``device``."""
    raw = wire.dumps(torch.ones(2))
    return raw.replace(b'"device":"cpu"', b'"device":' + json.dumps(device).encode())


@pytest.mark.parametrize("device", ["xpu", "xpu:0", "mtia", "hpu", "privateuseone", "privateuseone:0",
                                    "meta", "cpu:1", "cuda:99999", "cuda:-1", "mps", "lazy", "", " cpu",
                                    "cpu\n", 5, None, ["cpu"], "cuda" * 1000])
def test_a_tensor_on_a_device_this_run_cannot_hold_is_a_wire_error(device):
    # Issue 24: "cuda", "xpu", "mtia", "hpu", "privateuseone" on a CPU machine raised AssertionError
    # or ModuleNotFoundError out of the decoder (torch.device and .to() were given the name).
    data = _claiming(device)
    with pytest.raises(wire.WireError):
        wire.loads(_fixed_length(data))


def test_cuda_is_accepted_only_where_this_process_has_that_gpu():
    for device in ("cuda", "cuda:0"):
        data = _fixed_length(_claiming(device))
        if torch.cuda.is_available():
            assert wire.loads(data).device.type == "cuda"
        else:
            with pytest.raises(wire.WireError, match="device"):
                wire.loads(data)
    assert wire.loads(_fixed_length(_claiming("cpu"))).device.type == "cpu"


def _fixed_length(data: bytes) -> bytes:
    """data with its length field made to match its (edited) JSON header again."""
    _, size = json.JSONDecoder().raw_decode(data[8:].decode("latin-1"))  # the header is ASCII
    return size.to_bytes(8, "little") + data[8:]


@pytest.mark.parametrize("name", ["O", "|O", "V8", "S4", "<U2", "M8[s]", "f8,i4", "[('a','<f8')]",
                                  "<f8" * 200, 7, None])
def test_an_array_dtype_numpy_would_not_write_for_plain_data_is_a_wire_error(name):
    raw = wire.dumps(np.ones(2))
    data = raw.replace(b'"<f8"', json.dumps(name).encode())
    with pytest.raises(wire.WireError):
        wire.loads(_fixed_length(data))


def test_any_exception_while_decoding_is_a_wire_error(monkeypatch):
    class Odd(Exception):
        pass

    for error in (AssertionError("backend"), ModuleNotFoundError("torch.xpu"), Odd(), LookupError()):
        def broken(body, buffers, error=error):
            raise error

        monkeypatch.setattr(wire, "_dec_tensor", broken)
        with pytest.raises(wire.WireError):
            wire.loads(wire.dumps(torch.ones(2)))


def test_values_that_cannot_be_sent_travel_as_inert_opaque_values():
    # Issue 24: with opaque=True (the isolated process's results) a value that is not plain data
    # is sent as its type name and the start of its repr, leaf by leaf; one whose reading raises
    # (SystemExit included) says so. Nothing else is accepted for such a node.
    import threading

    class Boom(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            raise SystemExit(0)

    with pytest.raises(TypeError):
        wire.dumps((i for i in range(3)))
    value = wire.loads(wire.dumps((torch.ones(2), (i for i in range(3)), threading.Lock()), opaque=True))
    assert torch.equal(value[0], torch.ones(2))
    assert [type(v) for v in value[1:]] == [wire.Opaque, wire.Opaque]
    assert [wire.type_name(v) for v in value[1:]] == ["generator", "lock"]
    assert wire.raised_inside(value) is None
    boom = wire.loads(wire.dumps([torch.zeros(2).as_subclass(Boom)], opaque=True))
    assert wire.raised_inside(boom) == "SystemExit: 0"
    for bad in ({"type": 1, "text": "", "raised": None}, {"type": "x", "text": "y" * 5000, "raised": None},
                {"type": "x", "text": "", "raised": 3}):
        header = json.dumps({"o": bad}).encode()
        with pytest.raises(wire.WireError):
            wire.loads(struct.pack("<Q", len(header)) + header)
