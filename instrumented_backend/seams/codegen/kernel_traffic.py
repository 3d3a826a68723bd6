"""Seam: the memory a generated kernel must move, read when the schedulers define it
(a listener of ``define_kernel``, wrapped once in :mod:`.define_kernel`).

``CppScheduling.define_kernel(src_code, nodes, kernel_args=None)`` and
``TritonScheduling.define_kernel(src_code, node_schedule, kernel)`` receive the scheduler nodes
fused into one kernel and (through the kernel group or the kernel) its ``KernelArgs``: the
buffers that are kernel arguments are exactly the ones it touches in memory (buffers produced
and consumed inside the kernel are not arguments). For each, the nodes' memory dependencies
(``read_writes``) give the elements accessed as a sympy product of loop ranges, so a broadcast
``[1, 512]`` operand counts 512 elements, not the output's. Bytes = min(accessed elements,
buffer elements) x dtype size, with sizes hinted by ``V.graph.sizevars``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from .. import SeamMoved

if TYPE_CHECKING:
    from .define_kernel import KernelDefinition

__all__ = ["check", "on_define_kernel", "kernel_traffic"]


def _scheduler_nodes(nodes: Iterable[Any]) -> list[Any]:
    """The scheduler nodes among ``nodes`` (Triton's node_schedule mixes in loop markers)."""
    result = []
    for node in nodes or ():
        inner = getattr(node, "snodes", None)
        if inner:
            result.extend(inner)
        elif getattr(node, "read_writes", None) is not None:
            result.append(node)
    return result


def _hint(expr: Any) -> int:
    from torch._inductor.virtualized import V

    if type(expr) is int:
        return expr
    if getattr(expr, "is_Integer", False):  # static sizes: the number itself, no size-hint machinery
        return int(expr)
    try:
        return int(V.graph.sizevars.optimization_hint(expr, fallback=0))
    except Exception:  # noqa: BLE001 - unbacked or odd sizes count as unknown
        return 0


def _accessed(dep: Any) -> Any:
    """Elements a dependency touches: its index's loop ranges; for an indirect (gather) load, at
    most one element per iteration (``get_numel`` would say the whole table)."""
    from torch._inductor.utils import sympy_product

    if getattr(dep, "is_indirect", lambda: False)():
        return sympy_product(dep.size)
    return dep.get_numel()


def kernel_traffic(nodes: Iterable[Any], kernel_args: Any) -> dict[str, list[dict[str, Any]]]:
    """``{"reads": [...], "writes": [...]}``: one entry per buffer argument the kernel touches.

    Each entry: buffer, dtype, elements (sympy text), elements_hint, bytes.
    """
    from torch._inductor.utils import get_dtype_size
    from torch._inductor.virtualized import V

    snodes = _scheduler_nodes(nodes)
    from torch._inductor.codegen.common import RemovedArg

    arg_names: set[str] = set(getattr(kernel_args, "input_buffers", {}) or {})
    for attr in ("output_buffers", "inplace_buffers"):  # removed buffers stay in these dicts
        arg_names |= {name for name, arg in (getattr(kernel_args, attr, {}) or {}).items()
                      if not isinstance(arg, RemovedArg)}
    written_here = {dep.name for node in snodes for dep in node.read_writes.writes}

    def accesses(kind: str) -> list[dict[str, Any]]:
        deps: dict[str, list[Any]] = {}
        for node in snodes:
            for dep in getattr(node.read_writes, kind):
                if kind == "reads" and dep.name in written_here:
                    continue  # produced inside this kernel: never read from memory
                if dep.name in arg_names:
                    deps.setdefault(dep.name, []).append(dep)
        entries = []
        for name, buffer_deps in deps.items():
            try:
                dtype = V.graph.get_dtype(name)
                total = V.graph.get_numel(name)
            except Exception:  # noqa: BLE001 - NoneLayout and friends move no data
                continue
            candidates = [(_hint(expr), expr) for expr in (_accessed(dep) for dep in buffer_deps)]
            accessed_hint, accessed = max(candidates, key=lambda item: item[0])
            total_hint = _hint(total)
            hint, elements = (accessed_hint, accessed) if accessed_hint <= total_hint else (total_hint, total)
            entries.append({"buffer": name, "dtype": str(dtype).replace("torch.", ""), "elements": str(elements),
                            "elements_hint": hint, "bytes": hint * get_dtype_size(dtype)})
        return entries

    return {"reads": accesses("reads"), "writes": accesses("writes")}


def _kernel_args(scheduler: Any, arguments: dict[str, Any]) -> Optional[Any]:
    if arguments.get("kernel_args") is not None:
        return arguments["kernel_args"]
    if arguments.get("kernel") is not None:
        return getattr(arguments["kernel"], "args", None)
    group = getattr(scheduler, "kernel_group", None)
    return getattr(group, "args", None)


def on_define_kernel(definition: "KernelDefinition") -> Callable[[str], None]:
    """Once Inductor has named the kernel, record the memory it moves (first definition wins)."""
    recorder = definition.recorder

    def finish(kernel_name: str) -> None:
        if kernel_name not in recorder.traffic:
            recorder.traffic[kernel_name] = kernel_traffic(
                definition.nodes, _kernel_args(definition.scheduler, definition.arguments))

    return finish


def check() -> None:
    """Raise SeamMoved unless KernelArgs and the dependencies still look as read here."""
    import torch._inductor.utils as inductor_utils
    from torch._inductor.codegen.common import KernelArgs
    from torch._inductor.dependencies import MemoryDep, ReadWrites
    from torch._inductor.virtualized import V  # noqa: F401

    kernel_args = KernelArgs()
    for attr in ("input_buffers", "output_buffers", "inplace_buffers"):
        if not isinstance(getattr(kernel_args, attr, None), dict):
            raise SeamMoved(f"kernel_traffic: KernelArgs.{attr} is no longer a dict")
    from torch._inductor.codegen.common import RemovedArg  # noqa: F401
    from torch._inductor.sizevars import SizeVarAllocator

    if not callable(getattr(SizeVarAllocator, "optimization_hint", None)):
        raise SeamMoved("kernel_traffic: SizeVarAllocator.optimization_hint is gone")
    if not callable(getattr(MemoryDep, "get_numel", None)):
        raise SeamMoved("kernel_traffic: MemoryDep.get_numel is gone")
    if (
        "reads" not in getattr(ReadWrites, "__dataclass_fields__", {})
        or "writes" not in ReadWrites.__dataclass_fields__
    ):
        raise SeamMoved("kernel_traffic: ReadWrites no longer has reads/writes")
    if not callable(getattr(MemoryDep, "is_indirect", None)) or not callable(
        getattr(inductor_utils, "sympy_product", None)
    ):
        raise SeamMoved("kernel_traffic: MemoryDep.is_indirect or torch._inductor.utils.sympy_product is gone")
    if not callable(getattr(inductor_utils, "get_dtype_size", None)):
        raise SeamMoved("kernel_traffic: torch._inductor.utils.get_dtype_size is gone")
