"""A data-only format for everything the isolated process sends back to the runner.

The isolated process runs the user's adapter, so whatever it sends is untrusted: decoding must
not be able to run code in the runner (as unpickling can, through ``__reduce__``), exhaust it,
or produce anything but plain data. ``dumps`` accepts only:

    None, bool, int, float (NaN and infinities too), str
    list, tuple (named tuples become tuples), dict
    torch.Tensor   dense, strided: dtype, shape, device and the raw bytes of its values
    numpy arrays   of bool, integer, float or complex dtype; numpy scalars become Python numbers

and raises TypeError for anything else, unless asked (``opaque=True``, as the isolated process
sends results) to send each value it cannot send as an *opaque* node instead: its type name and
the start of its repr, decoded into an inert :class:`Opaque`. A returned generator, lock or
custom object is then graded as what it is (not a tensor), as in-process, never taken for a raise;
a value whose encoding raised (a tensor subclass whose ``__torch_function__`` raises SystemExit)
comes back as an Opaque that says so (``raised``; ``raised_inside``). A message is an 8-byte length, a JSON header and the
raw buffers the header points to. ``loads`` checks every field (known dtypes, sizes that match
the buffers, a nesting limit) and raises ``WireError`` for anything that is not a message
``dumps`` could have written; tensors come back as new, contiguous tensors without autograd
history. A tensor may claim only a device this process can hold (cpu; cuda[:N] where that GPU
exists); anything else, and any error while decoding, is a ``WireError``.
"""

from __future__ import annotations

import json
import math
import re
import struct
import sys

_MAX_DEPTH = 64
_HEADER = struct.Struct("<Q")
_TENSOR_DTYPES = (
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
    "float64", "complex64", "complex128", "uint16", "uint32", "uint64",
    "float8_e4m3fn", "float8_e5m2",  # rope.apply_qk_fp8's answers (one byte each, sent as their bytes)
)
_NUMPY_KINDS = "biufc"
# The devices a decoded tensor may claim, checked as text before torch sees it: torch.device()
# on names such as "xpu", "mtia", "hpu" or "privateuseone" imports backends or asserts.
_DEVICE = re.compile(r"(cpu|cuda)(?::([0-9]{1,4}))?")
# Array dtypes as numpy's dtype.str writes them ("<f8", "|b1", ">i4"): nothing else reaches np.dtype.
_ARRAY_DTYPE = re.compile(r"[<>|=]?[biufc][0-9]{1,2}")


class WireError(ValueError):
    """Bytes that are not a message ``dumps`` writes."""


_OPAQUE_TEXT = 200  # characters of an opaque value's type name and repr that are sent


class Opaque:
    """A value the isolated process could not send (a generator, a lock, a custom object), as the
    runner receives it: inert data, the value's type name and the start of its repr. ``raised`` is
    one line when reading the value raised in the isolated process (None otherwise)."""

    __slots__ = ("type_name", "text", "raised")

    def __init__(self, type_name: str, text: str = "", raised=None):
        self.type_name, self.text, self.raised = str(type_name), str(text), raised

    def __repr__(self) -> str:
        return self.text or f"<{self.type_name} object>"

    def __eq__(self, other) -> bool:
        return (type(other) is Opaque and (self.type_name, self.text, self.raised)
                == (other.type_name, other.text, other.raised))

    __hash__ = None


def type_name(value) -> str:
    """The name of a returned value's type, as the reports say it: an Opaque's is the name of the
    value the isolated process could not send."""
    return value.type_name if type(value) is Opaque else type(value).__name__


def raised_inside(value, depth: int = 0):
    """The one line of the first Opaque in ``value`` (decoded data: containers of plain values)
    whose reading raised, or None."""
    if type(value) is Opaque:
        return value.raised
    if depth < _MAX_DEPTH and type(value) in (list, tuple, dict):
        for item in (value.values() if type(value) is dict else value):
            found = raised_inside(item, depth + 1)
            if found is not None:
                return found
    return None


def dumps(obj, *, opaque: bool = False) -> bytes:
    """The message for ``obj``; TypeError for a value that is not plain data, unless ``opaque``:
    such a value (or one whose reading raises) is then sent as an opaque node."""
    blobs: list[bytes] = []
    header = json.dumps(_enc(obj, blobs, 0, opaque), allow_nan=False, separators=(",", ":")).encode()
    return b"".join([_HEADER.pack(len(header)), header, *blobs])


def opaque_node(value, raised=None) -> dict:
    """The opaque node of ``value``: its type name and the start of its repr (or, when even that
    raises, what it raised)."""
    def line(exc):
        try:
            text = str(exc).strip().splitlines()
        except BaseException:  # noqa: BLE001 - a hostile __str__
            text = []
        name = _clip(type(exc).__name__)
        return f"{name}: {_clip(text[0])}" if text else name

    try:
        name = _clip(type(value).__name__)
    except BaseException:  # noqa: BLE001
        name = "object"
    try:
        text = _clip(repr(value))
    except BaseException as exc:  # noqa: BLE001 - a hostile __repr__
        text = f"<{name} object>"
        raised = raised if raised is not None else line(exc)
    if raised is not None and not isinstance(raised, str):
        raised = line(raised)
    return {"o": {"type": name, "text": text, "raised": raised}}


def _clip(text) -> str:
    text = str.__str__(text) if issubclass(type(text), str) else "?"
    return text if len(text) <= _OPAQUE_TEXT else text[: _OPAQUE_TEXT - 3] + "..."


def loads(data: bytes):
    try:
        (size,) = _HEADER.unpack_from(data, 0)
        header = data[_HEADER.size:_HEADER.size + size]
        if len(header) != size:
            raise WireError("truncated header")
        tree = json.loads(header)
        reader = _Buffers(memoryview(data)[_HEADER.size + size:])
        value = _dec(tree, reader, 0)
        if reader.pos != len(reader.data):
            raise WireError("bytes left over after the message")
        return value
    except WireError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever decoding untrusted bytes raises is a WireError
        # (ValueError, MemoryError, RecursionError, and whatever torch or numpy raise for values
        # they refuse): the caller catches one type and nothing else escapes.
        raise WireError(f"malformed message ({type(exc).__name__})") from None


# ---- encoding (in the isolated process) ------------------------------------------------------


def _enc(obj, blobs: list, depth: int, opaque: bool = False):
    if not opaque:
        return _enc_plain(obj, blobs, depth, opaque)
    mark = len(blobs)
    try:
        return _enc_plain(obj, blobs, depth, opaque)
    except TypeError as exc:
        del blobs[mark:]
        if depth > _MAX_DEPTH:
            raise
        return opaque_node(obj) if _unsendable(exc) else opaque_node(obj, exc)
    except BaseException as exc:  # noqa: BLE001 - reading the value raised (SystemExit, KeyboardInterrupt:
        # this runs in the isolated process, which a Ctrl-C does not reach)
        del blobs[mark:]
        return opaque_node(obj, exc)


class _NotPlain(TypeError):
    """A value that is not plain data (the others TypeErrors are raised by reading the value)."""


def _unsendable(exc) -> bool:
    return type(exc) is _NotPlain


def _enc_plain(obj, blobs: list, depth: int, opaque: bool):
    if depth > _MAX_DEPTH:
        raise _NotPlain(f"the result is nested deeper than {_MAX_DEPTH} levels")
    if type(obj) is Opaque:
        return {"o": {"type": obj.type_name, "text": obj.text, "raised": obj.raised}}
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return {"i": str(int(obj))}  # any size, exactly
    if isinstance(obj, float):
        return float(obj) if math.isfinite(obj) else {"f": repr(float(obj))}
    if isinstance(obj, (list, tuple)):
        items = [_enc(v, blobs, depth + 1, opaque) for v in obj]
        return {"t": items} if isinstance(obj, tuple) else {"l": items}
    if isinstance(obj, dict):
        return {"d": [[_enc(k, blobs, depth + 1, opaque), _enc(v, blobs, depth + 1, opaque)] for k, v in obj.items()]}
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return _enc_tensor(torch, obj, blobs)
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.generic) and obj.dtype.kind in _NUMPY_KINDS:
        return _enc(obj.item(), blobs, depth, opaque)
    if np is not None and isinstance(obj, np.ndarray) and obj.dtype.kind in _NUMPY_KINDS:
        arr = np.ascontiguousarray(obj)
        blobs.append(arr.tobytes())
        return {"a": {"dtype": arr.dtype.str, "shape": list(arr.shape), "n": len(blobs[-1])}}
    raise _NotPlain(f"a {type(obj).__name__} is not plain data (tensors, arrays, numbers, strings)")


def _enc_tensor(torch, t, blobs: list):
    if t.layout != torch.strided or t.is_quantized:
        raise _NotPlain(f"a tensor with layout {t.layout} is not plain data")
    dtype = str(t.dtype).removeprefix("torch.")
    if dtype not in _TENSOR_DTYPES:
        raise _NotPlain(f"a tensor of dtype {dtype} cannot be sent")
    flat = torch.Tensor.contiguous(torch.Tensor.detach(t)).cpu().reshape(-1)
    raw = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    blobs.append(raw)
    return {"T": {"dtype": dtype, "shape": list(t.shape), "device": str(t.device), "n": len(raw)}}


# ---- decoding (in the runner) ----------------------------------------------------------------


class _Buffers:
    def __init__(self, data: memoryview):
        self.data = data
        self.pos = 0

    def take(self, n) -> bytes:
        if not isinstance(n, int) or isinstance(n, bool) or n < 0 or self.pos + n > len(self.data):
            raise WireError("a buffer runs past the message")
        out = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return out


def _dec(node, buffers: _Buffers, depth: int):
    if depth > _MAX_DEPTH + 1:
        raise WireError("nested too deeply")
    if node is None or isinstance(node, (bool, str, float)):
        return node
    if isinstance(node, int):
        raise WireError("bare integer")  # dumps writes integers as {"i": digits}
    if not isinstance(node, dict) or len(node) != 1:
        raise WireError("unknown node")
    ((tag, body),) = node.items()
    if tag == "i" and isinstance(body, str) and len(body) <= 400:
        return int(body)
    if tag == "f" and body in ("nan", "inf", "-inf"):
        return float(body)
    if tag in ("l", "t") and isinstance(body, list):
        items = [_dec(v, buffers, depth + 1) for v in body]
        return items if tag == "l" else tuple(items)
    if tag == "d" and isinstance(body, list):
        out = {}
        for pair in body:
            if not isinstance(pair, list) or len(pair) != 2:
                raise WireError("bad dict entry")
            key = _dec(pair[0], buffers, depth + 1)
            if not isinstance(key, (str, int, float, bool, type(None), tuple)):
                raise WireError("unhashable dict key")
            out[key] = _dec(pair[1], buffers, depth + 1)
        return out
    if tag == "T" and isinstance(body, dict):
        return _dec_tensor(body, buffers)
    if tag == "a" and isinstance(body, dict):
        return _dec_array(body, buffers)
    if tag == "o" and isinstance(body, dict):
        name, text, raised = body.get("type"), body.get("text"), body.get("raised")
        if not (isinstance(name, str) and isinstance(text, str) and isinstance(raised, (str, type(None)))
                and max(len(name), len(text), len(raised or "")) <= 4 * _OPAQUE_TEXT):
            raise WireError("bad opaque value")
        return Opaque(name, text, raised)
    raise WireError(f"unknown node {tag!r}")


def _shape(shape) -> tuple:
    if not isinstance(shape, list) or len(shape) > 64:
        raise WireError("bad shape")
    if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
        raise WireError("bad shape")
    return tuple(shape)


def _dec_tensor(body: dict, buffers: _Buffers):
    import torch

    dtype, shape = body.get("dtype"), _shape(body.get("shape"))
    if dtype not in _TENSOR_DTYPES:
        raise WireError("unknown tensor dtype")
    tdtype = getattr(torch, dtype)
    numel = math.prod(shape)
    raw = buffers.take(body.get("n"))
    if len(raw) != numel * tdtype.itemsize:
        raise WireError("tensor size does not match its buffer")
    device = _device(torch, body.get("device", "cpu"))
    flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
    value = flat.view(tdtype).reshape(shape) if numel else torch.empty(shape, dtype=tdtype)
    return value if device.type == "cpu" else value.to(device)


def _device(torch, name):
    """The device a decoded tensor goes to: cpu, or cuda[:N] when this process has that GPU.
    Any other name (a backend this run does not hold, an index out of range) is a WireError."""
    match = _DEVICE.fullmatch(name) if isinstance(name, str) else None
    if match is None:
        raise WireError("a tensor on a device this run cannot hold")
    kind, index = match.group(1), match.group(2)
    if kind == "cpu":
        if index not in (None, "0"):
            raise WireError("a tensor on a device this run cannot hold")
        return torch.device("cpu")
    try:
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - a broken CUDA install holds no tensor either
        count = 0
    if count == 0 or (index is not None and int(index) >= count):
        raise WireError("a tensor on a device this run cannot hold")
    return torch.device(name)


def _dec_array(body: dict, buffers: _Buffers):
    import numpy as np

    name = body.get("dtype")
    if not isinstance(name, str) or _ARRAY_DTYPE.fullmatch(name) is None:
        raise WireError("unknown array dtype")
    dtype = np.dtype(name)
    if dtype.kind not in _NUMPY_KINDS or dtype.hasobject:
        raise WireError("unknown array dtype")
    shape = _shape(body.get("shape"))
    raw = buffers.take(body.get("n"))
    if len(raw) != math.prod(shape) * dtype.itemsize:
        raise WireError("array size does not match its buffer")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
