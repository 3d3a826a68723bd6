"""Seam: ``IndentedBuffer``'s ``writeline``, ``splice`` and ``getvaluewithlinemap``; and a listener
of the schedulers' ``define_kernel`` (wrapped once, in :mod:`.define_kernel`).

While a LoopBody node is being generated, every line a buffer receives is tagged with that
node's origin in the :class:`~instrumented_backend.provenance.recorder.LineRecorder`'s side tables,
keyed by the identity of the object Inductor appended. **The text is never touched**: every
argument is passed on unchanged and every return value is Inductor's own, so whatever Inductor
reads, compares, hashes or keys on (CSE caches keyed on ``getvalue()``, ``DeferredLine.line``
and expression strings, ``src_to_kernel`` dedup, ``#pragma`` rewrites) is plain Inductor's
text by construction. The hooks only add entries to the side tables:

* ``writeline``: the appended entry takes the tag of the line object passed (a line moved from
  another buffer keeps its tag: innermost wins), else that of a buffer text written back whole,
  else the current emission origin;
* ``splice``: entries spliced from another buffer keep their tags one for one (``splice``
  re-slices them into new objects); a spliced text keeps the tags ``getvalue()`` recorded for it;
* ``getvaluewithlinemap`` (``getvalue``): the text returned is registered with the origin of
  each of its physical lines;
* ``define_kernel`` (:func:`on_define_kernel`): the origins of the kernel source's lines are
  recorded under the kernel name it returns.

Template kernels (the C++ GEMM template, Triton's mm templates) are mostly template text, not
LoopBody code: only their fused epilogues are tagged as they are generated. ``define_kernel``
receives the scheduler nodes of the kernel, so every untagged line of a template kernel is
attributed to the template node's FX node(s), with the IR op ``template:<template name>``
(e.g. ``template:packed_gemm``), which says how it was attributed.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Optional

from ..provenance import recorder as provenance
from . import Replacement, ScopedPatches, SeamMoved, install_once

if TYPE_CHECKING:
    from .define_kernel import KernelDefinition

__all__ = ["install", "tagging", "check", "on_define_kernel", "entry_text", "template_origins", "renamed_line_pattern"]


@functools.lru_cache(maxsize=1)
def _inductor_line_types() -> tuple[type, type]:
    from torch._inductor.utils import DeferredLineBase, LineContext

    return DeferredLineBase, LineContext


def entry_text(entry: Any) -> Optional[str]:
    """The text a buffer entry stands for (a deferred line's line), or None for a line context."""
    if isinstance(entry, str):
        return entry
    deferred, _ = _inductor_line_types()
    if isinstance(entry, deferred):
        return entry.line if isinstance(entry.line, str) else None
    return None


def _tag_for(line: Any, recorder: provenance.LineRecorder, state: Any) -> tuple[Optional[provenance.LineTag], bool]:
    """(the tag a line written now gets, whether it is freshly emitted) for ``writeline(line)``."""
    carried = recorder.entry_tag(line)
    if carried is not None:
        return carried, False
    text = entry_text(line)
    if text is None or not text.strip():
        return None, False
    origin = state.emission
    if "\n" in text:  # a buffer's text written back whole: its own tags win, line by line
        known = recorder.text_tag(text)
        if known is not None:
            count = provenance.physical_lines(text)
            return tuple((known[i] if i < len(known) else None) or origin for i in range(count)), False
        return ((origin,) * provenance.physical_lines(text) if origin is not None else None), True
    return ((origin,) if origin is not None else None), True


def _text_origins(buffer: Any, recorder: provenance.LineRecorder) -> Optional[list[Optional[provenance.Origin]]]:
    """The origin of each physical line of ``buffer.getvalue()``, or None if none is tagged."""
    deferred, context = _inductor_line_types()
    entries = buffer._lines
    tags = recorder.entry_tags(entries)
    if not any(tags):
        return None
    origins: list[Optional[provenance.Origin]] = []
    for entry, tag in zip(entries, tags):
        if type(entry) is str:
            text: Any = entry
        elif isinstance(entry, context):
            continue
        else:
            text = entry() if isinstance(entry, deferred) else entry
            if text is None:
                continue
        count = text.count("\n") + 1  # provenance.physical_lines, inlined: once per line of every kernel
        if tag is None:
            origins.extend([None] * count)
        elif count == 1:
            origins.append(tag[0])
        else:
            origins.extend(tag[i] if i < len(tag) else tag[-1] for i in range(count))
    origins.append(None)  # getvalue ends every entry with a newline
    return origins


def _spliced_text_tags(
    text: str, strip: bool, known: list[Optional[provenance.Origin]]
) -> list[Optional[provenance.Origin]]:
    """The tags of the lines ``splice(text, strip)`` writes, in order (it dedents, strips, splits)."""
    import textwrap

    body = textwrap.dedent(text)
    skipped = 0
    if strip:
        stripped = body.lstrip()
        skipped = body[: len(body) - len(stripped)].count("\n")
        body = stripped
    count = provenance.physical_lines(body.rstrip()) if body.rstrip() else 0
    return [known[i] if i < len(known) else None for i in range(skipped, skipped + count)]


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
    """Check, once per process, that the buffers still work as the hooks assume (the hooks
    themselves are in place only while :func:`tagging`)."""


def tagging() -> ContextManager[None]:
    """IndentedBuffer's writeline, splice and getvaluewithlinemap hooked for the block (an
    instrumented compile); outside every such block, Inductor's own methods run unwrapped."""
    install()
    return _hooks.active()


def _tagging_writeline(original_writeline: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
    state = provenance.thread_state()  # read directly: writeline runs for every line Inductor writes

    def writeline(self: Any, line: Any) -> None:
        recorder = state.recorder
        if recorder is None:
            return original_writeline(self, line)
        if type(line) is str and "\n" not in line:  # the common case, inlined: what _tag_for says
            tag = recorder._entry_tags.get(id(line))
            if tag is not None:
                fresh = False  # a line moved from another buffer keeps its tag
            else:
                origin = state.emission  # a new line: the emitting node's origin, if any
                if origin is None:
                    return original_writeline(self, line)
                tag, fresh = state.emission_tag, True  # one tag shared by a node's lines: no new pair each
                if tag is None or tag[0] is not origin:
                    tag = state.emission_tag = (origin,)
        else:
            tag, fresh = _tag_for(line, recorder, state)
            if tag is None:
                return original_writeline(self, line)
        lines = self._lines
        before = len(lines)
        original_writeline(self, line)
        if len(lines) == before + 1 and self._lines is lines:
            entry = lines[-1]
            if entry != "":  # a blank line is written as the one shared "": never tagged
                key = id(entry)  # recorder.tag_entry(entry, tag, fresh), inlined: once per line
                recorder._entry_lines[key] = entry
                recorder._entry_tags[key] = tag
                if fresh:
                    recorder._fresh_lines.append(entry)
                    recorder._fresh_tags.append(tag)

    return writeline


def _tagging_splice(original_splice: Callable[..., None]) -> Callable[..., None]:
    from torch._inductor.utils import IndentedBuffer

    state = provenance.thread_state()

    def splice(self: Any, other_code: Any, strip: bool = False) -> None:
        recorder = state.recorder
        if recorder is None:
            return original_splice(self, other_code, strip)
        if isinstance(other_code, IndentedBuffer):
            carried = recorder.entry_tags(other_code._lines)
        else:
            known = recorder.text_tag(other_code) if isinstance(other_code, str) else None
            carried = _spliced_text_tags(other_code, strip, known) if known is not None else []
            carried = [(origin,) if origin is not None else None for origin in carried]
        lines = self._lines
        before = len(lines)
        original_splice(self, other_code, strip)
        if any(carried) and self._lines is lines and len(lines) == before + len(carried):
            for entry, tag in zip(lines[before:], carried):
                if tag is not None:
                    recorder.tag_entry(entry, tag)

    return splice


def _registering_getvalue(original_getvalue: Callable[[Any], Any]) -> Callable[[Any], Any]:
    state = provenance.thread_state()

    def getvaluewithlinemap(self: Any) -> Any:
        result = original_getvalue(self)
        recorder = state.recorder
        if recorder is not None:
            try:
                origins = _text_origins(self, recorder)
                if origins is not None and len(origins) == provenance.physical_lines(result.value):
                    recorder.register_text(result.value, origins)
            except Exception as exc:  # noqa: BLE001 - provenance must never break a compile
                recorder.problems.append(f"line_tags: getvalue: {exc!r}")
        return result

    return getvaluewithlinemap


def _replacements() -> list[Replacement]:
    from torch._inductor.utils import IndentedBuffer

    return [(IndentedBuffer, "writeline", _tagging_writeline), (IndentedBuffer, "splice", _tagging_splice),
            (IndentedBuffer, "getvaluewithlinemap", _registering_getvalue)]


_hooks = ScopedPatches(_replacements)


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
        fx_nodes = [provenance.fx_label(origin_node)] if origin_node is not None else sorted(
            {provenance.fx_label(node) for node in getattr(buffer, "origins", None) or ()})
        return [provenance.origin_of(f"template:{name}", fx_node) for fx_node in fx_nodes]
    return []


def _is_template_text(line: str) -> bool:
    """A line the template wrote for its node (not blank, not the shared ``#include`` prologue)."""
    text = line.strip()
    return bool(text) and not text.startswith("#include")


def on_define_kernel(definition: "KernelDefinition") -> Callable[[str], None]:
    """Read the origins of the kernel source's lines now; record them under the kernel's name after."""
    recorder, src_code = definition.recorder, definition.src_code
    per_line = recorder.kernel_origins(src_code)
    template = template_origins(definition.nodes)
    if template:
        per_line = [origins or (template if _is_template_text(text) else [])
                    for origins, text in zip(per_line, src_code.split("\n"))]
    return lambda kernel_name: recorder.record_kernel(kernel_name, src_code, per_line)


def check() -> None:
    """Raise SeamMoved unless the buffers still move lines one entry at a time and define_kernel takes what we pass."""
    import inspect

    from torch._inductor.utils import IndentedBuffer, LineContext

    for method in ("writeline", "splice", "getvaluewithlinemap", "getvalue"):
        if not callable(getattr(IndentedBuffer, method, None)):
            raise SeamMoved(f"line_tags: IndentedBuffer.{method} is gone")
    if "getvaluewithlinemap()" not in inspect.getsource(IndentedBuffer.getvalue):
        raise SeamMoved("line_tags: IndentedBuffer.getvalue no longer goes through getvaluewithlinemap")
    # The tags follow entries one for one: writeline appends one entry, splice one per entry.
    probe, inner = IndentedBuffer(), IndentedBuffer()
    inner.writeline("a")
    inner.writeline(LineContext("ctx"))
    with inner.indent():
        inner.writeline("b")
    inner.writeline("")
    if not hasattr(probe, "_lines") or len(inner._lines) != 4:
        raise SeamMoved("line_tags: IndentedBuffer.writeline no longer appends one entry to _lines per line")
    probe.writeline("x")
    probe.splice(inner)
    if len(probe._lines) != 5 or probe._lines[2] != LineContext("ctx") or probe._lines[3] != "    b":
        raise SeamMoved("line_tags: IndentedBuffer.splice no longer writes one entry per spliced entry")
    if probe.getvalue() != "x\na\n    b\n\n":
        raise SeamMoved("line_tags: IndentedBuffer.getvalue no longer writes one line per entry")
    from torch._inductor.codegen.cpp import CppScheduling
    from torch._inductor.ir import TemplateBuffer
    from torch._inductor.scheduler import BaseSchedulerNode

    define_source = inspect.getsource(inspect.unwrap(CppScheduling.define_kernel))
    for rewrite in ("str(Placeholder.KERNEL_NAME)", "str(Placeholder.DESCRIPTIVE_NAME)", '"#pragma CMT", "//"'):
        if rewrite not in define_source:
            raise SeamMoved(f"line_tags: CppScheduling.define_kernel no longer rewrites {rewrite} "
                            "(renamed_line_pattern must follow)")

    if not callable(getattr(BaseSchedulerNode, "is_template", None)):
        raise SeamMoved("line_tags: BaseSchedulerNode.is_template is gone (template kernels)")
    for attr in ("get_origin_node", "origins"):
        if not hasattr(TemplateBuffer, attr):
            raise SeamMoved(f"line_tags: IR template buffers no longer have {attr} (template kernels)")
