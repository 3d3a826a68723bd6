"""Seam: the profiler events Inductor's compiled code emits, which the profiling join reads.

* ``CompiledFxGraph.__call__`` wraps each run of a graph's wrapper in a
  ``## Call CompiledFxGraph <cache key> ##`` range (``output_code.py``);
* with ``cpp.enable_kernel_profile`` every C++ kernel records ``graph_<graph id>_<kernel name>``
  (``codegen/cpp.py``);
* Triton's launcher records a range named after ``inductor_meta["kernel_name"]``
  (``runtime/triton_heuristics.py``).

Nothing is patched: :func:`check` reads Inductor's source so that a renamed event fails here,
by name, instead of leaving every kernel unjoined.
"""

from __future__ import annotations

import importlib
import inspect
import re

from .. import SeamMoved

__all__ = ["CALL_EVENT", "KERNEL_PROFILE_OPTION", "call_event_name", "cpp_event_name", "check"]

CALL_EVENT = re.compile(r"^## Call CompiledFxGraph .* ##$")
KERNEL_PROFILE_OPTION = "cpp.enable_kernel_profile"


def call_event_name(label: str) -> str:
    """A profiler event named as Inductor names a compiled graph's call (:data:`CALL_EVENT`): for a
    call no Python wrapper makes (a loaded AOTInductor package's), recorded around it."""
    return f"## Call CompiledFxGraph {label} ##"


def cpp_event_name(kernel_name: str, graph_id: "int | None") -> str:
    """The profiler event of a C++ kernel compiled with ``cpp.enable_kernel_profile``."""
    return (f"graph_{graph_id}_" if graph_id is not None else "") + kernel_name


def _source(module_name: str) -> str:
    return inspect.getsource(importlib.import_module(module_name))


def check() -> None:
    """Raise SeamMoved unless the three event names are still emitted as read here."""
    from torch._inductor import config

    if not hasattr(config.cpp, KERNEL_PROFILE_OPTION.split(".", 1)[1]):
        raise SeamMoved(f"kernel_profile: Inductor config {KERNEL_PROFILE_OPTION} is gone")
    if '"## Call CompiledFxGraph ' not in _source("torch._inductor.output_code").replace("f\"", "\""):
        raise SeamMoved("kernel_profile: CompiledFxGraph no longer records '## Call CompiledFxGraph <key> ##'")
    cpp = _source("torch._inductor.codegen.cpp")
    if 'prefix = "graph_" + str(graph_id) + "_"' not in cpp or "RecordFunction" not in cpp:
        raise SeamMoved(
            "kernel_profile: C++ kernels no longer record 'graph_<id>_<kernel>' under enable_kernel_profile"
        )
    triton = _source("torch._inductor.runtime.triton_heuristics")
    if (
        not re.search(r'kernel_name = self\.inductor_meta\.get\("kernel_name"', triton)
        or "_RecordFunctionFast(" not in triton
    ):
        raise SeamMoved("kernel_profile: Triton launches no longer record a range named after the kernel")
