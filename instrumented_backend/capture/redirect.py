"""Make ``torch.compile`` use ``backend="instrumented"`` wherever it would use Inductor.

Shared by the CLI's ``run`` (capture a script unchanged) and ``profile`` (which also wraps each
compiled callable to record its first call).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional

__all__ = ["redirect_torch_compile"]

OnCompiled = Callable[[Any, Any, dict[str, Any]], Any]


def redirect_torch_compile(on_compiled: Optional[OnCompiled] = None) -> Callable[[], None]:
    """Patch torch.compile; returns the undo.

    ``on_compiled(target, compiled, compile_kwargs)`` may replace what a redirected compile
    returns. The decorator form (``@torch.compile(mode=...)``) is redirected too.
    """
    import torch

    original = torch.compile

    @functools.wraps(original)
    def compile_instrumented(model: Any = None, **kwargs: Any) -> Any:
        if kwargs.get("backend", "inductor") not in ("inductor", "instrumented"):
            return original(model, **kwargs)
        kwargs["backend"] = "instrumented"
        if model is None:
            return lambda target: compile_instrumented(target, **kwargs)
        compiled = original(model, **kwargs)
        return on_compiled(model, compiled, kwargs) if on_compiled is not None else compiled

    torch.compile = compile_instrumented

    def undo() -> None:
        torch.compile = original

    return undo
