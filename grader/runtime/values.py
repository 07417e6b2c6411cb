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

    def walk(v: Any) -> Any:
        if v is None or type(v) in (bool, int, str):
            return v
        if type(v) is float:
            return v if np.isfinite(v) else {"$float": repr(v)}
        if isinstance(v, np.ndarray):
            key = f"a{len(arrays)}"
            arrays[key] = np.ascontiguousarray(v)
            return {"$nd": key}
        if is_tensor(v):
            key = f"t{len(tensors)}"
            # no copy here: encode_blobs copies the bytes into the message
            tensors[key] = v.detach().to("cpu").resolve_conj().resolve_neg().contiguous()
            return {"$pt": key}
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


def encode_blobs(arrays: dict[str, np.ndarray], tensors: dict[str, Any]) -> tuple[bytes, bytes]:
    from safetensors.numpy import save as save_np

    np_blob = save_np(arrays) if arrays else b""
    pt_blob = b""
    if tensors:
        if all(t.dtype in _numpy_dtypes() for t in tensors.values()):
            # the same safetensors file, written from numpy views: several times faster
            # than safetensors.torch.save for the many small tensors of a state dict
            pt_blob = save_np({k: t.numpy() for k, t in tensors.items()})
        else:  # bfloat16 and other dtypes numpy lacks
            from safetensors.torch import save as save_pt

            # copies: safetensors.torch refuses tensors that share memory (``pack`` sends
            # views, and a value may hold one tensor twice)
            pt_blob = save_pt({k: t.clone() for k, t in tensors.items()})
    return np_blob, pt_blob


@functools.cache
def _numpy_dtypes() -> frozenset[Any]:
    """torch dtypes that ``safetensors.numpy`` writes (to the same file format)."""
    torch = _torch()
    return frozenset((torch.float64, torch.float32, torch.float16, torch.int64, torch.int32,
                      torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64))


def decode_blobs(np_blob: bytes, pt_blob: bytes) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    from safetensors.numpy import load as load_np

    arrays = load_np(np_blob) if np_blob else {}
    tensors: dict[str, Any] = {}
    if pt_blob:
        from safetensors.torch import load as load_pt

        tensors = load_pt(pt_blob)
    return arrays, tensors


def dumps(tree: Any) -> bytes:
    return json.dumps(tree, allow_nan=False).encode()
