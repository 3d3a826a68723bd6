"""Where an error came from: the user's line Dynamo was tracing, the node Inductor was lowering,
the innermost frame outside torch and this package."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import torch

from .compile_error import CompileErrorReport, find_cpp_compile_error

__all__ = ["traced_error", "lowering_at", "dynamo_nodes_of_line", "raising_line", "compile_error_report"]

_TRACED_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in \S+\s*$')


def traced_error(exc: BaseException) -> tuple[str, str]:
    """(Dynamo's explanation, "file:line: code" of the innermost user frame it was tracing) of an
    error Dynamo raised while tracing ("from user code:" in its message); ("", "") for others."""
    lines = str(exc).splitlines()
    explanation = next((line.strip().removeprefix("Explanation:").strip() for line in lines
                        if line.strip().startswith("Explanation:")), "")
    frames: list[tuple[str, str]] = []  # (file, "file:line[: code]"), outermost first
    if "from user code:" in lines:
        for number, line in enumerate(lines[lines.index("from user code:") + 1:], lines.index("from user code:") + 1):
            frame = _TRACED_FRAME.match(line)
            if frame is None:
                continue
            following = lines[number + 1].strip() if number + 1 < len(lines) else ""
            code = "" if _TRACED_FRAME.match(following) or not following else f": {following}"
            frames.append((frame["file"], f"{frame['file']}:{frame['line']}{code}"))
    # the innermost frame outside torch (a custom op's __call__ is torch's): the user's line
    outside = [at for file, at in frames if not _inside_torch_or_here(file)]
    return explanation[:600], (outside or [at for _, at in frames] or [""])[-1]


def lowering_at(exc: BaseException) -> tuple[str, Optional[tuple[str, int]]]:
    """("post-grad node NAME (OP), from FILE:LINE: CODE", (FILE, LINE)) of the node Inductor was
    lowering when ``exc`` was raised (("", None) when it was not raised while lowering; no line
    when the node has no trace)."""
    from ..provenance.node_map import parse_stack_trace
    from ..seams.lowering.lowering_node import node_being_lowered

    node = node_being_lowered(exc)
    if node is None:
        return "", None
    source = parse_stack_trace(node.meta.get("stack_trace"))
    where = f", from {source.cited()}" if source is not None else ""
    return f"post-grad node {node.name} ({node.target}){where}", (source.file, source.line) if source else None


def dynamo_nodes_of_line(graph: Optional[torch.fx.GraphModule], line: Optional[tuple[str, int]]) -> list[str]:
    """The ops of Dynamo graph ``graph`` traced from source ``line`` ((file, line)): where a search
    for a compile error that lowering raised starts, since no kernel line names a culprit then."""
    from ..provenance.node_map import parse_stack_trace

    if graph is None or line is None:
        return []
    found = []
    for node in graph.graph.nodes:
        if node.op in ("call_function", "call_method", "call_module"):
            source = parse_stack_trace(node.meta.get("stack_trace"))
            if source is not None and (source.file, source.line) == line:
                found.append(node.name)
    return found


def _inside_torch_or_here(filename: str) -> bool:
    """Whether ``filename`` is torch's, this package's or the minifier's (not a user's or a model library's)."""
    package = Path(__file__).parents[1]
    return any(filename.startswith(d) for d in (str(Path(torch.__file__).parent), str(package),
                                                 str(package.parent / "minifier")))


def raising_line(exc: BaseException) -> str:
    """``file:line: code`` of the innermost frame of ``exc``'s traceback outside torch and this
    package (the user's or a model library's line), or "" when every frame is inside them."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _inside_torch_or_here(f.filename)]
    return f"{frames[-1].filename}:{frames[-1].lineno}: {(frames[-1].line or '').strip()}" if frames else ""


def compile_error_report(exc: BaseException) -> Optional[CompileErrorReport]:
    """The explained C++ compile error ``exc`` carries (raised, or as a cause), or None."""
    inner = find_cpp_compile_error(exc)
    return getattr(inner, "report", None)
