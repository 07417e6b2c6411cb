"""A function must not change its arguments.

Every call a hidden check makes goes through :meth:`grader.runtime.target.Target.call`,
which takes an :class:`ArgumentSnapshot` of what it passes (each array copied; each tensor,
and each parameter and buffer of a module passed as an argument, by its version counter,
which every in-place operation on it or on a view of it bumps, and its layout; the lists,
tuples and dicts around them) and compares it after the call: an argument written in place (``x -= mean``,
``logits.masked_fill_``, ``x[..., 0] = ...``, ``ids.append``) is reported by its name in
the function's signature, whatever the function returned. Arguments a function is meant
to change (``train_step``'s model and optimizer) are named by the check (``changes=``).
Not seen: a write through ``t.data`` or through ``t.numpy()``, which bypasses the counter.
"""

from __future__ import annotations

import contextlib
import inspect
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import values

#: The message of torch's error for an in-place change of a tensor that requires grad (the
#: grader's ``grad`` requests pass such tensors): that is the same mistake.
LEAF_IN_PLACE = "leaf Variable that requires grad is being used in an in-place operation"


class ArgumentChanged(Exception):
    """A call changed an argument: ``str(exc)`` names it as the function's signature does
    (```x```, ```model`.out.weight``, ```batch`[1]``), or is empty where torch refused the
    change before it could be seen (a tensor that requires grad)."""


@dataclass(frozen=True)
class _Tensor:
    """A tensor as the call got it: the object, its version counter (every in-place
    operation on it or on a view of it bumps it: no copy to make or compare), its layout, and
    a copy only where torch keeps no version (an inference tensor)."""

    tensor: Any
    version: int | None
    layout: tuple[Any, ...]
    copy: Any = None


def _layout(t: Any) -> tuple[Any, ...]:
    return tuple(t.shape), t.stride(), t.dtype, t.storage_offset()


def _seen(t: Any) -> _Tensor:
    try:
        return _Tensor(t, int(t._version), _layout(t))
    except RuntimeError:  # inference tensors keep no version
        return _Tensor(t, None, _layout(t), t.detach().clone())


def _unchanged(seen: _Tensor, now: Any) -> bool:
    if now is not seen.tensor:  # another object in its place: the old one is as it was
        return values.is_tensor(now) and _same_tensor(seen.copy if seen.copy is not None else seen.tensor, now)
    if _layout(now) != seen.layout:
        return False
    if seen.version is None:
        return _same_tensor(seen.copy, now)
    return int(now._version) == seen.version


def _copy(value: Any) -> Any:
    """A snapshot of ``value``: arrays copied, tensors as seen (``_Tensor``), containers
    rebuilt, a module as its parameters and buffers, anything else (numbers, strings,
    objects) kept as is."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if values.is_tensor(value):
        return _seen(value)
    if isinstance(value, list):
        return [_copy(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_copy(v) for v in value)
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    state = _module_state(value)
    return state if state is not None else value


def _is_module(value: Any) -> bool:
    torch = values._torch()
    return torch is not None and isinstance(value, torch.nn.Module)


def _module_state(value: Any) -> dict[str, _Tensor] | None:
    if not _is_module(value):
        return None
    return {name: _seen(t) for name, t in _named_tensors(value)}


def _named_tensors(module: Any) -> list[tuple[str, Any]]:
    """``[*module.named_parameters(), *module.named_buffers()]``, read in one walk of the
    submodules instead of two (a snapshot takes it before and after every call) where the
    module keeps torch's own ``named_*`` methods."""
    nn = values._torch().nn
    kind = type(module)
    if any(getattr(kind, f) is not getattr(nn.Module, f) for f in ("named_parameters", "named_buffers", "named_modules")):
        return [*module.named_parameters(), *module.named_buffers()]
    params: list[tuple[str, Any]] = []
    buffers: list[tuple[str, Any]] = []
    seen_params: set[Any] = set()
    seen_buffers: set[Any] = set()
    for prefix, sub in module.named_modules():
        dot = prefix + "." if prefix else ""
        for found, seen, members in ((params, seen_params, sub._parameters), (buffers, seen_buffers, sub._buffers)):
            for name, t in members.items():
                if t is not None and t not in seen:
                    seen.add(t)
                    found.append((dot + name, t))
    return params + buffers


def _same_tensor(before: Any, after: Any) -> bool:
    if not values.is_tensor(after) or before.shape != after.shape or before.dtype != after.dtype:
        return False
    now = after.detach()
    if now.device != before.device:
        now = now.to(before.device)
    if before.is_floating_point() or before.is_complex():
        both_nan = before.isnan() & now.isnan()
        return bool((before.eq(now) | both_nan).all())
    return bool(before.eq(now).all())


def _same_array(before: np.ndarray, after: Any) -> bool:
    if not isinstance(after, np.ndarray) or before.shape != after.shape or before.dtype != after.dtype:
        return False
    nan_aware = before.dtype.kind in "fc"
    return bool(np.array_equal(before, after, equal_nan=nan_aware))


def _difference(before: Any, after: Any, where: str) -> str | None:
    """Where ``after`` (the argument now) differs from its snapshot ``before``, or None."""
    if isinstance(before, np.ndarray):
        return None if _same_array(before, after) else where
    if isinstance(before, _Tensor):
        return None if _unchanged(before, after) else where
    if isinstance(before, list | tuple):
        if not isinstance(after, list | tuple) or len(after) != len(before):
            return where
        for i, (b, a) in enumerate(zip(before, after, strict=True)):
            if (found := _difference(b, a, f"{where}[{i}]")) is not None:
                return found
        return None
    if isinstance(before, dict):
        if not isinstance(after, dict) or list(after) != list(before):
            return where
        for key, b in before.items():
            if (found := _difference(b, after[key], f"{where}[{key!r}]")) is not None:
                return found
        return None
    return None


def _module_difference(before: dict[str, Any], module: Any, where: str) -> str | None:
    now = dict(_named_tensors(module))
    if list(now) != list(before):
        return f"{where} (its parameters and buffers)"
    for name, seen in before.items():
        if not _unchanged(seen, now[name]):
            return f"{where}.{name}"
    return None


#: A module's own methods the graders call to set it up, not the student's code: nothing to
#: compare (a state dict handed to load_state_dict is copied into the module, never changed).
SETUP_METHODS = frozenset({"load_state_dict", "state_dict", "eval", "train", "to", "zero_grad"})

_NAMES: weakref.WeakKeyDictionary[Any, list[str]] = weakref.WeakKeyDictionary()


def compared(fn: Callable[..., Any]) -> bool:
    """Whether a call of ``fn`` has its arguments compared: not for torch's own set-up
    methods of a module (unless the student's class overrides them)."""
    func = getattr(fn, "__func__", None)
    torch = values._torch()
    if func is None or torch is None or func.__name__ not in SETUP_METHODS:
        return True
    return func is not getattr(torch.nn.Module, func.__name__, None)


def parameter_names(fn: Callable[..., Any], n_args: int) -> list[str]:
    """The names of ``fn``'s first ``n_args`` positional parameters (a module's call: its
    ``forward``'s), ``argument 3`` where the signature cannot tell; read once per function."""
    owner = getattr(fn, "__self__", None)
    torch = values._torch()
    if torch is not None and isinstance(owner, torch.nn.Module) and fn.__name__ in ("__call__", "_wrapped_call_impl"):
        fn = owner.forward
    func = getattr(fn, "__func__", fn)
    try:
        names = _NAMES[func]
    except (KeyError, TypeError):
        try:
            params = [p.name for p in inspect.signature(func).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            params = []
        names = params[1:] if func is not fn else params  # a bound method: no self
        with contextlib.suppress(TypeError):
            _NAMES[func] = names
    names = names[:n_args]
    return names + [f"argument {i + 1}" for i in range(len(names), n_args)]


class ArgumentSnapshot:
    """The arguments of one call as they were before it (see the module's docstring)."""

    def __init__(self, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any],
                 changes: Iterable[int | str] = ()):
        """``changes``: the arguments the function is meant to change, by position (the
        student may name the parameter otherwise) or by keyword."""
        allowed = set(changes)
        if not compared(fn):
            args, kwargs = [], {}
        named = {name: value for i, (name, value) in enumerate(zip(parameter_names(fn, len(args)), args,
                                                                   strict=True)) if i not in allowed}
        named.update((k, v) for k, v in kwargs.items() if k not in allowed)
        self.arguments = named
        self.before = {name: _copy(value) for name, value in self.arguments.items()}

    def check(self) -> None:
        """Raise :class:`ArgumentChanged` naming the first argument the call changed."""
        for name, value in self.arguments.items():
            before = self.before[name]
            if before is value:  # not copied: nothing of it is compared
                continue
            if isinstance(before, dict) and _is_module(value):
                found = _module_difference(before, value, f"`{name}`")
            else:
                found = _difference(before, value, f"`{name}`")
            if found is not None:
                raise ArgumentChanged(found)
