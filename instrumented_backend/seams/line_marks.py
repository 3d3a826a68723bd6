"""Seam: ``IndentedBuffer.writeline`` and the C++/Triton schedulers' ``define_kernel``.

While a LoopBody node is being generated, every line written to an IndentedBuffer gets an inline
mark (innermost wins: a line spliced from a sub-buffer keeps its mark). ``define_kernel`` strips
the marks before Inductor deduplicates, names and compiles the kernel source, and records which
lines carried which marks under the kernel name it returns.

Template kernels (the C++ GEMM template, Triton's mm templates) are mostly template text, not
LoopBody code: only their fused epilogues are marked as they are generated. ``define_kernel``
receives the scheduler nodes of the kernel, so every unmarked line of a template kernel is
attributed to the template node's FX node(s), with the IR op ``template:<template name>``
(e.g. ``template:packed_gemm``), which says how it was attributed.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Optional

from .. import provenance
from . import SeamMoved, install_once

__all__ = ["install", "check", "mark_line", "template_origins", "renamed_line_pattern", "SCHEDULERS"]

# (module, class) pairs whose define_kernel(src_code, ...) -> kernel_name we wrap
SCHEDULERS = (
    ("torch._inductor.codegen.cpp", "CppScheduling"),
    ("torch._inductor.codegen.triton", "TritonScheduling"),
)


def _unmarked(text: str) -> bool:
    """Not blank and not already marked (the substring test spares most lines the regex)."""
    if not text or text.isspace():
        return False
    return provenance.MARK_PREFIX not in text or not provenance.MARK_PATTERN.search(text)


def mark_line(line: Any, recorder: provenance.LineRecorder, origin: provenance.Origin) -> Any:
    """``line`` with ``origin``'s mark appended (unchanged if blank or already marked)."""
    if isinstance(line, str):
        return line + recorder.mark_for(origin) if _unmarked(line) else line
    if isinstance(line, _deferred_line_base()) and isinstance(line.line, str):
        if _unmarked(line.line):
            return line._new_line(line.line + recorder.mark_for(origin))
    return line


@functools.lru_cache(maxsize=1)
def _deferred_line_base() -> type:
    from torch._inductor.utils import DeferredLineBase

    return DeferredLineBase


# What define_kernel rewrites in a kernel's source after we record it: placeholders become the
# kernel's names (``Placeholder.KERNEL_NAME_micro_gemm`` -> ``kernel_micro_gemm`` in the C++ GEMM
# template) and C++ comment pragmas become comments.
_PRAGMA_COMMENT = ("#pragma CMT", "//")


@functools.lru_cache(maxsize=1)
def _placeholders() -> tuple[str, ...]:
    from torch._inductor.utils import Placeholder

    return tuple(str(placeholder) for placeholder in Placeholder)


@functools.lru_cache(maxsize=4096)
def renamed_line_pattern(line: str) -> Optional["re.Pattern[str]"]:
    """A pattern matching what define_kernel makes of ``line`` (stripped), or None if it leaves it as is."""
    if not any(p in line for p in _placeholders()) and _PRAGMA_COMMENT[0] not in line:
        return None
    pattern = re.escape(line)
    for placeholder in _placeholders():
        pattern = pattern.replace(re.escape(placeholder), r"\w+")
    return re.compile(pattern.replace(re.escape(_PRAGMA_COMMENT[0]), re.escape(_PRAGMA_COMMENT[1])))


@install_once
def install() -> None:
    """Patch writeline and the schedulers' define_kernel once per process."""
    import importlib

    from torch._inductor.utils import IndentedBuffer

    original_writeline = IndentedBuffer.writeline

    state = provenance.thread_state()  # read directly: this runs for every line Inductor writes

    def writeline(self: Any, line: Any) -> None:
        origin = getattr(state, "emission", None)
        if origin is not None:
            recorder = getattr(state, "recorder", None)
            if recorder is not None:
                line = mark_line(line, recorder, origin)
        return original_writeline(self, line)

    IndentedBuffer.writeline = writeline

    for module_name, class_name in SCHEDULERS:
        cls = getattr(importlib.import_module(module_name), class_name)
        cls.define_kernel = _stripping_define_kernel(cls.define_kernel)


def template_origins(nodes: Any) -> list[provenance.Origin]:
    """Origins for the template text of a kernel whose scheduler nodes are ``nodes`` ([] if no template).

    The template buffer's ``origin_node`` (the FX node it was lowered from) when Inductor set one,
    else every FX node in its ``origins``.
    """
    for snode in nodes if isinstance(nodes, (list, tuple)) else ():
        is_template = getattr(snode, "is_template", None)
        if not callable(is_template) or not is_template():
            continue
        buffer = getattr(snode, "node", None)
        template = getattr(buffer, "template", None)
        name = getattr(template, "name", None) or type(buffer).__name__
        origin_node = buffer.get_origin_node()
        fx_nodes = [origin_node.name] if origin_node is not None else sorted(
            {node.name for node in getattr(buffer, "origins", None) or ()})
        return [provenance.origin_of(f"template:{name}", fx_node) for fx_node in fx_nodes]
    return []


def _is_template_text(line: str) -> bool:
    """A line the template wrote for its node (not blank, not the shared ``#include`` prologue)."""
    text = line.strip()
    return bool(text) and not text.startswith("#include")


def _stripping_define_kernel(original: Any) -> Any:
    def define_kernel(self: Any, src_code: str, *args: Any, **kwargs: Any) -> Any:
        recorder = provenance.active_recorder()
        if recorder is None:
            return original(self, src_code, *args, **kwargs)
        try:
            template = template_origins(args[0] if args else kwargs.get("nodes", kwargs.get("node_schedule")))
        except Exception as exc:  # noqa: BLE001 - provenance must never break a compile
            recorder.problems.append(f"line_marks: template origins: {exc!r}")
            template = []
        if not template and provenance.MARK_PREFIX not in src_code:
            return original(self, src_code, *args, **kwargs)
        clean, per_line = recorder.strip(src_code)
        if template:
            per_line = [origins or (template if _is_template_text(text) else [])
                        for origins, text in zip(per_line, clean.split("\n"))]
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
        params = list(inspect.signature(inspect.unwrap(define)).parameters)
        if params[:3] not in (["self", "src_code", "nodes"], ["self", "src_code", "node_schedule"]):
            raise SeamMoved(f"line_marks: {class_name}.define_kernel no longer takes (src_code, nodes): {params}")
    from torch._inductor.codegen.cpp import CppScheduling
    from torch._inductor.ir import TemplateBuffer
    from torch._inductor.scheduler import BaseSchedulerNode

    define_source = inspect.getsource(inspect.unwrap(CppScheduling.define_kernel))
    for rewrite in ("str(Placeholder.KERNEL_NAME)", "str(Placeholder.DESCRIPTIVE_NAME)", '"#pragma CMT", "//"'):
        if rewrite not in define_source:
            raise SeamMoved(f"line_marks: CppScheduling.define_kernel no longer rewrites {rewrite} "
                            "(renamed_line_pattern must follow)")

    if not callable(getattr(BaseSchedulerNode, "is_template", None)):
        raise SeamMoved("line_marks: BaseSchedulerNode.is_template is gone (template kernels)")
    for attr in ("get_origin_node", "origins"):
        if not hasattr(TemplateBuffer, attr):
            raise SeamMoved(f"line_marks: IR template buffers no longer have {attr} (template kernels)")
