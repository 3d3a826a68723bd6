"""The tutorial's first step, made see-through: compile foo1 and look at what Inductor did.

Run:  make demo   (or: python examples/tutorial_capture.py)

The tutorial ("Inductor CPU backend debugging and profiling") sets TORCH_COMPILE_DEBUG=1 and
digs through a temporary folder. Here the same artifacts are in memory, one record per graph,
and ``backend="instrumented"`` needs no import: it is found through its entry point.
"""

from __future__ import annotations

import sys
import tempfile

import torch


def foo1(x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    a = torch.neg(x1)
    b = torch.maximum(x2, a)
    y = torch.cat([b], dim=0)
    return y


def main() -> int:
    torch.manual_seed(0)
    x1 = torch.randint(256, (1, 8), dtype=torch.uint8)
    x2 = torch.randint(256, (8390, 8), dtype=torch.uint8)

    compiled = torch.compile(foo1, backend="instrumented")
    result = compiled(x1, x2)
    assert torch.equal(result, foo1(x1, x2)), "compiled result differs from eager"

    import instrumented_backend as ib

    cap = ib.last_capture()
    print(f"Captured graph {cap.label}: {cap.node_counts}")
    print("\n== Dynamo FX graph (what torch.compile traced) ==")
    print(cap.dynamo_graph_code)
    print("== Post-grad ATen graph (fx_graph_transformed.py) ==")
    print(cap.post_grad_graph_code)
    print("== Inductor IR after fusion (ir_post_fusion.txt), loop body ==")
    body = cap.ir_post_fusion[cap.ir_post_fusion.index("class "):]
    print(body.strip())
    for kernel in cap.kernels:
        print(f"\n== Kernel {kernel.name} ({kernel.kind}), output_code.py lines "
              f"{kernel.start_line}-{kernel.end_line}, launched at line(s) {kernel.call_lines} ==")
        for line in kernel.tagged_lines:
            print(f"  {line.text.strip():<48} <- {', '.join(line.ir_ops)} <- {', '.join(line.fx_nodes)}"
                  f" <- {line.source.code if line.source else '?'}")

    print("\n== The tutorial's chain for torch.neg, from the line map ==")
    print(cap.explain("a"))
    print("\n== Annotated output code (comments only; the compiled code is unchanged) ==")
    annotated = cap.annotated_output_code.splitlines()
    first = next(i for i, text in enumerate(annotated) if "Corresponding FX code line" in text)
    print("\n".join(annotated[first: first + 8]))

    with tempfile.TemporaryDirectory() as folder:
        cap.dump(folder)
        loaded = ib.load(folder)
        print(f"\nDumped and reloaded {len(loaded)} graph(s); identical: {loaded[0] == cap}")
        print(ib.report.format_graphs(loaded))
    return 0


if __name__ == "__main__":
    sys.exit(main())
