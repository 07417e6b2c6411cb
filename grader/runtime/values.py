"""Values that cross between the grader and a submission.

Only plain data crosses: ``None``, ``bool``, ``int``, ``float``, ``str``, lists, tuples,
dicts with string keys, numpy arrays and torch tensors. Anything else the submission hands
back (a module, an optimizer, ...) stays where it was made and crosses as a ``HandleRef``.
Converting every value to these exact types, in process and over the wire alike, means an
object that claims to equal anything never reaches a comparison.
"""

from __future__ import annotations

import functools
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import BadValue

MAX_DEPTH = 8
MAX_ITEMS = 100_000


@dataclass(frozen=True)
class HandleRef:
    """A reference to an object that lives next to the submission."""

    id: int
    type_name: str


def map_leaves(value: Any, fn: Callable[[Any], Any]) -> Any:
    """``value`` with each element that is not a list, tuple or dict replaced by ``fn(element)``."""
    if isinstance(value, list):
        return [map_leaves(v, fn) for v in value]
    if isinstance(value, tuple):
        return tuple(map_leaves(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: map_leaves(v, fn) for k, v in value.items()}
    return fn(value)


def _torch() -> Any:
    """torch if this process has imported it (no tensor exists before that has finished:
    another thread may be importing it right now)."""
    torch = sys.modules.get("torch")
    if torch is None or getattr(getattr(torch, "__spec__", None), "_initializing", False):
        return None
    return torch


def is_tensor(value: Any) -> bool:
    torch = _torch()
    return torch is not None and isinstance(value, torch.Tensor)


def type_name(value: Any) -> str:
    cls = type(value)
    return f"{cls.__module__}.{cls.__qualname__}"


def normalize(value: Any, register: Callable[[Any], HandleRef] | None = None, _depth: int = 0) -> Any:
    """Copy ``value`` into exact plain types; unknown objects become handles (or fail)."""
    if _depth > MAX_DEPTH:
        raise BadValue("the value is nested too deeply")
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, HandleRef):
        return value
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufc":
            raise BadValue(f"an array of dtype {value.dtype} is not a numeric array")
        return np.array(value, copy=True, subok=False)
    if is_tensor(value):
        return value.detach().to("cpu").clone().as_subclass(_torch().Tensor)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (list, tuple)):
        if len(value) > MAX_ITEMS:
            raise BadValue("the value has too many items")
        items = [normalize(v, register, _depth + 1) for v in list(value)]
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, dict):
        if len(value) > MAX_ITEMS:
            raise BadValue("the value has too many items")
        out = {}
        for key, item in list(value.items()):
            if not isinstance(key, str):
                raise BadValue("a returned dict has a key that is not a string")
            out[str(key)] = normalize(item, register, _depth + 1)
        return out
    if register is None:
        raise BadValue(f"expected an array, tensor or plain value, got {type(value).__name__}")
    return register(value)


# --- wire format: a JSON tree plus two safetensors blobs (numpy arrays, torch tensors) ---


def pack(value: Any) -> tuple[Any, dict[str, np.ndarray], dict[str, Any]]:
    """Split a normalized value into a JSON-able tree and the arrays/tensors it holds."""
    arrays: dict[str, np.ndarray] = {}
    tensors: dict[str, Any] = {}
    torch = _torch()
    tensor_type = torch.Tensor if torch is not None else ()

    def walk(v: Any) -> Any:
        kind = type(v)
        if v is None or kind is bool or kind is int or kind is str:
            return v
        if kind is list:
            return [walk(x) for x in v]
        if kind is float:
            return v if math.isfinite(v) else {"$float": repr(v)}
        if isinstance(v, tensor_type):
            key = f"t{len(tensors)}"
            # no copy here: encode_blobs copies the bytes into the message
            tensors[key] = v.detach().to("cpu").resolve_conj().resolve_neg().contiguous()
            return {"$pt": key}
        if isinstance(v, np.ndarray):
            key = f"a{len(arrays)}"
            arrays[key] = np.ascontiguousarray(v)
            return {"$nd": key}
        if isinstance(v, HandleRef):
            return {"$handle": v.id, "type": v.type_name}
        if isinstance(v, tuple):
            return {"$tuple": [walk(x) for x in v]}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {"$dict": [[k, walk(x)] for k, x in v.items()]}
        raise BadValue(f"cannot send a {type(v).__name__}")

    return walk(value), arrays, tensors


def unpack(tree: Any, arrays: dict[str, np.ndarray], tensors: dict[str, Any]) -> Any:
    """Inverse of :func:`pack`; raises ``BadValue`` on anything malformed."""

    taken: set[tuple[str, str]] = set()

    def fresh(kind: str, table: dict[str, Any], key: str) -> Any:
        """The decoded array or tensor, owned by this value: a message's arrays and
        tensors are new, so only a second reference to one (``pack`` never sends one)
        needs a copy."""
        item = table[key]
        if (kind, key) in taken:
            return item.copy() if kind == "$nd" else item.clone()
        taken.add((kind, key))
        return item

    def walk(v: Any, depth: int) -> Any:
        if depth > MAX_DEPTH + 2:
            raise BadValue("the reply is nested too deeply")
        if v is None or type(v) in (bool, int, float, str):
            return v
        if isinstance(v, list):
            return [walk(x, depth + 1) for x in v]
        if not isinstance(v, dict) or len(v) not in (1, 2):
            raise BadValue("malformed value in reply")
        if "$nd" in v:
            return fresh("$nd", arrays, v["$nd"])
        if "$pt" in v:
            return fresh("$pt", tensors, v["$pt"])
        if "$float" in v:
            return float(v["$float"])
        if "$handle" in v:
            return HandleRef(int(v["$handle"]), str(v.get("type", "")))
        if "$tuple" in v:
            return tuple(walk(x, depth + 1) for x in v["$tuple"])
        if "$dict" in v:
            return {str(k): walk(x, depth + 1) for k, x in v["$dict"]}
        raise BadValue("malformed value in reply")

    try:
        return walk(tree, 0)
    except (KeyError, TypeError, ValueError) as exc:
        raise BadValue(f"malformed value in reply ({exc})") from None


# the dtypes safetensors stores: its header's name for each, and the name numpy and torch share
_STORED = {"BOOL": "bool", "I8": "int8", "U8": "uint8", "I16": "int16", "U16": "uint16",
           "I32": "int32", "U32": "uint32", "I64": "int64", "U64": "uint64", "F16": "float16",
           "F32": "float32", "F64": "float64", "BF16": "bfloat16", "C64": "complex64"}
_NP_DTYPES = {k: np.dtype(v) for k, v in _STORED.items() if v != "bfloat16"}  # numpy lacks bfloat16


def encode_blobs(arrays: dict[str, np.ndarray], tensors: dict[str, Any]) -> tuple[bytes, bytes]:
    """A message's two safetensors files: its numpy arrays, its torch tensors (both
    contiguous, from :func:`pack`).

    Written by safetensors' own ``serialize`` from each value's memory, as its
    ``numpy.save`` and ``torch.save`` do, less their checks for files on disk (tensors that
    share memory, byte order read from dtype names): these cost more than the writing for
    the few small tensors most messages hold."""
    from safetensors import TensorSpec

    native = {k: a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))
              for k, a in arrays.items()}  # the file is little-endian, as are the machines
    np_specs = {k: TensorSpec(dtype=_stored_name(a.dtype), shape=a.shape, data_ptr=a.ctypes.data,
                              data_len=a.nbytes) for k, a in native.items()}
    pt_specs = {k: TensorSpec(dtype=_stored_name(t.dtype), shape=tuple(t.shape),
                              data_ptr=t.data_ptr(), data_len=t.nbytes) for k, t in tensors.items()}
    return _serialize(np_specs), _serialize(pt_specs)  # native and tensors stay alive till here


def _serialize(specs: dict[str, Any]) -> bytes:
    if not specs:
        return b""
    from safetensors import serialize

    return bytes(serialize(specs))


@functools.cache
def _stored_name(dtype: Any) -> str:
    """``float32`` for ``np.float32`` and ``torch.float32`` alike; BadValue for a dtype
    that safetensors does not store (complex128, ...)."""
    name = str(dtype).removeprefix("torch.")
    if name not in _STORED.values():
        raise BadValue(f"cannot send values of dtype {name}")
    return name


def decode_blobs(np_blob: bytes, pt_blob: bytes) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The arrays and tensors of a message's two safetensors files; each is writable and
    the receiver's own (its bytes are a fresh copy out of the message)."""
    from safetensors import deserialize

    arrays = {k: _array(v) for k, v in deserialize(np_blob)} if np_blob else {}
    tensors = {k: _tensor(v) for k, v in deserialize(pt_blob)} if pt_blob else {}
    return arrays, tensors


def _array(stored: dict[str, Any]) -> np.ndarray:
    return np.frombuffer(stored["data"], dtype=_NP_DTYPES[stored["dtype"]]).reshape(stored["shape"])


def _tensor(stored: dict[str, Any]) -> Any:
    import torch  # a message that holds a tensor: the receiver needs torch, imported or not
    if stored["dtype"] in _NP_DTYPES:  # through numpy: half the cost of torch.frombuffer
        return torch.from_numpy(_array(stored))
    dtype = getattr(torch, _STORED[stored["dtype"]])
    if not stored["data"]:  # frombuffer refuses an empty buffer
        return torch.empty(stored["shape"], dtype=dtype)
    return torch.frombuffer(stored["data"], dtype=dtype).reshape(stored["shape"])



def dumps(tree: Any) -> bytes:
    return json.dumps(tree, allow_nan=False).encode()
