"""A call eager raises on: does its compiled code raise too, or return a value?

Compiled code can skip a check eager makes (an index bound, a value range, a clamp bound that does
not fit the dtype): eager raises, the compiled program returns garbage. That is a divergence of
the compiled program (the verdict ``skipped_error``), not the program's own error, which raises in
both (``eager_error``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import torch

from ..capture.registry import capture
from .accuracy import run_seeded
from .layers import run_calls_before

if TYPE_CHECKING:
    from ..graphs import GraphCapture

__all__ = ["returns_where_eager_raises"]


def returns_where_eager_raises(fn: Callable[..., Any], inputs: Sequence[Any], options: dict[str, Any],
                               dynamo_kwargs: dict[str, Any], seed: int,
                               before: Sequence[Sequence[Any]]) -> list["GraphCapture"]:
    """For a call eager raises on: the graphs compiled when ``fn``'s compiled code (the instrumented
    backend, Inductor ``options``, ``torch.compile``'s ``dynamo_kwargs``) returns a value on
    ``inputs`` after the calls ``before``, or [] when it raises too."""
    torch.compiler.reset()
    with capture() as session:
        compiled_fn = torch.compile(fn, backend="instrumented", options=options, **dynamo_kwargs)
        try:
            run_calls_before(compiled_fn, fn, before, seed)
            run_seeded(compiled_fn, inputs, seed)
        except Exception:  # noqa: BLE001 - raises as eager does
            return []
    return list(session)
