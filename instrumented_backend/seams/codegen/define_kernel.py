"""Seam: the C++ and Triton schedulers' ``define_kernel``, wrapped once, with listeners in a fixed order.

``define_kernel(src_code, nodes, ...)`` is where a kernel's final source meets the scheduler
nodes fused into it and the name Inductor gives it. One wrapper per scheduler hands a
:class:`KernelDefinition` to each listener of :data:`LISTENERS`, in that order, before Inductor
defines the kernel; a listener may return a function that is called with the kernel's name
afterwards. ``src_code`` and every argument reach Inductor untouched and the kernel name
returned is Inductor's own. The listeners:

1. :func:`.line_tags.on_define_kernel` - the origins of the source's lines (read before
   Inductor defines the kernel, recorded under its name after);
2. :func:`.kernel_traffic.on_define_kernel` - the memory the kernel moves.

A listener that fails records a problem on the line recorder; the compile goes on.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ...recording import recorder as recording
from .. import SeamMoved, install_once, seam_module

__all__ = ["install", "check", "KernelDefinition", "SCHEDULERS", "LISTENERS"]

# (module, class, name of the define_kernel parameter that holds the scheduler nodes)
SCHEDULERS = (
    ("torch._inductor.codegen.cpp", "CppScheduling", "nodes"),
    ("torch._inductor.codegen.triton", "TritonScheduling", "node_schedule"),
)
# The seam modules whose ``on_define_kernel`` is called, in this order.
LISTENERS = ("line_tags", "kernel_traffic")


@dataclass
class KernelDefinition:
    """One ``define_kernel`` call as the listeners see it."""

    scheduler: Any  # the CppScheduling / TritonScheduling instance
    src_code: str  # Inductor's source, as Inductor passed it
    nodes: Any  # the scheduler nodes argument (Triton's node_schedule mixes in loop markers)
    arguments: dict[str, Any]  # every bound argument of the call, by parameter name
    recorder: recording.LineRecorder


Finish = Callable[[str], None]


def _start(definition: KernelDefinition) -> list[tuple[str, Finish]]:
    finishers = []
    for name in LISTENERS:
        try:
            finish: Optional[Finish] = seam_module(name).on_define_kernel(definition)
        except Exception as exc:  # noqa: BLE001 - provenance must never break a compile
            definition.recorder.problems.append(f"{name}: define_kernel: {exc!r}")
            continue
        if finish is not None:
            finishers.append((name, finish))
    return finishers


def _wrap(original: Any, nodes_param: str) -> Any:
    signature = inspect.signature(original)

    def define_kernel(self: Any, *args: Any, **kwargs: Any) -> Any:
        recorder = recording.active_recorder()
        if recorder is None:
            return original(self, *args, **kwargs)
        try:
            bound = signature.bind(self, *args, **kwargs)
            definition = KernelDefinition(self, bound.arguments["src_code"], bound.arguments.get(nodes_param) or (),
                                          dict(bound.arguments), recorder)
            finishers = _start(definition)
        except Exception as exc:  # noqa: BLE001
            recorder.problems.append(f"define_kernel: {exc!r}")
            finishers = []
        kernel_name = original(self, *args, **kwargs)  # Inductor's own arguments, untouched
        for name, finish in finishers:
            try:
                finish(str(kernel_name))
            except Exception as exc:  # noqa: BLE001
                recorder.problems.append(f"{name}: define_kernel: {exc!r}")
        return kernel_name

    define_kernel.__wrapped__ = original  # type: ignore[attr-defined]
    return define_kernel


@install_once
def install() -> None:
    """Wrap each scheduler's define_kernel, once per process."""
    for module_name, class_name, nodes_param in SCHEDULERS:
        cls = getattr(importlib.import_module(module_name), class_name)
        cls.define_kernel = _wrap(cls.define_kernel, nodes_param)


def check() -> None:
    """Raise SeamMoved unless each scheduler still has ``define_kernel(self, src_code, <nodes>, ...)``."""
    for module_name, class_name, nodes_param in SCHEDULERS:
        cls = getattr(importlib.import_module(module_name), class_name, None)
        define = getattr(cls, "define_kernel", None)
        if define is None:
            raise SeamMoved(f"define_kernel: {module_name}.{class_name}.define_kernel is gone")
        params = list(inspect.signature(inspect.unwrap(define)).parameters)
        if params[:3] != ["self", "src_code", nodes_param]:
            raise SeamMoved(f"define_kernel: {class_name}.define_kernel no longer takes "
                            f"(src_code, {nodes_param}): {params}")
    for name in LISTENERS:
        if not callable(getattr(seam_module(name), "on_define_kernel", None)):
            raise SeamMoved(f"define_kernel: listener {name} has no on_define_kernel")
