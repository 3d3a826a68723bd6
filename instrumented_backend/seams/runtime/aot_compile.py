"""Seam: ``torch._inductor.compile_fx.compile_fx_aot``, the entry of AOTInductor's compile.

``torch._inductor.aoti_compile_and_package`` (via ``aot_compile``) imports ``compile_fx_aot`` from
``torch._inductor.compile_fx`` when it runs and calls it with the exported program's graph;
``compile_fx_aot`` hands its ``inner_compile`` to ``compile_fx``. :func:`routed` swaps, for the
duration of a block, the ``inner_compile`` of every such call for one built from the graph
(the capture's), leaving the arguments and the code generated untouched.

A script's packages are watched through PyTorch's public entries: each build
(:func:`watch_compile_and_package`) and each call of a package loaded from a path
(:func:`watch_loaded_packages`: ``torch._inductor.aoti_load_package`` imports
``torch._inductor.package.load_package`` when it runs; the loaded model is an
``AOTICompiledModel``, whose ``__call__`` is wrapped while the watch lasts).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import weakref
from typing import Any, Callable, Iterator, Optional

from .. import SeamMoved

__all__ = ["routed", "compile_and_package", "watch_compile_and_package", "watch_loaded_packages", "load_package",
           "check"]

_lock = threading.Lock()
InnerFor = Callable[[Any], Callable[..., Any]]  # the graph compile_fx_aot got -> the inner_compile to use


@contextlib.contextmanager
def routed(inner_for: InnerFor) -> Iterator[None]:
    """Inside the block, AOTInductor compiles each graph with ``inner_for(graph)`` as inner_compile."""
    from torch._inductor import compile_fx as module

    with _lock:
        original = module.compile_fx_aot

        def compile_fx_aot(model_: Any, example_inputs_: Any, inner_compile: Any = module.compile_fx_inner,
                           config_patches: Any = None) -> Any:
            return original(model_, example_inputs_, inner_compile=inner_for(model_), config_patches=config_patches)

        module.compile_fx_aot = compile_fx_aot
        try:
            yield
        finally:
            module.compile_fx_aot = original


def compile_and_package(exported_program: Any, *args: Any, **kwargs: Any) -> Any:
    """PyTorch's AOTInductor entry, ``torch._inductor.aoti_compile_and_package``, as called."""
    import torch._inductor

    return torch._inductor.aoti_compile_and_package(exported_program, *args, **kwargs)


def watch_compile_and_package(on_call: Callable[[Any, tuple[Any, ...], dict[str, Any]], None],
                              on_built: Optional[Callable[[Any, Any], None]] = None) -> Callable[[], None]:
    """Until the returned undo runs, ``on_call(exported_program, args, kwargs)`` is told of each call
    of ``torch._inductor.aoti_compile_and_package`` before PyTorch's own runs, unchanged, and
    ``on_built(exported_program, path)`` of the package path it returned."""
    import torch._inductor

    original = torch._inductor.aoti_compile_and_package

    @functools.wraps(original)
    def aoti_compile_and_package(exported_program: Any, *args: Any, **kwargs: Any) -> Any:
        on_call(exported_program, args, kwargs)
        path = original(exported_program, *args, **kwargs)
        if on_built is not None:
            on_built(exported_program, path)
        return path

    torch._inductor.aoti_compile_and_package = aoti_compile_and_package

    def undo() -> None:
        torch._inductor.aoti_compile_and_package = original

    return undo


PackageCall = Callable[[str, tuple[Any, ...], dict[str, Any], Callable[[], Any]], Any]


def watch_loaded_packages(on_call: PackageCall) -> Callable[[], None]:
    """Until the returned undo runs, each call of a package loaded from a file path goes through
    ``on_call(real_path, args, kwargs, run)``, which returns what ``run()`` (PyTorch's own call,
    unchanged) returns. Packages loaded from a buffer, and calls after the undo, are not watched."""
    import torch._inductor.package as package

    original_load, model_class = package.load_package, package.AOTICompiledModel
    original_call = model_class.__call__
    paths: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()

    @functools.wraps(original_load)
    def load_package(path: Any, *args: Any, **kwargs: Any) -> Any:
        model = original_load(path, *args, **kwargs)
        if isinstance(path, (str, os.PathLike)) and isinstance(model, model_class):
            paths[model] = os.path.realpath(path)
        return model

    @functools.wraps(original_call)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        path = paths.get(self)
        if path is None:
            return original_call(self, *args, **kwargs)
        return on_call(path, args, kwargs, lambda: original_call(self, *args, **kwargs))

    package.load_package, model_class.__call__ = load_package, call

    def undo() -> None:
        if package.load_package is load_package:
            package.load_package = original_load
        if model_class.__call__ is call:
            model_class.__call__ = original_call

    return undo


def load_package(path: str) -> Any:
    """PyTorch's loader of an AOTInductor package, ``torch._inductor.aoti_load_package``: a callable model."""
    import torch._inductor

    return torch._inductor.aoti_load_package(path)


def check() -> None:
    """Raise SeamMoved unless aot_compile still looks compile_fx_aot up on the module, with inner_compile."""
    import inspect

    import torch._inductor
    from torch._inductor import compile_fx as module

    params = list(inspect.signature(module.compile_fx_aot).parameters)
    if params[:4] != ["model_", "example_inputs_", "inner_compile", "config_patches"]:
        raise SeamMoved(f"aot_compile: compile_fx_aot no longer takes (model_, example_inputs_, inner_compile, "
                        f"config_patches): {params}")
    for entry in ("aoti_compile_and_package", "aoti_load_package"):
        if not callable(getattr(torch._inductor, entry, None)):
            raise SeamMoved(f"aot_compile: torch._inductor.{entry} is gone")
    package_params = inspect.signature(torch._inductor.aoti_compile_and_package).parameters
    if "inductor_configs" not in package_params:
        raise SeamMoved("aot_compile: aoti_compile_and_package no longer takes inductor_configs (a script's "
                        "package is diagnosed with the configs it was built with)")
    import torch._inductor.package as package

    if "from torch._inductor.package import load_package" not in inspect.getsource(torch._inductor.aoti_load_package):
        raise SeamMoved("aot_compile: torch._inductor.aoti_load_package no longer imports "
                        "torch._inductor.package.load_package when it runs (a script's package calls are not seen)")
    if not callable(vars(getattr(package, "AOTICompiledModel", object)).get("__call__")):
        raise SeamMoved("aot_compile: torch._inductor.package.AOTICompiledModel no longer defines __call__")
    if "from .compile_fx import" not in inspect.getsource(torch._inductor.aot_compile):
        raise SeamMoved("aot_compile: torch._inductor.aot_compile no longer imports compile_fx_aot when it runs")
