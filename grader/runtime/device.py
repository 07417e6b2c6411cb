"""Device-placement mistakes, caught on a machine without a GPU.

On a GPU, a tensor made on the CPU inside a model (a mask built with ``torch.ones(L, L)``
without ``device=``, a table kept as a plain attribute instead of a registered buffer, a
decoding buffer made with ``torch.full(...)`` without ``device=``) meets the model's CUDA
tensors and PyTorch raises "Expected all tensors to be on the same device". Graders
usually run on a CPU, where every tensor shares one device and the mistake is invisible.

:func:`on_device` replays CUDA's rule during one call: the tensors that ``.to(device)``
would have moved (the parameters and buffers of the modules involved, and the tensor
arguments) count as *on the device*; a tensor made during the call inherits the device of
the tensors it was made from, and a factory (``torch.ones``, ``torch.full``, ...) makes
one on the device only when told to (``device=x.device``, ``torch.ones_like(x)``,
``x.new_ones(...)``); every other tensor is *on the CPU*. An operation that mixes a CPU
tensor (not a 0-dim scalar, which CUDA accepts) with device tensors raises
:class:`DeviceMismatch`, as CUDA would; indexing with CPU indices and ``copy_`` are
allowed, as on CUDA.

A hidden test asks for it by adding :data:`ON_DEVICE` to a call's ``forbid`` list, or
:data:`ON_DEVICE_MODEL` when the tensor arguments come from the CPU (a training batch) and
only the model lives on the device.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

ON_DEVICE = "grader:on-device"  # the module and the tensor arguments are on the device
ON_DEVICE_MODEL = "grader:on-device-model"  # only the modules: tensor arguments come from the CPU
_TAG = "_grader_device_audit"
_counter = itertools.count(1)


class DeviceMismatch(RuntimeError):
    """A CPU tensor met the model's device tensors (on a GPU this call would fail)."""


def _describe_func(func: Any) -> str:
    name = getattr(func, "__name__", None) or repr(func)
    if name == "__get__":
        name = getattr(getattr(func, "__self__", None), "__name__", name)
    owner = getattr(func, "__qualname__", "")
    if owner.startswith("_TensorBase.") or owner.startswith("TensorBase.") or owner.startswith("Tensor."):
        return f"Tensor.{name}"
    module = getattr(func, "__module__", "") or ""
    if module.startswith("torch.nn.functional"):
        return f"F.{name}"
    return f"torch.{name}" if module.startswith("torch") or not module else f"{module}.{name}"


def _leaves(value: Any) -> list[Any]:
    """The leaves of ``value``: what is not a list, a tuple (a named one, torch's return
    types) or a dict's value, depth first. What the audit reads of every torch call's
    arguments and results (a forward makes hundreds): torch's ``tree_leaves`` finds the
    same there at a fraction of this walk's speed."""
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in _leaves(v)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    return [value]


class _Audit:
    def __init__(self, roots: list[Any], tensors_on_device: bool = True):
        import torch

        self.torch = torch
        self.leaves = _leaves
        self.token = next(_counter)
        self.violation: str | None = None
        self.attributes: dict[int, str] = {}
        # a device given as a string argument of the call ("cpu:0") stands for the device
        self.device_names = {v for v in self.leaves(list(roots)) if isinstance(v, str) and v.startswith("cpu:")}
        modules: list[Any] = []
        tensors: list[Any] = []
        self._collect(roots, modules, tensors, depth=0)
        if not tensors_on_device:
            tensors = []
        for module in modules:
            for _, t in itertools.chain(module.named_parameters(), module.named_buffers()):
                tensors.append(t)
            for prefix, sub in module.named_modules():
                for attr, value in vars(sub).items():
                    if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                        self.attributes[id(value)] = f"{prefix + '.' if prefix else ''}{attr}"
        for t in tensors:
            self._mark(t, True, "")

    def _collect(self, value: Any, modules: list[Any], tensors: list[Any], depth: int) -> None:
        torch = self.torch
        if depth > 4:
            return
        if isinstance(value, torch.Tensor):
            tensors.append(value)
        elif isinstance(value, torch.nn.Module):
            modules.append(value)
        elif isinstance(value, (list, tuple)):
            for v in value:
                self._collect(v, modules, tensors, depth + 1)
        elif isinstance(value, dict):
            for v in value.values():
                self._collect(v, modules, tensors, depth + 1)
        elif hasattr(value, "__self__") and isinstance(value.__self__, torch.nn.Module):
            modules.append(value.__self__)  # a bound method of a module

    def _mark(self, t: Any, on_device: bool, origin: str) -> None:
        try:
            setattr(t, _TAG, (self.token, on_device, origin))
        except (AttributeError, RuntimeError):
            pass

    def _state(self, t: Any) -> tuple[bool, str]:
        tag = getattr(t, _TAG, None)
        if tag is not None and tag[0] == self.token:
            return tag[1], tag[2]
        name = self.attributes.get(id(t))
        if name is not None:
            return False, f"`self.{name}`, a plain tensor attribute (a registered buffer would move with the model)"
        return False, "a tensor made before the call, outside the model's parameters and buffers"

    def _device_given(self, func: Any, args: tuple, kwargs: dict) -> bool | None:
        """For factories and ``.to``: True (told to use a device), False (told "cpu"), None."""
        torch = self.torch
        candidates = [kwargs.get("device")]
        if func in (torch.Tensor.to,):
            candidates += [a for a in args[1:] if isinstance(a, (str, torch.device))]
        for value in candidates:
            if value is None:
                continue
            if isinstance(value, str):
                return value in self.device_names or not value.startswith("cpu")
            return True
        return None

    def handle(self, func: Any, args: tuple, kwargs: dict) -> Any:
        torch = self.torch
        tensors = [t for t in self.leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        states = [self._state(t) for t in tensors]
        on_device = any(s[0] for s in states)
        if on_device and func not in _ALLOWED:
            for t, (dev, origin) in zip(tensors, states, strict=True):
                if not dev and t.dim() > 0:
                    message = f"{_describe_func(func)} mixes {origin} with the model's tensors"
                    self.violation = self.violation or message
                    raise DeviceMismatch(message)
        out = func(*args, **kwargs)
        if func is torch.Tensor.cpu:
            result, origin = False, "a tensor moved to the CPU with .cpu()"
        elif func is torch.Tensor.to and tensors[1:]:
            result, origin = self._state(tensors[1])[0], "a tensor converted with .to(...)"
        elif func is torch.Tensor.to:
            given = self._device_given(func, args, kwargs)
            result = states[0][0] if given is None else given
            origin = states[0][1] if given is None else "a tensor moved with .to('cpu')"
        elif not tensors or func in _FACTORIES_WITH_DATA:
            given = self._device_given(func, args, kwargs)
            result = bool(given) or (on_device and func in _FACTORIES_WITH_DATA)
            origin = f"a tensor made by {_describe_func(func)} without device=" if not result else ""
        else:
            result, origin = on_device, next((s[1] for s in states if not s[0]), "")
        for t in self.leaves(out):
            if isinstance(t, torch.Tensor):
                self._mark(t, result, origin)
        return out

    def check_result(self, result: Any) -> None:
        """A call that was given the device must hand its tensors back on it."""
        torch = self.torch
        for t in self.leaves(result):
            if isinstance(t, torch.Tensor) and t.dim() > 0:
                on_device, origin = self._state(t)
                if not on_device:
                    message = f"the result is {origin}, left on the CPU"
                    self.violation = self.violation or message
                    raise DeviceMismatch(message)


def _allowed() -> tuple[Any, ...]:
    import torch

    return (torch.Tensor.__getitem__, torch.Tensor.__setitem__, torch.Tensor.copy_,
            torch.Tensor.to, torch.Tensor.cpu, torch.Tensor.cuda, torch.Tensor.type_as,
            torch.Tensor.index_put_, torch.Tensor.index_put)


_ALLOWED: tuple[Any, ...] = ()
_FACTORIES_WITH_DATA: tuple[Any, ...] = ()


@contextlib.contextmanager
def on_device(guards: Any, *roots: Any) -> Iterator[_Audit | None]:
    """With ON_DEVICE or ON_DEVICE_MODEL among ``guards``, run the body under the device rule
    above; ``roots`` are the objects (modules, bound methods, tensors, containers of them)
    that live on the device, and device names given as strings such as "cpu:0". Yields the
    audit (``None`` when not active): ``audit.check_result(result)`` checks what the call
    returns."""
    guards = tuple(guards or ())
    if ON_DEVICE not in guards and ON_DEVICE_MODEL not in guards:
        yield None
        return
    import torch
    from torch.overrides import TorchFunctionMode

    global _ALLOWED, _FACTORIES_WITH_DATA
    if not _ALLOWED:
        _ALLOWED = _allowed()
        _FACTORIES_WITH_DATA = (torch.tensor, torch.as_tensor)
    audit = _Audit(list(roots), tensors_on_device=ON_DEVICE in guards)

    class Audit(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            return audit.handle(func, args, kwargs or {})

    with Audit():
        yield audit
    if audit.violation is not None:  # raised inside, but the student's code swallowed it
        raise DeviceMismatch(audit.violation)
