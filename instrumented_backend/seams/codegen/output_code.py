"""Seam: the fields of Inductor's ``CompiledFxGraph`` that hold the generated code.

``compile_fx_inner`` returns an ``OutputCode``; for real compiles it is a ``CompiledFxGraph``
whose ``source_code`` is output_code.py and whose ``runnable_graph_str`` is the text
TORCH_COMPILE_DEBUG writes to fx_graph_runnable.py. A backward graph with no ops comes back as
a plain boxed function instead and has neither.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from .. import SeamMoved

__all__ = ["GeneratedCode", "read_generated_code", "runnable_graph_text", "loaded_constants", "check"]


@dataclasses.dataclass(frozen=True)
class GeneratedCode:
    """The text fields read off one compiled graph."""

    output_code: str
    runnable_graph: str


def read_generated_code(compiled: Any) -> Optional[GeneratedCode]:
    """Return the generated code of a compile_fx_inner result, or None when it generated none.

    AOTInductor's result (``CompiledAOTI``) names the files it wrote: the output code is then its
    wrapper's C++ source followed by its kernels' (each file's text as written, after a
    ``// <file name>`` line).
    """
    from torch._inductor.output_code import CompiledAOTI, CompiledFxGraph

    if isinstance(compiled, CompiledAOTI):
        files = compiled.filename if isinstance(compiled.filename, list) else [compiled.filename]
        sources = sorted((f for f in files if isinstance(f, str) and f.endswith((".wrapper.cpp", ".kernel.cpp"))),
                         key=lambda f: not f.endswith(".wrapper.cpp"))
        texts = []
        for name in sources:
            with open(name, encoding="utf-8") as handle:
                texts.append(f"// {name.rsplit('/', 1)[-1]}\n{handle.read()}")
        return GeneratedCode(output_code="\n".join(texts), runnable_graph="")
    if not isinstance(compiled, CompiledFxGraph):
        return None
    return GeneratedCode(
        output_code=compiled.source_code or "",
        runnable_graph=getattr(compiled, "runnable_graph_str", "") or "",
    )


def loaded_constants(compiled: Any, names: Any) -> dict[str, Any]:
    """The values of ``names`` in the module Inductor loaded for ``compiled`` (its output code):
    the constants Inductor sets on that module once loaded (frozen parameters, lifted tensors,
    written ``name = None  # device(...)`` in the code). Empty when ``compiled`` has no loaded
    Python module (AOTInductor, a released capture)."""
    import inspect

    call = getattr(compiled, "current_callable", None)
    namespace = getattr(inspect.unwrap(call), "__globals__", None) if callable(call) else None
    if not isinstance(namespace, dict):
        return {}
    return {name: namespace[name] for name in names if namespace.get(name) is not None}


def runnable_graph_text(gm: Any, example_inputs: Any) -> str:
    """fx_graph_runnable.py text for ``gm``, made the way compile_fx_inner makes it.

    Used when compilation failed before a CompiledFxGraph existed.
    """
    import io

    from torch._dynamo.repro.after_aot import save_graph_repro

    buffer = io.StringIO()
    save_graph_repro(buffer, gm, example_inputs, "inductor", save_dir=None)
    return buffer.getvalue()


def check() -> None:
    """Raise SeamMoved unless CompiledFxGraph still declares the fields read here."""
    try:
        from torch._inductor.output_code import CompiledFxGraph
    except ImportError as exc:  # pragma: no cover
        raise SeamMoved(f"output_code: CompiledFxGraph is gone: {exc}") from exc
    from torch._dynamo.repro import after_aot

    if not callable(getattr(after_aot, "save_graph_repro", None)):
        raise SeamMoved("output_code: torch._dynamo.repro.after_aot.save_graph_repro is gone")
    from torch._inductor.output_code import CompiledAOTI

    from .. import names_used

    if "current_callable" not in names_used(CompiledFxGraph.__init__):
        raise SeamMoved("output_code: CompiledFxGraph no longer keeps the loaded module's call as current_callable")
    if "filename" not in {f.name for f in dataclasses.fields(CompiledAOTI)}:
        raise SeamMoved("output_code: CompiledAOTI has no field 'filename' any more")
    fields = {f.name for f in dataclasses.fields(CompiledFxGraph)}
    for name in ("source_code", "runnable_graph_str"):
        if name not in fields:
            raise SeamMoved(f"output_code: CompiledFxGraph has no field {name!r} any more")
