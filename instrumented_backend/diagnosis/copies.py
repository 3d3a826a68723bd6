"""Copies of a call's arguments that the call cannot change: what every run of a judgement starts from."""

from __future__ import annotations

from typing import Any, Sequence

import torch
import torch.utils._pytree as pytree

from minifier.judge import clone_tensor

from ..capture.object_arguments import copy_object_argument, is_object_argument

__all__ = ["clone_inputs", "same_values"]


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
