"""Find the kernels in a graph's output code (output_code.py), with their line positions.

Pure text: this reads the generated Python wrapper, not Inductor objects, so it works on
loaded dumps as well as live captures. Generated kernels are module-level assignments
``NAME = async_compile.<cpp|cpp_pybinding|triton>(... '''SOURCE''' ...)``; extern kernels are
calls in the wrapper's ``call()`` to ``extern_kernels.*`` or to ATen/custom ops
(``torch.ops.ns.op.overload(...)``, ``aten.op.overload(...)``), which Inductor emits for
fallbacks and library kernels (addmm, bmm, mkl/mkldnn linear, ...).

With ``cpp_wrapper=True`` the wrapper is C++ (``cpp_wrapper_src`` holds its source): kernels are
``extern "C" void NAME(...) { ... }`` definitions (their earlier declarations end with ``;``), the
wrapper's body is ``inductor_entry_impl``, and library kernels are ``aoti_torch_<device>_<op>``
calls (``aoti_torch_cpu_addmm_out``).
"""

from __future__ import annotations

import re
from typing import Optional

from ..records import KernelInfo

__all__ = ["find_kernels", "call_body_ranges", "is_cpp_wrapper"]

_DEFINITION = re.compile(r"^(?P<name>[A-Za-z_]\w*) = async_compile\.(?P<api>\w+)\(")
_OPEN_QUOTES = re.compile(r"[rR]?'''")
_EXTERN_CALL = re.compile(
    r"(?P<name>extern_kernels\.\w+|torch\.ops\.\w+\.\w+(?:\.\w+)?|aten\.\w+(?:\.\w+)?)\("
)
_CALL_DEF = re.compile(r"^(?P<indent>\s*)def (call|_call|partition_\d+)\(")
_CPP_KERNEL = re.compile(r'^extern "C"\s+void\s+(?P<name>[A-Za-z_]\w*)\(')
_CPP_ENTRY = re.compile(r"^void (?P<fn>inductor_entry_impl|AOTInductorModel::run_impl)\(")  # cpp_wrapper / AOTI
_CPP_EXTERN_CALL = re.compile(r"\b(?P<name>aoti_torch_(?:cpu|cuda|xpu|mps)_\w+)\(")
_TEMPLATE_MARKERS = ("CppMicroGemm", "cpp_template", "template_kernel")


def _classify(name: str, api: str, source: str) -> str:
    if api.startswith("triton"):
        return "template" if name.startswith("triton_tem_") else "triton"
    if any(marker in source for marker in _TEMPLATE_MARKERS) or "template" in name:
        return "template"
    return "cpp"


def _definition(lines: list[str], start: int) -> Optional[tuple[KernelInfo, int]]:
    match = _DEFINITION.match(lines[start])
    if match is None:
        return None
    name, api = match.group("name"), match.group("api")
    if api not in ("cpp", "cpp_pybinding", "triton") and not api.startswith("triton"):
        return None
    # The source opens with ''' (or r''') on the definition line or the next one.
    open_line = None
    for offset in (0, 1):
        index = start + offset
        if index < len(lines):
            quote = _OPEN_QUOTES.search(lines[index], match.end() if offset == 0 else 0)
            if quote is not None:
                open_line, open_col = index, quote.end()
                break
    if open_line is None:
        return None
    first = lines[open_line][open_col:]
    body: list[str] = []
    source_start = open_line + 1  # 0-based index of the first source line
    if first.strip():
        if "'''" in first:  # single-line source
            text = first[: first.index("'''")]
            kernel = KernelInfo(name, _classify(name, api, text), text, start + 1, open_line + 1, open_line + 1)
            return kernel, open_line
        body.append(first)
        source_start = open_line
    end = open_line + 1
    while end < len(lines) and "'''" not in lines[end]:
        body.append(lines[end])
        end += 1
    if end < len(lines):
        tail = lines[end][: lines[end].index("'''")]
        if tail:
            body.append(tail)
    source = "\n".join(body)
    kernel = KernelInfo(
        name=name,
        kind=_classify(name, api, source),
        source=source,
        start_line=start + 1,
        end_line=min(end, len(lines) - 1) + 1,
        source_start_line=source_start + 1,
    )
    return kernel, end


def is_cpp_wrapper(lines: list[str]) -> bool:
    """True for the output code of ``cpp_wrapper=True`` (a C++ wrapper in a Python string) or of
    AOTInductor (the wrapper's and the kernels' C++ sources)."""
    return any(line.startswith("cpp_wrapper_src = (") or line.startswith("void AOTInductorModel::run_impl(")
               for line in lines)


def _cpp_entry_range(lines: list[str]) -> list[tuple[int, int]]:
    for index, line in enumerate(lines):
        match = _CPP_ENTRY.match(line)
        if match:
            body = next((i + 1 for i in range(index, len(lines)) if lines[i].rstrip().endswith("{")), index + 1)
            closing = f"}} // {match.group('fn')}"
            end = next((i for i in range(body, len(lines)) if lines[i].startswith(closing)), len(lines))
            return [(body, end)]
    return []


def _cpp_definitions(lines: list[str]) -> list[KernelInfo]:
    """``extern "C" void NAME(...) { ... }`` kernel definitions (declarations skipped)."""
    kernels = []
    index = 0
    while index < len(lines):
        match = _CPP_KERNEL.match(lines[index])
        if match is None:
            index += 1
            continue
        opening = index
        while opening < len(lines) and lines[opening].rstrip() != "{" and not lines[opening].rstrip().endswith(";"):
            opening += 1
        if opening == len(lines) or lines[opening].rstrip().endswith(";"):  # a declaration
            index = opening + 1
            continue
        end = next((i for i in range(opening + 1, len(lines)) if lines[i].rstrip() == "}"), len(lines) - 1)
        source = "\n".join(lines[index:end + 1])
        kind = "template" if any(marker in source for marker in _TEMPLATE_MARKERS) else "cpp"
        kernels.append(KernelInfo(match.group("name"), kind, source, index + 1, end + 1, index + 1))
        index = end + 1
    return kernels


def call_body_ranges(lines: list[str]) -> list[tuple[int, int]]:
    """0-based [start, end) line ranges of the wrapper's call()/partition functions (the C++
    wrapper's ``inductor_entry_impl`` body for ``cpp_wrapper=True``)."""
    if is_cpp_wrapper(lines):
        return _cpp_entry_range(lines)
    ranges = []
    index = 0
    while index < len(lines):
        match = _CALL_DEF.match(lines[index])
        if match is None:
            index += 1
            continue
        indent = len(match.group("indent"))
        end = index + 1
        while end < len(lines):
            line = lines[end]
            if line.strip() and (len(line) - len(line.lstrip())) <= indent:
                break
            end += 1
        ranges.append((index + 1, end))
        index = end
    return ranges


def find_kernels(output_code: str) -> list[KernelInfo]:
    """Every generated and extern kernel in ``output_code``, in order of appearance."""
    lines = output_code.splitlines()
    if is_cpp_wrapper(lines):
        return _find_cpp_wrapper_kernels(lines)
    kernels: list[KernelInfo] = []
    generated: dict[str, KernelInfo] = {}
    index = 0
    while index < len(lines):
        found = _definition(lines, index)
        if found is None:
            index += 1
            continue
        kernel, last = found
        kernels.append(kernel)
        generated[kernel.name] = kernel
        index = last + 1

    # C++ kernels are called as name(...), Triton kernels launched as name.run(...)
    call_pattern = (
        re.compile(r"\b(" + "|".join(map(re.escape, generated)) + r")(?:\.run)?\(") if generated else None
    )
    for start, end in call_body_ranges(lines):
        for index in range(start, end):
            line = lines[index]
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            if call_pattern is not None:
                for match in call_pattern.finditer(line):
                    generated[match.group(1)].call_lines.append(index + 1)
            for match in _EXTERN_CALL.finditer(line):
                kernels.append(
                    KernelInfo(
                        name=match.group("name"),
                        kind="extern",
                        source=stripped,
                        start_line=index + 1,
                        end_line=index + 1,
                        source_start_line=index + 1,
                        call_lines=[index + 1],
                    )
                )
    return kernels


def _find_cpp_wrapper_kernels(lines: list[str]) -> list[KernelInfo]:
    kernels = _cpp_definitions(lines)
    generated = {kernel.name: kernel for kernel in kernels}
    call_pattern = re.compile(r"\b(" + "|".join(map(re.escape, generated)) + r")\(") if generated else None
    for start, end in call_body_ranges(lines):
        for index in range(start, end):
            stripped = lines[index].strip()
            if not stripped or stripped.startswith("//"):
                continue
            if call_pattern is not None:
                for match in call_pattern.finditer(lines[index]):
                    generated[match.group(1)].call_lines.append(index + 1)
            for match in _CPP_EXTERN_CALL.finditer(lines[index]):
                kernels.append(KernelInfo(name=match.group("name"), kind="extern", source=stripped,
                                          start_line=index + 1, end_line=index + 1, source_start_line=index + 1,
                                          call_lines=[index + 1]))
    return kernels
