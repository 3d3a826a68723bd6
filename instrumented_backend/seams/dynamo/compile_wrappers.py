"""Seam: what ``torch.compile`` wraps, and how to run it without the wrapper.

``torch.compile(module)`` returns an ``OptimizedModule`` holding the module as ``_orig_mod``;
``torch.compile(fn)`` returns a function holding ``fn`` as ``_torchdynamo_orig_callable`` (a
``torch.compiler.disable`` wrapper holds one too, marked ``_torchdynamo_disable``: not a compile);
``module.compile()`` stores the compiled ``_call_impl`` as the module's ``_compiled_call_impl``,
which ``Module.__call__`` runs instead of ``_call_impl`` while it is set.

What a wrapper was compiled with is in its Dynamo context (an ``OptimizedModule``'s
``dynamo_ctx``; a compiled function's closure holds it): ``fullgraph`` and ``_dynamic`` there,
the backend at the end of its callback's ``_torchdynamo_orig_backend`` chain: Inductor's wrapper
keeps the mode and options as Inductor config (``config``), another backend's keeps them as it
was given them (``kwargs``).
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from .. import SeamMoved

__all__ = ["compiled_original", "compiled_in_place", "set_compiled_in_place", "compile_settings", "check"]


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


def _dynamo_context(target: Any) -> Optional[Any]:
    from torch._dynamo.eval_frame import OptimizedModule, _TorchDynamoContext

    if isinstance(target, OptimizedModule):
        return getattr(target, "dynamo_ctx", None)
    for cell in getattr(target, "__closure__", None) or ():
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(contents, _TorchDynamoContext):
            return contents
    return None


def compile_settings(target: Any) -> Optional[dict[str, Any]]:
    """The ``torch.compile`` arguments ``target`` (a compiled module or function, or the call
    ``module.compile()`` left) was compiled with, as ``dynamic`` / ``fullgraph`` / ``options``
    (the mode folded into the options, as Inductor folds it; ``backend`` when not Inductor), each
    only when set; None when ``target`` is no such wrapper (a ``torch.compiler.disable`` wrapper
    holds a Dynamo context too: not a compile) or its context cannot be read."""
    context = _dynamo_context(target) if compiled_original(target) is not None else None
    if context is None:
        return None
    settings: dict[str, Any] = {}
    if getattr(context, "_dynamic", None) is not None:
        settings["dynamic"] = context._dynamic
    if getattr(context, "fullgraph", False):
        settings["fullgraph"] = True
    backend = getattr(context, "callback", None)
    while getattr(backend, "_torchdynamo_orig_backend", None) is not None:
        backend = backend._torchdynamo_orig_backend
    if isinstance(backend, torch._TorchCompileInductorWrapper):
        if backend.config:
            settings["options"] = dict(backend.config)
    elif isinstance(backend, torch._TorchCompileWrapper):
        settings["backend"] = backend.compiler_name
        given = backend.kwargs
        if given.get("mode"):
            settings["mode"] = given["mode"]
        if given.get("options"):
            settings["options"] = dict(given["options"])
    return settings


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
    _check_settings()


def _check_settings() -> None:
    def function(x: Any) -> Any:
        return x

    for kwargs, expected in (
        ({"options": {"epilogue_fusion": False}, "dynamic": True, "fullgraph": True},
         {"options": {"epilogue_fusion": False}, "dynamic": True, "fullgraph": True}),
        ({"mode": "max-autotune-no-cudagraphs", "dynamic": False},
         {"options": {"max_autotune": True, "coordinate_descent_tuning": True}, "dynamic": False}),
        ({"backend": "eager", "options": {"x": 1}}, {"backend": "eager", "options": {"x": 1}}),
    ):
        read = compile_settings(torch.compile(function, **kwargs))
        if read != expected:
            raise SeamMoved(f"compile_wrappers: torch.compile(fn, **{kwargs}) no longer keeps its settings where "
                            f"compile_settings reads them (read {read}, expected {expected})")
    module = torch.nn.Identity()
    if compile_settings(torch.compile(module, fullgraph=True)) != {"fullgraph": True}:
        raise SeamMoved("compile_wrappers: an OptimizedModule's dynamo_ctx no longer holds its fullgraph")
    if compile_settings(torch.compiler.disable(function)) is not None:
        raise SeamMoved("compile_wrappers: a torch.compiler.disable wrapper is read as a compile")
    module.compile(dynamic=True)
    if compile_settings(compiled_in_place(module)) != {"dynamic": True}:
        raise SeamMoved("compile_wrappers: module.compile()'s compiled call no longer holds its settings")
