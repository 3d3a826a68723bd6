"""Which user source line issued each eager op: a TorchFunctionMode that labels profiler ranges.

Used for one extra, untimed profiled call of the eager model: every top-level torch function
call runs inside ``record_function("ib.source|<stack>")`` where ``<stack>`` is the Python call
stack (innermost first, this module and torch's dispatch frames left out). The join then picks,
for each op, the first frame the compiled graphs also name (Dynamo's stack traces), so eager ops
and compiled kernels meet on the same line even through ``nn.Module`` and ``torch.nn.functional``.
A compiled node Dynamo recorded no user frame for (a model made only of ``torch.nn`` layers) is
attributed to its module's ``forward`` line; each frame's function's first line is in the label
too, so the eager op meets it there. The label also names the innermost ``nn.Module`` running
(``#<key>``: its ``id``, the key Dynamo's ``nn_module_stack`` gives the same module; in an exported
program's interpreted run, the key its node's ``nn_module_stack`` gives it), so eager ops and
compiled kernels meet on the module too.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, Callable, Optional

import torch
import torch.fx
import torch.fx.traceback as fx_traceback
from torch.overrides import TorchFunctionMode

from ..seams.dynamo import graph_structure

__all__ = ["SOURCE_PREFIX", "DEFINITION", "MODULE", "SourceTagging", "parse_source_label", "label_module",
           "interpreted_with_node_sources"]

SOURCE_PREFIX = "ib.source|"
DEFINITION = "~"  # marks a frame's function's first line in a label
MODULE = "#"  # marks the innermost nn.Module's key in a label (``nn_module_stack``'s: ``str(id(module))``)
_MAX_FRAMES = 16
_SKIPPED_FILES = tuple(os.path.join(os.path.dirname(torch.__file__), name) for name in (
    "overrides.py", "_tensor.py", "utils/_python_dispatch.py", "utils/_device.py", "_jit_internal.py",
    "nn/modules/module.py",
))


_TRACED_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


def _interpreted_node_frames() -> list[str]:
    """``file:line`` of each frame (innermost first) of the stack trace the FX node being
    interpreted was traced with, when a graph runs under :func:`interpreted_with_node_sources`:
    its code (an exported program's module) stands in for the user's lines, which are no frame."""
    meta = fx_traceback.get_current_meta() if fx_traceback.has_preserved_node_meta() else None
    trace = (meta or {}).get("stack_trace") or ""
    return [f"{m['file']}:{m['line']}" for m in _TRACED_FRAME.finditer(trace)][::-1]


def _interpreted_node_module() -> str:
    """The key of the innermost submodule (``nn_module_stack``'s) of the FX node being interpreted
    under :func:`interpreted_with_node_sources`, or "": an exported program's modules are no
    frames either, and the compiled side names them by the same keys."""
    meta = fx_traceback.get_current_meta() if fx_traceback.has_preserved_node_meta() else None
    stack = (meta or {}).get("nn_module_stack") or {}
    return str(list(stack)[-1]) if stack else ""


def interpreted_with_node_sources(module: torch.fx.GraphModule) -> Callable[..., Any]:
    """``module`` run node by node (``torch.fx.Interpreter``), each op tagged under
    :class:`SourceTagging` with the source lines its node was traced from: for the one untimed
    tagging run of a graph module (an exported program's), whose eager ops otherwise name only
    the module's generated code."""

    def run(*args: Any, **kwargs: Any) -> Any:
        with fx_traceback.preserve_node_meta():
            if not kwargs:
                return torch.fx.Interpreter(module).run(*args)
            # keyword arguments: laid out as the module's own forward lays them out (its input spec)
            flat = graph_structure.flat_inputs(module.graph, args, kwargs)
            result = torch.fx.Interpreter(module).run(*flat, enable_io_processing=False)
            return module.graph.process_outputs(result)

    return run


def _running_module(frame: Any) -> Optional[torch.nn.Module]:
    """The ``nn.Module`` a frame runs a method of (its ``self``), or None."""
    code = frame.f_code
    if not code.co_argcount or code.co_varnames[0] != "self":
        return None
    module = frame.f_locals.get("self")
    return module if isinstance(module, torch.nn.Module) else None


def _stack_label() -> str:
    frames = _interpreted_node_frames()
    module: Optional[torch.nn.Module] = None
    frame = sys._getframe(2)
    while frame is not None and (len(frames) < 2 * _MAX_FRAMES or module is None):
        code = frame.f_code
        filename = code.co_filename
        if module is None:
            module = _running_module(frame)
        if filename != __file__ and not filename.startswith(_SKIPPED_FILES) and len(frames) < 2 * _MAX_FRAMES:
            frames.append(f"{filename}:{frame.f_lineno}")
            if code.co_firstlineno != frame.f_lineno:
                frames.append(f"{DEFINITION}{filename}:{code.co_firstlineno}")
        frame = frame.f_back
    key = _interpreted_node_module() or (str(id(module)) if module is not None else "")
    if key:
        frames.append(f"{MODULE}{key}")
    return SOURCE_PREFIX + ";".join(frames)


def parse_source_label(name: str) -> list[str]:
    """The frames (innermost first) of a SourceTagging range name: ``file:line`` for each frame,
    each followed by ``~file:line`` naming the first line of the function it is in (where that
    differs), which is the line a compiled node inside ``torch/nn/modules`` is attributed to."""
    return name[len(SOURCE_PREFIX):].split(";") if name.startswith(SOURCE_PREFIX) else []


def label_module(stack: list[str]) -> str:
    """The key of the innermost ``nn.Module`` a parsed label names (``nn_module_stack``'s), or ""."""
    return next((entry[len(MODULE):] for entry in stack if entry.startswith(MODULE)), "")


class SourceTagging(TorchFunctionMode):
    """Wrap each top-level torch function call in a profiler range naming its call stack."""

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: Any = (), kwargs: Any = None) -> Any:
        with torch.profiler.record_function(_stack_label()):
            return func(*args, **(kwargs or {}))
