"""The fp64 referee's own casts: a user function's casts to low precision, made to float64.

The fp64 referee runs the user's function on float64 copies of its inputs and modules. A cast the
function makes itself (``ids.float()``, ``mask.to(torch.float32)``, ``x.half()``,
``torch.zeros(n, dtype=torch.float32)``, ``softmax(x, -1, dtype=torch.float32)``) took the referee
back to that precision: a float32 mask met float64 weights and the run raised (judged with no
referee), or the referee rounded where eager rounds and shared eager's errors. Under
:class:`WidenedCasts` each such cast is to float64 (complex128 for complex), and a factory given no
dtype makes float64. Bitcasts (``x.view(torch.int32)``) and casts to integer or bool types are left
alone; autocast leaves float64 alone by itself. The graphs a referee runs are widened the same way
by :func:`minifier.judge.widen_graph`.

What the diagnosis itself does around the function inside the referee (putting a training step's
weights and optimizer state back, whose ``load_state_dict`` casts each state to its parameter's
dtype) runs :func:`as_they_are`: casts as written, the default dtype as it was.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator, Sequence

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["WidenedCasts", "as_they_are"]

_state = threading.local()  # .active: the default dtypes of the WidenedCasts blocks entered; .paused

_WIDER = {torch.float16: torch.float64, torch.bfloat16: torch.float64, torch.float32: torch.float64,
          torch.complex32: torch.complex128, torch.complex64: torch.complex128}
_TO_DOUBLE = frozenset({torch.Tensor.float, torch.Tensor.half, torch.Tensor.bfloat16})
_DTYPE_BY_POSITION = frozenset({torch.Tensor.to, torch.Tensor.type})  # ``x.to(torch.float32)``, ``x.to("cpu", dtype)``


def _wider(value: Any) -> Any:
    return _WIDER.get(value, value) if isinstance(value, torch.dtype) else value


class WidenedCasts(TorchFunctionMode):
    """Casts to float32 and lower (and complex64) made to float64 (complex128) while active, and
    float64 the default dtype; the default is put back on exit."""

    def __enter__(self) -> "WidenedCasts":
        self._default = torch.get_default_dtype()
        _state.__dict__.setdefault("active", []).append(self._default)
        torch.set_default_dtype(torch.float64)
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        try:
            super().__exit__(*exc)
        finally:
            _state.active.pop()
            torch.set_default_dtype(self._default)

    def __torch_function__(self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if getattr(_state, "paused", False):
            return func(*args, **kwargs)
        if func in _TO_DOUBLE:
            func = torch.Tensor.double
        else:
            if isinstance(kwargs.get("dtype"), torch.dtype):
                kwargs = {**kwargs, "dtype": _wider(kwargs["dtype"])}
            if func in _DTYPE_BY_POSITION:
                args = tuple(_wider(arg) for arg in args)
        return func(*args, **kwargs)


@contextlib.contextmanager
def as_they_are() -> Iterator[None]:
    """Inside a :class:`WidenedCasts` block, casts as written and the default dtype as it was before
    it, for the block; anywhere else, nothing changes."""
    active = getattr(_state, "active", [])
    if not active or getattr(_state, "paused", False):
        yield
        return
    widened_default = torch.get_default_dtype()
    _state.paused = True
    torch.set_default_dtype(active[0])
    try:
        yield
    finally:
        _state.paused = False
        torch.set_default_dtype(widened_default)
