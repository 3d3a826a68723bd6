"""Seam: ``IndentedBuffer``'s ``writeline``, ``splice`` and ``getvaluewithlinemap``; and a listener
of the schedulers' ``define_kernel`` (wrapped once, in :mod:`.define_kernel`).

While a LoopBody node is being generated, every line a buffer receives is tagged with that
node's origin in the :class:`~instrumented_backend.recording.recorder.LineRecorder`'s side tables,
keyed by the identity of the object Inductor appended. **The text is never touched**: every
argument is passed on unchanged and every return value is Inductor's own, so whatever Inductor
reads, compares, hashes or keys on (CSE caches keyed on ``getvalue()``, ``DeferredLine.line``
and expression strings, ``src_to_kernel`` dedup, ``#pragma`` rewrites) is plain Inductor's
text. Two exceptions, for speed: a buffer spliced into another is written by a copy of
Inductor's ``splice`` (:func:`_splice_entries`, two Python calls fewer per line; kernel buffers
are spliced into one another several times per line), which ``check()`` compares with
Inductor's on sample buffers before any hook goes in place; and a plain one-line string written
to a buffer is appended by the hook itself, indented by the buffer's ``prefix()``, as Inductor's
``writeline`` appends it (``check()`` reads its source). The hooks only add entries to the side
tables:

* ``writeline``: the appended entry takes the tag of the line object passed (a line moved from
  another buffer keeps its tag: innermost wins), else that of a buffer text written back whole,
  else the current emission origin;
* ``splice``: entries spliced from another buffer keep their tags one for one (``splice``
  re-slices them into new objects), the others take the emission's, as ``writeline`` would give
  them, all tagged in one pass after the splice (a buffer holding multi-line entries is spliced
  by Inductor, its lines tagged one by one); a spliced text keeps the tags ``getvalue()``
  recorded for it;
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

from ...recording import recorder as recording
from .. import Replacement, ScopedPatches, SeamMoved, install_once

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


def _tag_for(line: Any, recorder: recording.LineRecorder, state: Any) -> tuple[Optional[recording.LineTag], bool]:
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
            count = recording.physical_lines(text)
            return tuple((known[i] if i < len(known) else None) or origin for i in range(count)), False
        return ((origin,) * recording.physical_lines(text) if origin is not None else None), True
    return ((origin,) if origin is not None else None), True


def _text_origins(buffer: Any, recorder: recording.LineRecorder) -> Optional[list[Optional[recording.Origin]]]:
    """The origin of each physical line of ``buffer.getvalue()``, or None if none is tagged."""
    deferred, context = _inductor_line_types()
    entries = buffer._lines
    tags = recorder.entry_tags(entries)
    if not any(tags):
        return None
    origins: list[Optional[recording.Origin]] = []
    for entry, tag in zip(entries, tags):
        if type(entry) is str:
            text: Any = entry
        elif isinstance(entry, context):
            continue
        else:
            text = entry() if isinstance(entry, deferred) else entry
            if text is None:
                continue
        count = text.count("\n") + 1  # recording.physical_lines, inlined: once per line of every kernel
        if tag is None:
            origins.extend([None] * count)
        elif count == 1:
            origins.append(tag[0])
        else:
            origins.extend(tag[i] if i < len(tag) else tag[-1] for i in range(count))
    origins.append(None)  # getvalue ends every entry with a newline
    return origins


def _spliced_text_tags(
    text: str, strip: bool, known: list[Optional[recording.Origin]]
) -> list[Optional[recording.Origin]]:
    """The tags of the lines ``splice(text, strip)`` writes, in order (it dedents, strips, splits)."""
    import textwrap

    body = textwrap.dedent(text)
    skipped = 0
    if strip:
        stripped = body.lstrip()
        skipped = body[: len(body) - len(stripped)].count("\n")
        body = stripped
    count = recording.physical_lines(body.rstrip()) if body.rstrip() else 0
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
    state = recording.thread_state()  # read directly: writeline runs for every line Inductor writes

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
            if not line.strip():  # what Inductor's writeline appends for a plain line, written directly
                self._lines.append("")  # a blank line: never tagged
                return
            entry = f"{self.prefix()}{line}"
            self._lines.append(entry)
            key = id(entry)  # recorder.tag_entry(entry, tag, fresh), inlined: once per line
            recorder._entry_lines[key] = entry
            recorder._entry_tags[key] = tag
            if fresh:
                recorder._fresh_lines.append(entry)
                recorder._fresh_tags.append(tag)
            return
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
                recorder.tag_entry(entry, tag, fresh)

    return writeline


def _tagging_splice(original_splice: Callable[..., None]) -> Callable[..., None]:
    from torch._inductor.utils import IndentedBuffer

    state = recording.thread_state()
    # Applied before writeline's hook (see _replacements): Inductor's own writeline, for the
    # deferred lines a spliced buffer holds.
    original_writeline = IndentedBuffer.writeline

    def splice(self: Any, other_code: Any, strip: bool = False) -> None:
        recorder = state.recorder
        if recorder is None:
            return original_splice(self, other_code, strip)
        lines = self._lines
        before = len(lines)
        if isinstance(other_code, IndentedBuffer):
            entries = other_code._lines
            if not _single_line_entries(entries):  # rare: writeline's hook tags them one by one
                return _splice_tagging_each_line(original_splice, recorder, self, other_code, strip)
            carried = recorder.entry_tags(entries)
            _splice_entries(self, entries, original_writeline)
        else:
            known = recorder.text_tag(other_code) if isinstance(other_code, str) else None
            carried = _spliced_text_tags(other_code, strip, known) if known is not None else []
            carried = [(origin,) if origin is not None else None for origin in carried]
            state.recorder = None  # writeline's hook passes each line straight on: tagged below, in one pass
            try:
                original_splice(self, other_code, strip)
            finally:
                state.recorder = recorder
        if self._lines is lines:
            _tag_spliced(recorder, state, lines, before, carried)

    return splice


def _splice_entries(buffer: Any, entries: list[Any], writeline: Callable[[Any, Any], None]) -> None:
    """What ``IndentedBuffer.splice`` writes for another buffer's ``entries``, written directly:
    the common margin taken off, each entry re-indented to ``buffer``'s indentation, line contexts
    as they are, a blank line as ``""``; a deferred line through ``writeline`` (Inductor's own).
    Plain strings skip two Python calls each (this splice's ``writeline``, then ours): kernel
    buffers are spliced into one another several times per line. ``check()`` compares it with
    Inductor's ``splice``."""
    _, context = _inductor_line_types()
    margin: Optional[int] = None
    for line in entries:
        if not isinstance(line, context) and line:
            width = len(line) - len(line.lstrip())
            if margin is None or width < margin:
                margin = width
    margin = margin or 0
    prefix = buffer.prefix()
    written = buffer._lines
    for line in entries:
        if type(line) is str:
            piece = line[margin:]
            written.append(f"{prefix}{piece}" if piece.strip() else "")
        elif isinstance(line, context):
            written.append(line)
        else:
            writeline(buffer, line[margin:])


def _single_line_entries(entries: Any) -> bool:
    """Every entry is a line context or one line of text (a string or deferred line without a
    newline): what writeline's hook would tag each of, when spliced, is then known from the
    entry written alone."""
    deferred, context = _inductor_line_types()
    for entry in entries:
        if type(entry) is str:
            if "\n" in entry:
                return False
        elif isinstance(entry, deferred):
            if type(entry.line) is not str or "\n" in entry.line:
                return False
        elif not isinstance(entry, context):
            return False
    return True


def _splice_tagging_each_line(original_splice: Callable[..., None], recorder: recording.LineRecorder, buffer: Any,
                              other_code: Any, strip: bool) -> None:
    """Splice a buffer holding multi-line entries: writeline's hook tags each line as it is written
    (a text written back whole keeps its tags), then the spliced entries take the tags they carried."""
    carried = recorder.entry_tags(other_code._lines)
    lines = buffer._lines
    before = len(lines)
    original_splice(buffer, other_code, strip)
    if any(carried) and buffer._lines is lines and len(lines) == before + len(carried):
        for entry, tag in zip(lines[before:], carried):
            if tag is not None:
                recorder.tag_entry(entry, tag)


def _tag_spliced(recorder: recording.LineRecorder, state: Any, lines: list[Any], before: int,
                 carried: list[Optional[recording.LineTag]]) -> None:
    """Tag the entries a splice wrote from ``before`` on (every one a line context or one line of
    text): each takes the tag it carried, else, as writeline's hook would give it, the current
    emission's (a fresh line); blank lines and line contexts stay untagged."""
    written = lines[before:]
    if len(written) != len(carried):  # a text whose tags are not known: written as new lines
        carried = [None] * len(written)
    emission = state.emission
    shared = None
    entry_lines, entry_tags = recorder._entry_lines, recorder._entry_tags
    for entry, tag in zip(written, carried):
        if tag is not None:
            key = id(entry)
            entry_lines[key] = entry
            entry_tags[key] = tag
            continue
        if emission is None or entry == "":
            continue
        if type(entry) is not str:
            text = entry_text(entry)  # a deferred line's text; None for a line context
            if text is None or not text.strip():
                continue
        if shared is None:
            shared = state.emission_tag
            if shared is None or shared[0] is not emission:
                shared = state.emission_tag = (emission,)
        recorder.tag_entry(entry, shared, fresh=True)


def _registering_getvalue(original_getvalue: Callable[[Any], Any]) -> Callable[[Any], Any]:
    state = recording.thread_state()

    def getvaluewithlinemap(self: Any) -> Any:
        result = original_getvalue(self)
        recorder = state.recorder
        if recorder is not None:
            try:
                origins = _text_origins(self, recorder)
                if origins is not None and len(origins) == recording.physical_lines(result.value):
                    recorder.register_text(result.value, origins)
            except Exception as exc:  # noqa: BLE001 - provenance must never break a compile
                recorder.problems.append(f"line_tags: getvalue: {exc!r}")
        return result

    return getvaluewithlinemap


def _replacements() -> list[Replacement]:
    from torch._inductor.utils import IndentedBuffer

    # splice first: it takes Inductor's own writeline, before the hook replaces it
    return [(IndentedBuffer, "splice", _tagging_splice), (IndentedBuffer, "writeline", _tagging_writeline),
            (IndentedBuffer, "getvaluewithlinemap", _registering_getvalue)]


_hooks = ScopedPatches(_replacements)


def template_origins(nodes: Any) -> list[recording.Origin]:
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
        fx_nodes = [recording.fx_label(origin_node)] if origin_node is not None else sorted(
            {recording.fx_label(node) for node in getattr(buffer, "origins", None) or ()})
        return [recording.origin_of(f"template:{name}", fx_node) for fx_node in fx_nodes]
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
    _check_splice_entries(IndentedBuffer, LineContext)
    _check_direct_writeline(IndentedBuffer)
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


# What Inductor's writeline does for a plain line, which writeline's hook does directly.
_WRITELINE_SOURCE = ("elif line.strip():", 'self._lines.append(f"{self.prefix()}{line}")', 'self._lines.append("")')


def _check_direct_writeline(buffer_class: type) -> None:
    """Raise SeamMoved unless Inductor's writeline still appends ``prefix() + line`` for a non-blank
    plain line and ``""`` for a blank one."""
    import inspect

    writeline = inspect.getsource(inspect.unwrap(buffer_class.writeline))
    missing = [fragment for fragment in _WRITELINE_SOURCE if fragment not in writeline]
    if missing:
        raise SeamMoved(f"line_tags: IndentedBuffer.writeline no longer writes a plain line as prefix() + line "
                        f"(missing: {missing}); the hook writes it directly")


def _check_splice_entries(buffer_class: type, line_context: type) -> None:
    """Raise SeamMoved unless :func:`_splice_entries` writes what Inductor's splice writes."""
    from torch._inductor.codegen.common import DeferredLine

    samples = [["    a", "      b", "", "    c"], ["a", "  b"], ["  x", "   ", "  y"], ["\tp", "\t\tq"], [],
               ["", ""], [line_context("ctx"), "   z", DeferredLine("buf0", "   w = 1;"), "   v"],
               [DeferredLine("buf1", "  only")], [line_context("c"), "    k", "  \x0c", "      m"]]

    def shown(entries: list[Any]) -> list[Any]:
        return [(type(e).__name__, getattr(e, "line", e), getattr(e, "name", None)) for e in entries]

    for entries in samples:
        for indent in (0, 2):
            source = buffer_class()
            source._lines = list(entries)
            plain, direct = buffer_class(initial_indent=indent), buffer_class(initial_indent=indent)
            for target in (plain, direct):
                target.writeline("head")
            plain.splice(source)
            _splice_entries(direct, source._lines, buffer_class.writeline)
            if shown(direct._lines) != shown(plain._lines):
                raise SeamMoved(f"line_tags: IndentedBuffer.splice no longer writes {shown(entries)!r} (indent "
                                f"{indent}) as _splice_entries does: {shown(plain._lines)!r}")
