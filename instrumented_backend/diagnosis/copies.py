"""Copies of a call's arguments that the call cannot change: what every run of a judgement starts from."""

from __future__ import annotations

import copy
from typing import Any, Callable, Optional, Sequence

import torch
import torch.utils._pytree as pytree

from minifier.judge import clone_tensor

__all__ = ["clone_inputs", "same_values", "is_object_argument", "copy_object_argument", "PLAIN", "OBJECT_DEPTH"]

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


def clone_inputs(values: Sequence[Any]) -> list[Any]:
    """Deep copies of tensors (strides and requires_grad kept) and of object arguments (a model's
    cache, which a call extends in place); other values as they are."""
    def clone(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return clone_tensor(value).requires_grad_(value.requires_grad)
        if is_object_argument(value):
            return copy_object_argument(value)
        return value

    return [pytree.tree_map(clone, v) for v in values]


def same_values(tensor: torch.Tensor, before: torch.Tensor) -> bool:
    """Equal in shape, dtype and values, NaN matching NaN: has ``tensor`` kept the value ``before``
    copied?"""
    return tensor.shape == before.shape and tensor.dtype == before.dtype and bool(torch.equal(tensor, before) or (
        tensor.dtype.is_floating_point and torch.equal(tensor.isnan(), before.isnan())
        and torch.equal(tensor.nan_to_num(0.0), before.nan_to_num(0.0))))
