"""Why an injected fault in effect found no bug: its op never reached generated code (then which
ops the generated kernels do compute), or it did and every result still matches eager."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Optional, Sequence

from .faults import lowering_uses, patchable_ops

if TYPE_CHECKING:
    from ..graphs import GraphCapture

__all__ = ["unfound_faults"]


def _generated_ops(graphs: Sequence["GraphCapture"]) -> list[str]:
    """The ops a fault can scale that the generated kernels of ``graphs`` compute, most lines first
    (``ops.exp`` on 12 lines: ``exp``), leaving out loads, stores, indexing and constants."""
    plumbing = {"load", "store", "store_reduction", "index_expr", "constant", "masked", "to_dtype", "identity",
                "indirect_indexing", "reduction", "paren"}
    counts: Counter[str] = Counter()
    for graph in graphs:
        for kernel in graph.kernels:
            if kernel.kind == "extern":
                continue
            for line in kernel.lines:
                counts.update(op.removeprefix("ops.") for op in line.ir_ops if op.startswith("ops."))
    patchable = set(patchable_ops())
    ops = [op for op, _ in counts.most_common() if op in patchable and op not in plumbing]
    arithmetic = {"add", "sub", "mul", "truediv", "div", "neg", "maximum", "minimum", "where", "eq", "ne", "lt",
                  "le", "gt", "ge", "and_", "or_", "logical_and", "logical_or", "logical_not", "floordiv", "mod",
                  "remainder", "abs", "relu", "square", "truncdiv", "int_truediv"}
    return [op for op in ops if op not in arithmetic] + [op for op in ops if op in arithmetic]


def unfound_faults(before: Sequence[tuple[Any, int]], graphs: Sequence["GraphCapture"] = ()) -> list[str]:
    """Why each injected fault in effect made no bug: its op never reached generated code (then
    which ops the generated kernels do compute: SiLU is lowered as ``x / (1 + exp(-x))``, so a
    scaled ``sigmoid`` never reaches a Llama's MLP), or it did and every result still matches eager."""
    notes = []
    computed: Optional[list[str]] = None  # the same for every fault: counted once, when one needs it
    for fault, uses in before:
        written = lowering_uses(fault) - uses
        if written == 0:
            if computed is None:
                computed = _generated_ops(graphs)
            shown = ", ".join(computed[:12]) + (f" (+{len(computed) - 12})" if len(computed) > 12 else "")
            fused = _fused_into_extern_calls(graphs, fault.op)
            why = (f"it runs inside {fused}, which a post-grad pass fused it into (a oneDNN convolution or linear "
                   "with its activation, under freezing)" if fused else
                   "an extern kernel computes it, such as attention's SDPA, or the graphs have no such op, or "
                   "Inductor decomposes it into others: SiLU into x / (1 + exp(-x))")
            notes.append(f"the injected fault ({fault.label}) was in effect, but no kernel compiled here computes "
                         f"{fault.op} in generated code ({why})"
                         + (f"; the generated kernels compute {shown}: inject one of those "
                            f"(--fault '{computed[0]}*1.01')" if computed else ""))
        else:
            notes.append(f"the injected fault ({fault.label}) went into {written} generated expression(s) of "
                         f"{fault.op}, yet every result matches eager (a change within tolerance, or one the ops "
                         "after it undo, as a softmax undoes a scaled exp)")
    return notes


def _fused_into_extern_calls(graphs: Sequence["GraphCapture"], op: str) -> str:
    """The extern calls of ``graphs`` that compute ``op`` (an ATen op's name, ``relu``) inside them:
    the nodes a lowering pattern made whose match replaced such an op (``the extern call fn_1
    (mkldnn._convolution_pointwise, relu) in graph #1 0/0 inference``), or "" for none."""
    from ..seams.lowering.lowering_patterns import matched_nodes

    found = []
    for graph in graphs:
        for node in graph.post_grad_graph.graph.nodes if graph.post_grad_graph is not None else ():
            matched = matched_nodes(node)  # [] for most
            if op in {getattr(getattr(m.target, "overloadpacket", None), "__name__", None) for m in matched}:
                shown = ", ".join(dict.fromkeys(str(m.target).removesuffix(".default").removeprefix("aten.")
                                                for m in matched))
                found.append(f"the extern call {node.name} ({shown}) in graph {graph.label}")
    return "; ".join(found[:3]) + (f" (+{len(found) - 3})" if len(found) > 3 else "")
