"""Object arguments of a compiled call: a model's cache and the like, which a call changes in place.

A Hugging Face ``generate`` passes its compiled ``model.forward`` a ``DynamicCache`` that the call
fills: replaying that call (to diagnose or profile it) needs the object as it was at the call, and
every run its own copy, as every run gets its own tensors. Read by the call recorder, the
diagnosis's copies and the profiler.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Optional

import torch
import torch.utils._pytree as pytree

__all__ = ["PLAIN", "OBJECT_DEPTH", "is_object_argument", "copy_object_argument", "copy_object_arguments"]

PLAIN = (torch.Tensor, int, float, complex, bool, str, bytes, type(None), torch.dtype, torch.device, torch.Size)
OBJECT_DEPTH = 4  # how deep the attributes of an object (a model's cache) are followed


def is_object_argument(value: Any) -> bool:
    """Is ``value`` an object argument, neither a plain value, a pytree container, a module, an
    optimizer, a type nor a callable, that keeps attributes (a Hugging Face ``DynamicCache``, empty
    on a generation's first call)? A call can change such an argument in place (a cache grows by
    the call's keys and values), so every run gets its own copy, as it gets its own tensors."""
    if isinstance(value, (PLAIN, list, tuple, dict, type, torch.nn.Module, torch.optim.Optimizer)) or callable(value):
        return False
    return isinstance(getattr(value, "__dict__", None), dict)


def _replace_tensors(value: Any, convert: Callable[[torch.Tensor], torch.Tensor], depth: int = 0) -> Any:
    """``value`` (a copy) with every tensor in it, its attributes' too, replaced by ``convert(tensor)``."""
    if isinstance(value, torch.Tensor):
        return convert(value)
    if depth > OBJECT_DEPTH or isinstance(value, PLAIN):
        return value
    if isinstance(value, list):
        return [_replace_tensors(item, convert, depth + 1) for item in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_replace_tensors(item, convert, depth + 1) for item in value)
    if isinstance(value, dict):
        return {key: _replace_tensors(item, convert, depth + 1) for key, item in value.items()}
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict) and not isinstance(value, torch.nn.Module):
        for name, item in list(attributes.items()):
            attributes[name] = _replace_tensors(item, convert, depth + 1)
    return value


def copy_object_argument(value: Any, convert: Optional[Callable[[torch.Tensor], torch.Tensor]] = None) -> Any:
    """A deep copy of an object argument (:func:`is_object_argument`), its tensors passed through ``convert``
    when given (float64 copies for the referee); ``value`` itself when it cannot be copied."""
    try:
        copied = copy.deepcopy(value)
    except Exception:  # noqa: BLE001 - an object that refuses copying is passed as it is
        return value
    return _replace_tensors(copied, convert) if convert is not None else copied


def copy_object_arguments(value: Any) -> Any:
    """``value`` (a pytree of arguments) with each object argument in it copied; tensors and
    other values as they are."""
    return pytree.tree_map(lambda leaf: copy_object_argument(leaf) if is_object_argument(leaf) else leaf, value)
