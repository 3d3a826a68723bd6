"""Explain a failed kernel: the compiler's diagnostic, the failing kernel lines, and for each the IR
op, FX node and user source line that produced it (plus the definitions of the temporaries the
failing line uses, where the real culprit often is).

A C++ kernel fails in the C++ compiler (:func:`explain_compile_error` reads its output); a Triton
kernel fails as Python code (a ``SyntaxError`` when Inductor loads it), in Triton's compiler (a
``CompilationError``), or in Triton's interpreter (:func:`explain_kernel_error` reads the error).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from ..provenance.node_map import node_module
from ..records import KernelLine

if TYPE_CHECKING:
    from ..graphs import GraphCapture

__all__ = ["CompilerMessage", "ExplainedLine", "CompileErrorReport", "KernelCompileError",
           "parse_compiler_output", "explain_compile_error", "find_cpp_compile_error", "explain_kernel_error"]

# gcc/clang: "/path/file.cpp:24:58: error: message", then the quoted line "   24 |   code"
_MESSAGE = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:(?P<column>\d+):)?\s*"
                      r"(?P<severity>fatal error|error|warning|note):\s*(?P<text>.*)$")
_QUOTED = re.compile(r"^\s*(?P<line>\d+)\s*\|\s?(?P<code>.*)$")
_TEMP = re.compile(r"\btmp(?:_acc)?\d+\b")


@dataclass
class CompilerMessage:
    """One diagnostic of the C++ compiler."""

    file: str
    line: int
    column: Optional[int]
    severity: str
    text: str
    code: str = ""  # the source line the compiler quoted, when it did

    def __str__(self) -> str:
        column = f":{self.column}" if self.column else ""
        return f"{Path(self.file).name}:{self.line}{column}: {self.severity}: {self.text}"


@dataclass
class ExplainedLine:
    """A kernel line involved in the failure: ``role`` is ``error`` or ``definition`` (of ``variable``)."""

    role: str
    line: KernelLine
    variable: str = ""
    node_targets: list[str] = field(default_factory=list)  # e.g. ["aten.maximum.default"]
    module: str = ""  # the nn.Module its node ran in, as named_modules() names it, and its class


@dataclass
class CompileErrorReport:
    """What failed to compile and where it came from; ``render()`` is what the user reads."""

    graph: str
    kernel: str
    messages: list[CompilerMessage] = field(default_factory=list)
    lines: list[ExplainedLine] = field(default_factory=list)
    language: str = "C++"  # the kernel's: "C++" or "Triton"
    stage: str = "compile"  # where it failed: "compile", or "run" (Triton's interpreter running it)

    @property
    def errors(self) -> list[CompilerMessage]:
        return [m for m in self.messages if m.severity in ("error", "fatal error")]

    def render(self) -> str:
        out = [f"{self.language} {self.stage} error in kernel {self.kernel or '?'} (graph {self.graph})"]
        for message in self.errors:
            out.append(f"  compiler: {message}")
        if not self.lines:
            out.append("  (the failing line could not be matched to a generated kernel line)")
        for item in self.lines:
            if item.role == "error":
                out.append(f"  failing line (output_code.py:{item.line.number}):")
            else:
                out.append(f"  where {item.variable} is defined (output_code.py:{item.line.number}):")
            out.append(f"      {item.line.text.strip()}")
            out.append(f"      {_chain(item)}")
        return "\n".join(out)


def _chain(item: ExplainedLine) -> str:
    line = item.line
    parts = ["<- " + (", ".join(line.ir_ops) or "?")]
    if line.fx_nodes:
        targets = item.node_targets or ["?"]
        parts.append("<- " + ", ".join(f"{t} ({n})" for t, n in zip(targets, line.fx_nodes)))
    if line.source is not None:
        parts.append(f"<- {line.source.code or '?'}  [{Path(line.source.file).name}:{line.source.line}]")
    if item.module:
        parts.append(f"in module {item.module}")
    return " ".join(parts)


class _CppCompileErrorBase(RuntimeError):
    pass


def _cpp_compile_error_type() -> type:
    try:
        from ..seams.runtime.errors import cpp_compile_error_type

        CppCompileError = cpp_compile_error_type()
    except ImportError:  # pragma: no cover
        return _CppCompileErrorBase
    return CppCompileError


class KernelCompileError(_cpp_compile_error_type()):  # type: ignore[misc]
    """Inductor's ``CppCompileError``, its message the explanation (``.report``) alone.

    The compiler's whole output (often thousands of lines of warnings from torch's headers) is
    kept in ``compiler_output`` and written to the file ``log_path`` that the message names, not
    put into the message, so what is printed starts and mostly stays with the explanation.
    """

    def __init__(self, cmd: list[str], output: str, report: CompileErrorReport) -> None:
        super().__init__(cmd, output)
        self.report = report
        self.compiler_output = output
        self.log_path = _write_log(cmd, output)
        where = f"written to {self.log_path}" if self.log_path else "in .compiler_output"
        self.args = (f"{report.render()}\n(the compiler's full output, {len(output.splitlines())} lines: {where})",)


def _write_log(cmd: list[str], output: str) -> Optional[str]:
    """The compile command and output in a new file, or None if it cannot be written."""
    import tempfile

    try:
        handle, path = tempfile.mkstemp(prefix="kernel-compile-error-", suffix=".log")
        with os.fdopen(handle, "w", encoding="utf-8") as log:
            log.write(" ".join(str(part) for part in cmd) + "\n\n" + output)
        return path
    except OSError:
        return None


def parse_compiler_output(output: str) -> list[CompilerMessage]:
    """The compiler's diagnostics in ``output``, each with the source line it quoted."""
    messages: list[CompilerMessage] = []
    lines = output.splitlines()
    for index, raw in enumerate(lines):
        match = _MESSAGE.match(raw.strip())
        if match is None:
            continue
        message = CompilerMessage(
            file=match.group("file"), line=int(match.group("line")),
            column=int(match.group("column")) if match.group("column") else None,
            severity=match.group("severity"), text=match.group("text").strip())
        if index + 1 < len(lines):
            quoted = _QUOTED.match(lines[index + 1])
            if quoted is not None and int(quoted.group("line")) == message.line:
                message.code = quoted.group("code")
        if not message.code:
            message.code = _read_line(message.file, message.line)
        messages.append(message)
    return messages


def _read_line(path: str, number: int) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for current, text in enumerate(handle, start=1):
                if current == number:
                    return text.rstrip("\n")
    except OSError:
        pass
    return ""


def find_cpp_compile_error(exc: BaseException) -> Optional[Any]:
    """The CppCompileError inside ``exc`` (itself, InductorError.inner_exception, or its causes)."""
    from ..seams.runtime.errors import exception_chain

    error_type = _cpp_compile_error_type()
    return next((error for error in exception_chain(exc) if isinstance(error, error_type)), None)


def _definitions(kernel_lines: list[KernelLine], before: int, names: list[str]) -> list[tuple[str, KernelLine]]:
    found = []
    for name in names:
        pattern = re.compile(rf"^\s*(?:[\w:<>,\s]+?\s+)?{re.escape(name)}\s*=(?!=)")
        candidates = [line for line in kernel_lines if line.number < before and pattern.match(line.text)]
        if candidates:
            found.append((name, candidates[-1]))
    return found


def explain_compile_error(graph: "GraphCapture", output: str) -> CompileErrorReport:
    """Match the compiler's error lines to ``graph``'s kernel lines and explain each."""
    return _explained(CompileErrorReport(graph=graph.label, kernel="", messages=parse_compiler_output(output)), graph)


def explain_kernel_error(graphs: "list[GraphCapture]", exc: BaseException) -> Optional[CompileErrorReport]:
    """The failing Triton kernel line of ``exc``, explained, when ``exc`` (or an error it carries)
    names one of a kernel of ``graphs``: a ``SyntaxError`` (its line), Triton's
    ``CompilationError`` (the node it points at in the kernel's source) or an error raised while
    Triton's interpreter ran the kernel (the kernel's frame in its traceback). None otherwise."""
    import traceback

    from ..seams.runtime.errors import exception_chain

    for error in exception_chain(exc):
        found: list[tuple[str, int, str]] = []  # (file, line, code)
        stage = "compile"
        if isinstance(error, SyntaxError) and error.text:
            found.append((error.filename or "", error.lineno or 0, error.text))
        source, node = getattr(error, "src", None), getattr(error, "node", None)
        if isinstance(source, str) and getattr(node, "lineno", None):  # triton.compiler.errors.CompilationError
            lines = source.splitlines()
            if 0 < node.lineno <= len(lines):
                found.append(("", node.lineno, lines[node.lineno - 1]))
        if not found:  # raised while the kernel ran (Triton's interpreter): its frame, innermost last
            found = [(f.filename, f.lineno or 0, f.line or "") for f in traceback.extract_tb(error.__traceback__)]
            stage = "run"
        for graph in graphs:
            for file, number, code in reversed(found):
                message = CompilerMessage(file, number, None, "error", _message(error), code.rstrip("\n"))
                report = _explained(CompileErrorReport(graph.label, "", [message], language="Triton", stage=stage),
                                    graph, triton_only=True)
                if report.lines:
                    return report
    return None


def _message(error: BaseException) -> str:
    """``Type: message`` of ``error``, on one line."""
    if isinstance(error, SyntaxError):
        text = error.msg
    else:
        lines = str(error).strip().splitlines()
        text = lines[-1] if lines else ""
    return f"{type(error).__name__}: {text}"[:300]


def _explained(report: CompileErrorReport, graph: "GraphCapture", triton_only: bool = False) -> CompileErrorReport:
    """``report`` with the kernel of ``graph`` its error lines quote, and each line explained."""
    errors = [m for m in report.errors if m.code.strip()]
    best: tuple[int, Any] = (0, None)
    for kernel in graph.kernels:
        if triton_only and "@triton.jit" not in kernel.source:
            continue
        hits = sum(1 for m in errors for line in kernel.lines if line.text.strip() == m.code.strip())
        if hits > best[0]:
            best = (hits, kernel)
    kernel = best[1]
    if kernel is None:
        return report
    report.kernel = kernel.name
    targets = {name: info.target for name, info in graph.nodes.items()}

    def module_of(line: KernelLine) -> str:  # a library's line (activations.py:89) says little alone
        return next((label for n in line.fx_nodes if (label := node_module(graph.nodes.get(n)))), "")

    taken: set[int] = set()
    for message in errors:
        for line in kernel.lines:
            if line.text.strip() != message.code.strip() or line.number in taken:
                continue
            taken.add(line.number)
            report.lines.append(ExplainedLine("error", line, node_targets=[targets.get(n, "?") for n in line.fx_nodes],
                                              module=module_of(line)))
            names = list(dict.fromkeys(_TEMP.findall(line.text.split("=", 1)[-1])))
            for name, definition in _definitions(kernel.lines, line.number, names):
                if definition.number in taken:
                    continue
                taken.add(definition.number)
                report.lines.append(ExplainedLine("definition", definition, variable=name,
                                                  node_targets=[targets.get(n, "?") for n in definition.fx_nodes],
                                                  module=module_of(definition)))
            break
    return report
