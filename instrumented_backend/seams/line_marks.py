"""Seam: ``IndentedBuffer.writeline`` and the C++/Triton schedulers' ``define_kernel``.

While a LoopBody node is being generated, every line written to an IndentedBuffer gets an inline
mark (innermost wins: a line spliced from a sub-buffer keeps its mark). ``define_kernel`` strips
the marks before Inductor deduplicates, names and compiles the kernel source, and records which
lines carried which marks under the kernel name it returns.
"""

from __future__ import annotations

from typing import Any

from .. import provenance
from . import SeamMoved, install_once

__all__ = ["install", "check", "mark_line", "SCHEDULERS"]

# (module, class) pairs whose define_kernel(src_code, ...) -> kernel_name we wrap
SCHEDULERS = (
    ("torch._inductor.codegen.cpp", "CppScheduling"),
    ("torch._inductor.codegen.triton", "TritonScheduling"),
)


def mark_line(line: Any, recorder: provenance.LineRecorder, origin: provenance.Origin) -> Any:
    """``line`` with ``origin``'s mark appended (unchanged if blank or already marked)."""
    from torch._inductor.utils import DeferredLineBase

    if isinstance(line, str):
        if line.strip() and not provenance.MARK_PATTERN.search(line):
            return line + recorder.mark_for(origin)
        return line
    if isinstance(line, DeferredLineBase) and isinstance(line.line, str):
        if line.line.strip() and not provenance.MARK_PATTERN.search(line.line):
            return line._new_line(line.line + recorder.mark_for(origin))
    return line


@install_once
def install() -> None:
    """Patch writeline and the schedulers' define_kernel once per process."""
    import importlib

    from torch._inductor.utils import IndentedBuffer

    original_writeline = IndentedBuffer.writeline

    def writeline(self: Any, line: Any) -> None:
        origin = provenance.current_emission()
        if origin is not None:
            recorder = provenance.active_recorder()
            if recorder is not None:
                line = mark_line(line, recorder, origin)
        return original_writeline(self, line)

    IndentedBuffer.writeline = writeline

    for module_name, class_name in SCHEDULERS:
        cls = getattr(importlib.import_module(module_name), class_name)
        cls.define_kernel = _stripping_define_kernel(cls.define_kernel)


def _stripping_define_kernel(original: Any) -> Any:
    def define_kernel(self: Any, src_code: str, *args: Any, **kwargs: Any) -> Any:
        recorder = provenance.active_recorder()
        if recorder is None or provenance.MARK_PREFIX not in src_code:
            return original(self, src_code, *args, **kwargs)
        clean, per_line = recorder.strip(src_code)
        kernel_name = original(self, clean, *args, **kwargs)
        recorder.record_kernel(str(kernel_name), clean, per_line)
        return kernel_name

    define_kernel.__wrapped__ = original  # type: ignore[attr-defined]
    return define_kernel


def check() -> None:
    """Raise SeamMoved unless writeline and every scheduler's define_kernel take what we pass."""
    import importlib
    import inspect

    from torch._inductor.utils import DeferredLineBase, IndentedBuffer

    if not callable(getattr(IndentedBuffer, "writeline", None)):
        raise SeamMoved("line_marks: IndentedBuffer.writeline is gone")
    if not callable(getattr(DeferredLineBase, "_new_line", None)):
        raise SeamMoved("line_marks: DeferredLineBase._new_line is gone")
    for module_name, class_name in SCHEDULERS:
        cls = getattr(importlib.import_module(module_name), class_name, None)
        define = getattr(cls, "define_kernel", None)
        if define is None:
            raise SeamMoved(f"line_marks: {module_name}.{class_name}.define_kernel is gone")
        params = list(inspect.signature(define).parameters)
        if params[:2] != ["self", "src_code"]:
            raise SeamMoved(f"line_marks: {class_name}.define_kernel no longer takes src_code first: {params}")
