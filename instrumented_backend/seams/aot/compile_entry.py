"""Seam: Inductor's compile entry points and the compile-id of the graph being compiled.

``compile_fx(gm, inputs, inner_compile=..., config_patches=...)`` runs AOTAutograd and calls
``inner_compile`` once per AOT graph (inference, forward, and later the lazily compiled
backward) with keyword arguments that include ``is_inference``, ``is_backward`` and
``graph_id``; ``compile_fx_inner`` is the default ``inner_compile``.
"""

from __future__ import annotations

import inspect
from typing import Any, Mapping

from .. import SeamMoved

__all__ = ["compile_fx", "compile_fx_inner", "current_compile_id", "graph_kind", "check"]


def compile_fx(*args: Any, **kwargs: Any) -> Any:
    """``torch._inductor.compile_fx.compile_fx``."""
    from torch._inductor.compile_fx import compile_fx as _compile_fx

    return _compile_fx(*args, **kwargs)


def compile_fx_inner(*args: Any, **kwargs: Any) -> Any:
    """``torch._inductor.compile_fx.compile_fx_inner``."""
    from torch._inductor.compile_fx import compile_fx_inner as _compile_fx_inner

    return _compile_fx_inner(*args, **kwargs)


def current_compile_id() -> str:
    """Dynamo's id of the frame being compiled, e.g. ``"0/0"`` (frame 0, first compile), or ""."""
    from torch._guards import CompileContext

    compile_id = CompileContext.current_compile_id()
    return "" if compile_id is None else str(compile_id)


def graph_kind(inner_kwargs: Mapping[str, Any]) -> str:
    """``"inference"``, ``"forward"`` or ``"backward"`` from inner_compile's keyword arguments."""
    if inner_kwargs.get("is_backward"):
        return "backward"
    if inner_kwargs.get("is_inference"):
        return "inference"
    return "forward"


def check() -> None:
    """Raise SeamMoved unless compile_fx/compile_fx_inner still take the arguments used here."""
    from torch._guards import CompileContext
    from torch._inductor import compile_fx as module

    outer = inspect.signature(module.compile_fx).parameters
    for name in ("inner_compile", "config_patches"):
        if name not in outer:
            raise SeamMoved(f"compile_entry: compile_fx() lost its {name!r} parameter")
    inner_source = inspect.getsource(module.compile_fx_inner)
    for flag in ("is_backward", "is_inference", "graph_id"):
        if flag not in inner_source:
            raise SeamMoved(f"compile_entry: compile_fx_inner() no longer receives {flag!r}")
    if not callable(getattr(CompileContext, "current_compile_id", None)):
        raise SeamMoved("compile_entry: CompileContext.current_compile_id is gone")


