"""Seam: FX's Python code for a LoopBody block's graph (``Graph.python_code``), written directly.

``LoopBodyBlock.debug_str`` prints each block of a scheduler node's loop body as the Python code
FX generates for its graph. FX's generator is general (type annotations, pytree signatures, stack
trace comments, deletion of dead values, a line-number map) and costs about 0.15 ms a block: 5 ms
of a GPT-2 compile's pre-fusion log. A block's graph is always the same few shapes: the ``ops``
placeholder, ``ops.<op>(...)`` method calls, ``self.<submodule>(...)`` module calls and one
``return``, with strings, numbers, dtypes and None as arguments. :func:`block_code` writes exactly
FX's text for those shapes (what ``python_code("self").src`` gives, stripped, less the ``;  x = None``
deletions ``debug_str`` cuts off), reusing FX's own name space and target formatting, and returns
None for anything else, which FX then formats. ``check()`` generates a block of every shape handled
both ways and fails if they differ.
"""

from __future__ import annotations

import os
import re
from typing import Any, Optional

import torch
import torch.fx

from .. import SeamMoved

__all__ = ["block_code", "check", "DELETIONS"]

# Argument types whose text FX writes as their repr (its _get_repr's last case): exact types only,
# so a subclass FX treats specially (an Enum, a NamedTuple) is left to FX.
_PLAIN = frozenset({str, int, float, bool, type(None), torch.dtype})
_COUNTER = re.compile(r"# COUNTER: (\d+)")  # FX drops lines that look like its node counters
DELETIONS = re.compile(r";[^\n]*")  # the ``;  x = None`` suffixes LoopBodyBlock.debug_str cuts off every line
# Environment switches that change FX's output: left to FX when set.
_FX_SWITCHES = ("FX_GRAPH_SHOW_META",)


class _NotPlain(Exception):
    pass


def block_code(graph: torch.fx.Graph) -> Optional[str]:
    """``graph.python_code(root_module="self").src.strip()`` for a LoopBody block's graph, without the
    ``;  x = None`` suffixes that free dead values, or None if the graph has anything but the shapes
    written here (FX must format it then)."""
    from torch.fx.graph import CodeGen, _format_target, _Namespace
    from torch.fx.immutable_collections import immutable_list

    codegen = graph._codegen
    if type(codegen) is not CodeGen or codegen._body_transformer is not None or codegen._func_name != "forward":
        return None
    if any(os.environ.get(name, "0") == "1" for name in _FX_SWITCHES):
        return None
    namespace = _Namespace()
    names: dict[torch.fx.Node, str] = {}  # what namespace.create_name returns for a node already named

    def name(node: torch.fx.Node) -> str:
        known = names.get(node)
        if known is None:
            known = names[node] = namespace.create_name(node.name, node)
        return known

    def text(arg: Any) -> str:
        kind = type(arg)
        if kind is torch.fx.Node:
            return name(arg)
        if kind in _PLAIN:
            return repr(arg)
        if kind is tuple:
            return f"({text(arg[0])},)" if len(arg) == 1 else "(" + ", ".join(map(text, arg)) + ")"
        if kind is list or kind is immutable_list:  # FX keeps a node's lists as immutable_list
            return "[" + ", ".join(map(text, arg)) + "]"
        raise _NotPlain(kind.__name__)

    def arguments(args: Any, kwargs: Any) -> str:
        parts = [text(a) for a in args]
        parts.extend(f"{key} = {text(value)}" for key, value in kwargs.items())
        return ", ".join(parts)

    free_vars: list[str] = []
    lines: list[str] = []
    try:
        for node in graph.nodes:
            if node.type is not None or not isinstance(node.target, str):
                return None
            op = node.op
            if op == "placeholder":
                if node.args:
                    return None
                free_vars.append(node.target)
                raw_name = node.target.replace("*", "")
                if raw_name != name(node):
                    lines.append(f"{name(node)} = {raw_name}")
            elif op == "call_method":
                lines.append(f"{name(node)} = {_format_target(text(node.args[0]), node.target)}"
                             f"({arguments(node.args[1:], node.kwargs)})")
            elif op == "call_module":
                lines.append(f"{name(node)} = {_format_target('self', node.target)}"
                             f"({arguments(node.args, node.kwargs)})")
            elif op == "output":
                lines.append(f"return {text(node.args[0])}")
            else:
                return None
    except _NotPlain:
        return None
    body = "\n".join("    " + line for line in lines)
    if not lines or _COUNTER.search(body):  # a match never spans lines: the same as line by line
        return None
    if not free_vars or free_vars[0] != "self":
        free_vars.insert(0, "self")
    return f"def forward({', '.join(free_vars)}):\n{body}".strip()


def _probe_graphs() -> list[torch.fx.Graph]:
    """Blocks of every shape :func:`block_code` writes, argument types included."""
    graph = torch.fx.Graph()
    ops = graph.placeholder("ops")
    index = graph.call_module("get_index", ("index0",))
    load = graph.call_method("load", (ops, "buf0", index))
    constant = graph.call_method("constant", (ops, -0.0, torch.float32))
    to_dtype = graph.call_method("to_dtype", (ops, load, torch.int64),
                                 {"src_dtype": torch.float16, "use_compute_types": True})
    masked = graph.call_module("masked_subblock1", (constant, float("-inf")))
    reduction = graph.call_method("reduction",
                                  (ops, torch.float32, torch.float32, "sum", (to_dtype, masked), [1, None], (2,)))
    graph.call_method("store", (ops, "buf1", index, reduction, None))
    abs_ = graph.call_method("abs", (ops, load))  # a builtin's name
    graph.output(abs_)
    empty = torch.fx.Graph()
    empty.placeholder("ops")
    empty.output(None)
    return [graph, empty]


def check() -> None:
    """Raise SeamMoved unless :func:`block_code` writes FX's own text for every shape it handles."""
    try:
        from torch.fx.graph import CodeGen, _format_target, _Namespace  # noqa: F401
    except ImportError as exc:
        raise SeamMoved(f"fx_block_code: FX's code generator moved: {exc}") from exc
    for graph in _probe_graphs():
        ours = block_code(graph)
        fx = graph.python_code(root_module="self").src.strip()
        if ours is None or DELETIONS.sub("", ours) != DELETIONS.sub("", fx):
            raise SeamMoved("fx_block_code: FX now writes a LoopBody block differently:\n"
                            f"FX:\n{fx}\nours:\n{ours}")

