"""A call with keyword arguments as a call with positional arguments only (what the judges take)."""

from __future__ import annotations

import types
from typing import Any, Callable, Sequence

import torch
import torch.utils._pytree as pytree

from ..capture.object_arguments import is_object_argument

__all__ = ["KeywordCall", "keyword_call", "user_module", "without_wrapper", "laid_out_calls"]


class KeywordCall(torch.nn.Module):
    """``target(*args, **kwargs)`` as a call with positional arguments only.

    Keyword arguments that hold tensors (a model's cache too) become trailing positional inputs
    (cloned, compared, made float64 for the referee and differentiated like every input); the
    others are passed as given.
    A module ``target`` is a submodule, so its parameters are this module's."""

    def __init__(self, target: Callable[..., Any], positional: int, tensor_keys: Sequence[str],
                 constants: dict[str, Any]) -> None:
        super().__init__()
        owner = getattr(target, "__self__", None)
        if isinstance(target, types.MethodType) and isinstance(owner, torch.nn.Module):
            # ``model.forward = torch.compile(model.forward)``: the model is a submodule too, so the
            # float64 referee's ``.double()`` reaches its parameters (a deep copy of this module
            # binds the copied method to the copied model).
            self.owner = owner
        self.target = target
        self.positional = positional
        self.tensor_keys = tuple(tensor_keys)
        self.constants = dict(constants)

    def forward(self, *args: Any) -> Any:
        keyword = dict(zip(self.tensor_keys, args[self.positional:]))
        return self.target(*args[:self.positional], **self.constants, **keyword)


def keyword_call(fn: Callable[..., Any], inputs: Sequence[Any],
                 kwargs: dict[str, Any]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """``(callable, positional inputs)`` that make the call ``fn(*inputs, **kwargs)``."""
    if not kwargs:
        return fn, tuple(inputs)
    tensor_keys = [k for k, v in kwargs.items()
                   if any(isinstance(leaf, torch.Tensor) or is_object_argument(leaf) for leaf in pytree.tree_leaves(v))]
    constants = {k: v for k, v in kwargs.items() if k not in tensor_keys}
    wrapped = KeywordCall(fn, len(inputs), tensor_keys, constants)
    return wrapped, (*inputs, *(kwargs[k] for k in tensor_keys))


def user_module(module: torch.nn.Module) -> torch.nn.Module:
    """The module whose names a report uses for ``module``'s parameters and buffers: the user's model
    a :class:`KeywordCall` wraps (its ``owner``, else its ``target`` when that is a module), so that
    they read ``classifier.bias``, not ``target.classifier.bias``; any other module itself."""
    if isinstance(module, KeywordCall):
        for attribute in ("owner", "target"):
            inner = getattr(module, attribute, None)
            if isinstance(inner, torch.nn.Module):
                return inner
    return module


def without_wrapper(label: str, judged: Any) -> str:
    """A module label (``target.encoder.block.0 (T5Block)``) as the user's model names it when the
    judged function is the wrapper a keyword call makes (:class:`~.keyword_call.KeywordCall`): its
    attribute holding the model (``target``, ``owner``) left out, with the ``__self__`` of a bound
    method it holds (``model.forward`` compiled: ``target.__self__.transformer.h.0``); "" for the
    model itself."""
    if not isinstance(judged, KeywordCall):
        return label
    for attribute in ("target.__self__", "owner.__self__", "target", "owner"):
        if label == attribute or label.startswith(f"{attribute} ("):
            return ""
        if label.startswith(f"{attribute}."):
            return label.removeprefix(f"{attribute}.")
    return label


def laid_out_calls(fn: Callable[..., Any], calls: Sequence[tuple[Sequence[Any], dict[str, Any]]],
                   kwargs: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Each call's inputs laid out as ``fn`` takes the judged call's (a :class:`KeywordCall`'s
    tensor keywords trailing); a call with other keywords, or another number of positional
    arguments, is left out."""
    laid_out = []
    for call in calls:
        if not (isinstance(call, (tuple, list)) and len(call) == 2 and isinstance(call[0], (tuple, list))
                and isinstance(call[1], dict)):
            raise TypeError(f"diagnose: each of calls_before is (args, kwargs), a tuple and a dict, got {call!r:.80}")
        args, call_kwargs = call
        if set(call_kwargs) != set(kwargs):
            continue
        if isinstance(fn, KeywordCall):
            if len(args) != fn.positional:
                continue
            laid_out.append((*args, *(call_kwargs[k] for k in fn.tensor_keys)))
        else:
            laid_out.append(tuple(args))
    return laid_out
