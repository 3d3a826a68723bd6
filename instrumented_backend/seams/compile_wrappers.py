"""Seam: what ``torch.compile`` wraps, and how to run it without the wrapper.

``torch.compile(module)`` returns an ``OptimizedModule`` holding the module as ``_orig_mod``;
``torch.compile(fn)`` returns a function holding ``fn`` as ``_torchdynamo_orig_callable`` (a
``torch.compiler.disable`` wrapper holds one too, marked ``_torchdynamo_disable``: not a compile);
``module.compile()`` stores the compiled ``_call_impl`` as the module's ``_compiled_call_impl``,
which ``Module.__call__`` runs instead of ``_call_impl`` while it is set.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from . import SeamMoved

__all__ = ["compiled_original", "compiled_in_place", "set_compiled_in_place", "check"]


def compiled_original(target: Any) -> Optional[Any]:
    """What ``torch.compile`` compiled into ``target`` (a module or a callable), or None when
    ``target`` is not a ``torch.compile`` wrapper."""
    from torch._dynamo.eval_frame import OptimizedModule

    if isinstance(target, OptimizedModule):
        return target._orig_mod
    original = getattr(target, "_torchdynamo_orig_callable", None)
    if original is None or getattr(target, "_torchdynamo_disable", False):
        return None
    return original


def compiled_in_place(module: torch.nn.Module) -> Optional[Any]:
    """The compiled call ``module.compile()`` left on ``module`` (None when it was not compiled so)."""
    return module.__dict__.get("_compiled_call_impl")


def set_compiled_in_place(module: torch.nn.Module, compiled: Optional[Any]) -> None:
    """Put back (or, with None, take off) the compiled call ``module.compile()`` left."""
    module._compiled_call_impl = compiled


def check() -> None:
    """Raise SeamMoved unless the three wrappers still hold what they compile as read here."""
    from torch._dynamo.eval_frame import OptimizedModule

    module = torch.nn.Identity()
    if getattr(torch.compile(module, backend="eager"), "_orig_mod", None) is not module:
        raise SeamMoved("compile_wrappers: OptimizedModule no longer holds its module as _orig_mod")
    if not issubclass(OptimizedModule, torch.nn.Module):
        raise SeamMoved("compile_wrappers: OptimizedModule is no longer a Module")

    def function(x: Any) -> Any:
        return x

    if getattr(torch.compile(function, backend="eager"), "_torchdynamo_orig_callable", None) is not function:
        raise SeamMoved("compile_wrappers: a compiled function no longer holds it as _torchdynamo_orig_callable")
    if not getattr(torch.compiler.disable(function), "_torchdynamo_disable", False):
        raise SeamMoved("compile_wrappers: torch.compiler.disable no longer marks its wrapper _torchdynamo_disable")
    module.compile(backend="eager")
    runs = torch.nn.Module._wrapped_call_impl.__code__.co_names
    if compiled_in_place(module) is None or "_compiled_call_impl" not in runs:
        raise SeamMoved("compile_wrappers: Module.compile() no longer stores _compiled_call_impl for __call__ to run")
