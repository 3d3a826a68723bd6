"""AOTInductor with the capture: ``ib.aoti_compile_and_package(exported_program, ...)``.

PyTorch's own AOTInductor compile-and-package call runs, with the same arguments; while it
compiles, the graph goes through the same capture as ``backend="instrumented"`` (the exported
program's graph in place of the Dynamo graph, source lines from its stack traces) and the package
it writes is the one PyTorch's call writes.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from ..seams.aot.caches import compile_caches_disabled
from ..seams.runtime import aot_compile
from .options import parse_options

__all__ = ["aoti_compile_and_package", "capturing_aoti"]


@contextlib.contextmanager
def capturing_aoti() -> Iterator[None]:
    """Inside the block, every AOTInductor compile (``aoti_compile_and_package``, ``aot_compile``) is
    captured like a ``backend="instrumented"`` compile; Inductor's caches are bypassed so that the
    code is generated (and seen) rather than read from a cache."""
    from .backend import CompileJob

    def inner_for(graph: Any) -> Any:
        return CompileJob(graph, parse_options({}), ahead_of_time=True).inner_compile

    with compile_caches_disabled(), aot_compile.routed(inner_for):
        yield


def aoti_compile_and_package(exported_program: Any, *args: Any, **kwargs: Any) -> Any:
    """PyTorch's ``aoti_compile_and_package(exported_program, ...)``, captured: returns what it
    returns (the package path); the capture is ``ib.last_capture()``."""
    with capturing_aoti():
        return aot_compile.compile_and_package(exported_program, *args, **kwargs)
