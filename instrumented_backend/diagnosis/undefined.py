"""Values no program defines: what an ``empty``-family op returns, and what is computed from it
before anything writes it.

Eager's ``torch.empty`` hands back whatever the allocator held; compiled code may hold something
else there, and either may change from run to run. Such a value is never evidence of a compiler
bug. To tell which values are undefined, a graph is replayed twice with every ``empty``-family
result filled with a different pattern (:func:`filling_empty`): a value that differs between the
two replays depends on memory no op wrote (:func:`undefined_names`), while one the program fills
(``empty_like(x).exponential_()`` in ``F.gumbel_softmax``) comes out the same and stays judged.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Optional, TypeVar

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["EMPTY_OPS", "is_empty_op", "fill_pattern", "filling_empty", "run_twice", "undefined_names",
           "EmptyFilled"]

T = TypeVar("T")

_aten = torch.ops.aten
EMPTY_OPS = frozenset({
    _aten.empty.memory_format, _aten.empty_like.default, _aten.empty_strided.default, _aten.new_empty.default,
    _aten.new_empty_strided.default, _aten.empty_permuted.default,
})


def is_empty_op(target: Any) -> bool:
    """Whether ``target`` (an FX node's) returns memory it does not initialize."""
    return target in EMPTY_OPS


def fill_pattern(value: torch.Tensor, which: int) -> torch.Tensor:
    """``value`` filled in place with pattern ``which`` (0: zeros; 1: a value no computation is likely
    to give by chance, of the tensor's dtype)."""
    if which == 0:
        return value.zero_()
    if value.dtype == torch.bool:
        return value.fill_(True)
    if value.is_floating_point() or value.is_complex():
        return value.fill_(-1234.5)
    return value.fill_(77)


class EmptyFilled(TorchDispatchMode):
    """Every ``empty``-family op run under it returns memory filled with pattern ``which``."""

    def __init__(self, which: int) -> None:
        super().__init__()
        self.which = which

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Optional[dict[str, Any]] = None) -> Any:
        result = func(*args, **(kwargs or {}))
        if is_empty_op(func) and isinstance(result, torch.Tensor):
            with torch.no_grad():
                fill_pattern(result, self.which)
        return result


@contextlib.contextmanager
def filling_empty(which: int) -> Iterator[None]:
    """Eager code run inside the block gets ``empty``-family results filled with pattern ``which``."""
    with EmptyFilled(which):
        yield


def run_twice(run: Callable[[], T], fill: bool = True) -> tuple[T, T]:
    """``run()`` twice, the ``empty``-family results filled with pattern 0, then 1 (``fill``); a
    program the fill cannot run under (a ``torch.cond``, which a dispatch mode does not take) is
    run twice unfilled. An error of the program itself raises from the unfilled runs too."""
    if fill:
        try:
            with filling_empty(0):
                first = run()
            with filling_empty(1):
                return first, run()
        except Exception:  # noqa: BLE001 - run again unfilled: the program's own error raises there too
            pass
    return run(), run()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.layout != torch.strided or a.is_mkldnn or b.is_mkldnn:  # a oneDNN weight: no element to compare
            return True
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        return bool(torch.equal(a, b)) or bool(
            (a.is_floating_point() or a.is_complex()) and torch.equal(torch.isnan(a), torch.isnan(b))
            and torch.equal(a.nan_to_num(), b.nan_to_num()))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return True  # not a value the search compares


def undefined_names(first: dict[str, Any], second: dict[str, Any]) -> set[str]:
    """The names whose values differ between two replays that filled ``empty`` results with
    different patterns: values that depend on memory no op wrote. A value that cannot be compared
    element by element is taken as the same: never evidence of anything."""
    def differs(name: str, value: Any) -> bool:
        try:
            return not _same(value, second[name])
        except Exception:  # noqa: BLE001 - a tensor kind equal() does not take
            return False

    return {name for name, value in first.items() if name in second and differs(name, value)}
