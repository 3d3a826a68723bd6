"""Attach recorded line tags to the kernel lines of the output code."""

from __future__ import annotations

import re
from typing import Optional

from ..recording.recorder import LineRecorder, Origin
from ..records import WRAPPER, KernelInfo, KernelLine, NodeProvenance, SourceLocation
from ..seams.codegen.line_tags import renamed_line_pattern
from .kernels import call_body_ranges

__all__ = ["attach_lines", "attach_wrapper_lines"]


def _unique(items: list[Optional[str]]) -> list[str]:
    seen: list[str] = []
    for item in items:
        if item and item not in seen:
            seen.append(item)
    return seen


def _align(kernel: KernelInfo, clean_source: str, line_origins: list[list[Origin]],
           per_line: list[list[Origin]]) -> int:
    """Copy origins of tagged clean lines onto the matching kernel lines; return how many were lost."""
    target = [line.strip() for line in kernel.source_lines]
    cursor, lost = 0, 0
    for text, origins in zip(clean_source.split("\n"), line_origins):
        if not origins:
            continue
        wanted = text.strip()
        renamed = renamed_line_pattern(wanted)  # define_kernel renamed a placeholder in it
        index = cursor
        while index < len(target) and target[index] != wanted and not (
                renamed is not None and renamed.fullmatch(target[index])):
            index += 1
        if index == len(target):
            lost += 1
            continue
        for origin in origins:
            if origin not in per_line[index]:
                per_line[index].append(origin)
        cursor = index + 1
    return lost


def make_line(kernel: str, number: int, text: str, ir_ops: list[str], fx_nodes: list[str],
              nodes: dict[str, NodeProvenance]) -> KernelLine:
    """A KernelLine whose Dynamo nodes and source come from the node map."""
    dynamo: list[str] = []
    source: Optional[SourceLocation] = None
    for name in fx_nodes:
        info = nodes.get(name)
        if info is not None:
            dynamo.extend(d for d in info.dynamo_nodes if d not in dynamo)
            # A kernel line Inductor wrote for a graph input serves the input's first user.
            source = source or info.source or (info.first_use if kernel != WRAPPER else None)
    return KernelLine(kernel=kernel, number=number, text=text, ir_ops=ir_ops, fx_nodes=fx_nodes,
                      dynamo_nodes=dynamo, source=source)


def attach_lines(kernels: list[KernelInfo], recorder: LineRecorder, nodes: dict[str, NodeProvenance]) -> int:
    """Fill ``kernel.lines`` for every generated kernel; returns the count of marks that found no line."""
    lost = 0
    for kernel in kernels:
        if kernel.kind == "extern":
            continue
        source_lines = kernel.source_lines
        per_line: list[list[Origin]] = [[] for _ in source_lines]
        for tagged in recorder.kernels.get(kernel.name, []):
            lost += _align(kernel, tagged.clean_source, tagged.line_origins, per_line)
        kernel.lines = [
            make_line(kernel.name, kernel.source_start_line + offset, text,
                      _unique([o.ir_op for o in origins]), _unique([o.fx_node for o in origins]), nodes)
            for offset, (text, origins) in enumerate(zip(source_lines, per_line))
        ]
    return lost


_WRITTEN = (
    re.compile(r"\bout=\(?(?P<name>[A-Za-z_]\w*)"),        # extern_kernels.addmm(..., out=buf0)
    re.compile(r"^(?P<name>[A-Za-z_]\w*)\s*=(?!=)"),          # buf0 = empty_strided_cpu(...) / op(...)
    re.compile(r"^del (?P<name>[A-Za-z_]\w*)"),                # del buf0
    re.compile(r"\b(?P<name>[A-Za-z_]\w*?)_handle\b"),         # C++ wrapper: AtenTensorHandle buf0_handle;
)
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
# The call's arguments unpacked: ``arg0_1, arg1_1 = args`` or, in the C++ wrapper,
# ``auto inputs = steal_from_raw_handles_to_raii_handles(input_handles, 5);``.
_UNPACKS_ARGUMENTS = re.compile(r"= args$|\(input_handles\b")
_REFERENCE = r"(?<![\w.>:]){}\b"  # a name as a variable, not a member (buf0.release()) or qualified name
_VARIABLE = re.compile(_REFERENCE.format(r"[A-Za-z_]\w*"))
# A helper a statement declares: ``u0 = buf1.item()``, ``(buf1_cond_result,) = ...`` (Python), or
# ``static constexpr int64_t int_array_3[] = {...};``, ``bool buf1_cond_result;``,
# ``[[maybe_unused]] auto& fc_weight = constants_->at(3);`` (C++).
_DECLARED = (
    re.compile(r"^\(?(?P<name>[A-Za-z_]\w*)\s*(?:,\s*\))?\s*=(?!=)"),
    re.compile(r"^(?:\[\[\w+\]\]\s*)?(?:(?:static|constexpr|const|auto|[A-Za-z_][\w:]*(?:<[^;=]*>)?[*&]?)\s+)+"
               r"(?P<name>[A-Za-z_]\w*)\s*(?:\[\d*\])?\s*(?:=|;|\(|\{)"),
)


def _written_name(statement: str, known: dict[str, list[str]]) -> Optional[str]:
    for pattern in _WRITTEN:
        match = pattern.search(statement)
        if match is not None and match.group("name") in known:
            return match.group("name")
    for match in _NAME.finditer(statement):  # assert_size_stride(arg0_1, ...), kernel args
        if match.group(0) in known:
            return match.group(0)
    return None


def attach_wrapper_lines(output_code: str, kernels: list[KernelInfo], recorder: LineRecorder,
                         nodes: dict[str, NodeProvenance]) -> list[KernelLine]:
    """Attribute each statement of the wrapper's ``call()`` to the FX nodes it computes or handles.

    * a generated kernel's call line: every FX node of the kernel's tagged lines;
    * any other statement: the FX nodes lowered into the buffer it writes (``out=buf0``,
      ``buf0 = ...``), frees (``del buf0``) or, failing those, first names, the op the buffer
      computes first (see ``buffer_origins``), so the statement's source is that op's; a graph input
      (``assert_size_stride(arg0_1, ...)``) is attributed to its placeholder node.

    Buffer origins are recorded by Inductor at lowering (``seams/codegen/wrapper_buffers.py``); the
    name matching only joins a statement to the buffer it names. A statement that names no buffer
    but declares or reads a helper takes the tags of the statement the helper serves (see
    ``_attribute_helpers``). Extern kernels get their call line, with the extern op as IR op, as
    their one line. Comments, ``return`` and argument-unpacking lines are left out.
    """
    lines = output_code.splitlines()
    known: dict[str, list[str]] = {name: [name] for name in recorder.graph_inputs}
    known.update(recorder.buffer_origins)  # the op each buffer computes first: the statement's source
    extern_at = {k.start_line: k for k in kernels if k.kind == "extern"}
    kernel_nodes = {
        k.name: _unique([n for line in k.lines for n in line.fx_nodes]) for k in kernels if k.kind != "extern"
    }
    called_at = {n: k.name for k in kernels if k.kind != "extern" for n in k.call_lines}
    result: list[KernelLine] = []
    for start, end in call_body_ranges(lines):
        body_start = len(result)
        for index in range(start, end):
            number, text = index + 1, lines[index]
            statement = text.strip()
            if not statement or statement.startswith(("#", "//", "return")) or _UNPACKS_ARGUMENTS.search(statement):
                continue
            if number in called_at:
                fx_nodes = kernel_nodes.get(called_at[number], [])
            else:
                name = _written_name(statement, known)
                fx_nodes = list(known[name]) if name is not None else []
            extern = extern_at.get(number)
            ir_ops = [extern.name] if extern is not None and fx_nodes else []
            result.append(make_line(WRAPPER, number, text, ir_ops, fx_nodes, nodes))
            if extern is not None:
                extern.lines = [make_line(extern.name, number, text, ir_ops, fx_nodes, nodes)]
        result[body_start:] = _attribute_helpers(result[body_start:], nodes)
    return result


def _declared_name(statement: str) -> Optional[str]:
    for pattern in _DECLARED:
        match = pattern.match(statement)
        if match is not None:
            return match.group("name")
    return None


def _attribute_helpers(body: list[KernelLine], nodes: dict[str, NodeProvenance]) -> list[KernelLine]:
    """``body`` (one call body's statements) with those that name no buffer tagged by the
    statements they serve.

    A helper a statement declares (a C++ wrapper's size and stride array, a constant's reference, a
    ``while_loop``'s condition flag) serves the first later tagged statement that uses it: Inductor
    declares a helper right before the allocation or call it was made for (and reuses it later). A
    statement that only reads a helper declared earlier (the runtime check of an unbacked size:
    ``if not (u0 >= 0):``) serves the statement that computed it.
    """
    body = list(body)
    statements = [line.text.strip() for line in body]
    declared = [_declared_name(statement) for statement in statements]

    def copy(index: int, source: KernelLine) -> None:
        line = body[index]
        body[index] = make_line(WRAPPER, line.number, line.text, [], list(source.fx_nodes), nodes)

    for index in reversed(range(len(body))):  # declarations, from the last: a chain resolves backwards
        name = declared[index]
        if body[index].tagged or name is None:
            continue
        uses = re.compile(_REFERENCE.format(re.escape(name)))
        user = next((later for later in body[index + 1:] if later.tagged and uses.search(later.text)), None)
        if user is not None:
            copy(index, user)
    computed_at: dict[str, KernelLine] = {}
    for index, statement in enumerate(statements):  # reads of a helper computed earlier
        if not body[index].tagged:
            source = next((computed_at[name] for name in _VARIABLE.findall(statement) if name in computed_at), None)
            if source is not None:
                copy(index, source)
        name = declared[index]
        if name is not None and body[index].tagged and name not in computed_at:
            computed_at[name] = body[index]
    return body
