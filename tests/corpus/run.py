"""Run corpus cases under one backend in this (fresh) process and save what they produced.

    python tests/corpus/run.py --backend inductor --out DIR CASE [CASE ...]

For each case, ``DIR/<case>.pt`` holds: the output code of every graph, raw, as Inductor's own
``GraphLowering.save_output_code`` hook received it; the outputs of every call (and the loss),
the parameters' gradients for a training step; the wall time of the calls (compiles included).
Under ``--backend instrumented`` it also holds the warnings the package raised, the problems of
every capture and the line-map coverage. With ``--backend inductor`` this package is never
imported. The FX-graph and AOTAutograd caches are off, so every graph is generated here.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# IB_CORPUS_TRITON=1: Inductor writes Triton kernels for the CPU tensors, run by Triton's
# interpreter (tests/triton_cpu.py), which must be set up before torch imports triton.
TRITON = os.environ.get("IB_CORPUS_TRITON") == "1"
if TRITON:
    import triton_cpu

    triton_cpu.prepare_interpreter()

import torch  # noqa: E402
from cases import build  # noqa: E402


def _tensors(value: Any) -> list[torch.Tensor]:
    if hasattr(value, "to_tuple"):  # a transformers ModelOutput
        value = value.to_tuple()
    leaves, _ = torch.utils._pytree.tree_flatten(value)
    return [leaf.detach().clone() for leaf in leaves if isinstance(leaf, torch.Tensor)]


def run_case(name: str, backend: str) -> dict[str, Any]:
    from torch._inductor.graph import GraphLowering

    codes: list[str] = []
    GraphLowering.save_output_code = codes.append
    torch.compiler.reset()
    workload = build(name)
    compiled = torch.compile(workload.model, backend=backend, **workload.compile_kwargs)
    outputs: list[torch.Tensor] = []
    with warnings.catch_warnings(record=True) as caught, contextlib.ExitStack() as stack:
        warnings.simplefilter("always")
        stack.enter_context(torch._dynamo.config.patch(**workload.dynamo_config))
        session = None
        if backend == "instrumented":
            import instrumented_backend as ib

            session = stack.enter_context(ib.capture())
        start = time.perf_counter()
        for call, args in enumerate(workload.calls):
            torch.manual_seed(100 + call)  # RNG inside the graph draws the same numbers under both backends
            result = compiled(*args, **workload.kwargs)
            outputs.extend(_tensors(result))
            if workload.train:
                loss = workload.loss(result)
                loss.backward()
                outputs.append(loss.detach().clone())
        seconds = time.perf_counter() - start
        record: dict[str, Any] = {"codes": codes, "outputs": outputs, "seconds": seconds}
        if isinstance(workload.model, torch.nn.Module):
            params = list(workload.model.parameters())
            record["grads"] = [p.grad.clone() if p.grad is not None else None for p in params]
            embedding_weights = {id(m.weight) for m in workload.model.modules() if isinstance(m, torch.nn.Embedding)}
            record["embedding_grads"] = [i for i, p in enumerate(params) if id(p) in embedding_weights]
        if session is not None:
            stack.close()
            record.update(_instrumented_details(session))
    record["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught
                          if w.category.__name__ == "InstrumentationWarning"]
    return record


def _instrumented_details(session: Any) -> dict[str, Any]:
    import instrumented_backend as ib

    graphs = session.graphs
    coverage = ib.line_coverage(graphs)
    return {
        "graphs": [f"{g.compile_id} {g.kind}" for g in graphs],
        "captured_codes": [g.output_code for g in graphs],
        "problems": [f"{g.label}: {p.part}: {p.error}" for g in graphs for p in g.problems],
        "coverage": {**coverage.row(), "statements mapped": coverage.statements_mapped,
                     "statements sourced": coverage.statements_sourced},
        "unmapped": coverage.unmapped,
        "unsourced_nodes": coverage.unsourced_nodes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("inductor", "instrumented"), required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("cases", nargs="+")
    args = parser.parse_args(argv)
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    args.out.mkdir(parents=True, exist_ok=True)
    with triton_cpu.triton_on_cpu(run_kernels=True) if TRITON else contextlib.nullcontext():
        for name in args.cases:
            torch.save(run_case(name, args.backend), args.out / f"{name}.pt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
