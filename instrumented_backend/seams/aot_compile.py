"""Seam: ``torch._inductor.compile_fx.compile_fx_aot``, the entry of AOTInductor's compile.

``torch._inductor.aoti_compile_and_package`` (via ``aot_compile``) imports ``compile_fx_aot`` from
``torch._inductor.compile_fx`` when it runs and calls it with the exported program's graph;
``compile_fx_aot`` hands its ``inner_compile`` to ``compile_fx``. :func:`routed` swaps, for the
duration of a block, the ``inner_compile`` of every such call for one built from the graph
(the capture's), leaving the arguments and the code generated untouched.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from typing import Any, Callable, Iterator

from . import SeamMoved

__all__ = ["routed", "compile_and_package", "watch_compile_and_package", "load_package", "check"]

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


def watch_compile_and_package(on_call: Callable[[Any, tuple[Any, ...], dict[str, Any]], None]) -> Callable[[], None]:
    """Until the returned undo runs, ``on_call(exported_program, args, kwargs)`` is told of each call
    of ``torch._inductor.aoti_compile_and_package`` before PyTorch's own runs, unchanged."""
    import torch._inductor

    original = torch._inductor.aoti_compile_and_package

    @functools.wraps(original)
    def aoti_compile_and_package(exported_program: Any, *args: Any, **kwargs: Any) -> Any:
        on_call(exported_program, args, kwargs)
        return original(exported_program, *args, **kwargs)

    torch._inductor.aoti_compile_and_package = aoti_compile_and_package

    def undo() -> None:
        torch._inductor.aoti_compile_and_package = original

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
    if "from .compile_fx import" not in inspect.getsource(torch._inductor.aot_compile):
        raise SeamMoved("aot_compile: torch._inductor.aot_compile no longer imports compile_fx_aot when it runs")
