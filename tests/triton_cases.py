"""Inductor's Triton code generation, on this machine's CPU: each case compiled with plain Inductor
and with ``backend="instrumented"``, its line map counted, its kernels run through Triton's
interpreter and judged against eager.

Run as a script (``TRITON_INTERPRET=1`` must be set before triton is first imported, which
:func:`triton_cpu.prepare_interpreter` does first thing): ``python tests/triton_cases.py OUT.json``.
``tests/test_triton_cpu.py`` runs it once in a fresh process and asserts on the JSON it writes;
``benchmarks/gpu_check.py`` runs the same cases on a CUDA device.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import triton_cpu  # noqa: E402

# cpu: Triton kernels for CPU tensors, run by Triton's interpreter (set up before torch imports
# triton); cuda: on a real GPU (benchmarks/gpu_check.py), where Inductor writes Triton by default.
DEVICE = os.environ.get("IB_TRITON_DEVICE", "cpu")
if DEVICE == "cpu":
    triton_cpu.prepare_interpreter()

import torch  # noqa: E402

__all__ = ["CASES", "run_case", "main"]


def pointwise(x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    a = torch.neg(x1)
    b = torch.maximum(x2, a)
    return torch.cat([b], dim=0)


def looped_reduction(x: torch.Tensor) -> torch.Tensor:
    return (x.sin() * 2).sum(-1)


def persistent_reduction(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x * 0.5, dim=-1)


class _Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = torch.nn.functional.gelu(self.fc1(x))
        return torch.tanh(self.fc2(hidden))


def _inputs(name: str) -> tuple[Any, ...]:
    generator = torch.Generator().manual_seed(0)
    shapes = {"pointwise": [(1, 8), (64, 8)], "looped_reduction": [(4, 2048)], "persistent_reduction": [(4, 16)],
              "training_backward": [(4, 16)], "dynamic_shapes": [(1, 8), (48, 8)]}[name]
    return tuple(torch.randn(shape, generator=generator).to(DEVICE) for shape in shapes)


# name -> (function, whether it trains, torch.compile keywords)
CASES: dict[str, tuple[Callable[..., Any], bool, dict[str, Any]]] = {
    "pointwise": (pointwise, False, {}),
    "looped_reduction": (looped_reduction, False, {}),
    "persistent_reduction": (persistent_reduction, False, {}),
    "training_backward": (_Mlp, True, {}),
    "dynamic_shapes": (pointwise, False, {"dynamic": True}),
}


def _compiled_run(target: Callable[..., Any], inputs: tuple[Any, ...], train: bool, backend: str,
                  compile_kwargs: dict[str, Any]) -> tuple[Any, list[str]]:
    """(outputs, or outputs and gradients for a training case; the output code of each graph)."""
    import torch._functorch.aot_autograd as aot_autograd
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    aot_autograd.AOT_COUNTER = itertools.count(1000)  # '# AOT ID' in the output code: the same for both
    compiled = torch.compile(target, backend=backend, **compile_kwargs)
    if not train:
        return run_and_get_code(compiled, *inputs)

    def step(*args: Any) -> Any:
        out = compiled(*args)
        out.sum().backward()
        return out.detach(), [p.grad.clone() for p in target.parameters()]

    for parameter in target.parameters():
        parameter.grad = None
    return run_and_get_code(step, *inputs)


def _eager(target: Callable[..., Any], inputs: tuple[Any, ...], train: bool) -> Any:
    if not train:
        return target(*inputs)
    for parameter in target.parameters():
        parameter.grad = None
    out = target(*inputs)
    out.sum().backward()
    return out.detach(), [p.grad.clone() for p in target.parameters()]


def _close(a: Any, b: Any) -> bool:
    import torch.utils._pytree as pytree

    left, right = pytree.tree_leaves(a), pytree.tree_leaves(b)
    return len(left) == len(right) and all(torch.allclose(x, y, atol=1e-5, rtol=1e-4) for x, y in zip(left, right))


def run_case(name: str) -> dict[str, Any]:
    """One case: compiled with plain Inductor and with the instrumented backend, both on Triton."""
    import instrumented_backend as ib
    from instrumented_backend.provenance.coverage import line_coverage, statement_lines

    fn, train, compile_kwargs = CASES[name]
    torch.manual_seed(0)
    target = fn().to(DEVICE) if train else fn
    inputs = _inputs(name)
    started = time.perf_counter()
    eager = _eager(target, inputs, train)
    plain_result, plain_code = _compiled_run(target, inputs, train, "inductor", compile_kwargs)
    with ib.capture() as session:
        result, code = _compiled_run(target, inputs, train, "instrumented", compile_kwargs)
    graphs = list(session)
    kernels = [k for g in graphs for k in g.kernels if k.kind != "extern"]
    coverage = line_coverage(graphs)
    untagged = [f"{k.name}: {line.text.strip()}" for k in kernels for line in statement_lines(k.lines)
                if not (line.ir_ops and line.fx_nodes)]
    chains = [{"text": line.text.strip(), "ir_ops": list(line.ir_ops), "fx_nodes": list(line.fx_nodes),
               "source": str(line.source) if line.source is not None else "",
               "code": line.source.code if line.source is not None else ""}
              for k in kernels for line in statement_lines(k.lines)]
    return {
        "name": name, "graphs": [g.label for g in graphs], "kinds": [g.kind for g in graphs],
        "kernels": len(kernels), "triton_kernels": sum("@triton.jit" in k.source for k in kernels),
        "kernel_kinds": sorted({k.kind for k in kernels}),
        "statements": coverage.statements, "mapped": coverage.statements_mapped,
        "sourced": coverage.statements_sourced, "untagged": untagged[:10],
        "identical": code == plain_code and [g.output_code for g in graphs] == code,
        "matches_eager": _close(result, eager), "plain_matches_eager": _close(plain_result, eager),
        "problems": [str(p) for g in graphs for p in g.problems], "chains": chains,
        "seconds": round(time.perf_counter() - started, 2),
    }


def _line_tags(graph: Any) -> list[tuple[str, list[str], list[str]]]:
    return [(line.text, list(line.ir_ops), list(line.fx_nodes)) for k in graph.kernels for line in k.lines]


def queries(folder: Path) -> dict[str, Any]:
    """The tutorial's chain on a Triton kernel: ``lines_for``, ``explain``, the annotated code, the
    HTML report, and a dump loaded back."""
    import instrumented_backend as ib

    with ib.capture() as session:
        _compiled_run(pointwise, _inputs("pointwise"), False, "instrumented", {})
    (graph,) = session.graphs
    lines = graph.lines_for("neg")
    dumped = graph.dump(folder / "dump")
    (loaded,) = ib.load(dumped).graphs
    report = ib.report.html(session, folder / "report.html")
    return {"lines_for_neg": [line.text.strip() for line in lines], "explain_neg": graph.explain("neg"),
            "annotated": graph.annotated_output_code,
            "loaded_same_lines": _line_tags(loaded) == _line_tags(graph),
            "loaded_same_code": loaded.output_code == graph.output_code,
            "html": report.read_text(encoding="utf-8")}


def faults(folder: Path) -> dict[str, Any]:
    """Faults in an op's Triton lowering, each diagnosed: its verdict (and the one expected), the
    culprit, the kernel lines named and the repro. Wrong results (``doubling_neg``, ``scaled`` on
    an op Triton routes through libdevice for fp64) and kernels that fail: a syntax error (when
    Inductor loads the kernel) and an undefined name (in Triton's compiler on a GPU, in its
    interpreter here, where the kernel runs)."""
    import instrumented_backend as ib

    cases = [
        ("doubling_neg", ib.faults.doubling_neg, pointwise, "pointwise", "inaccurate"),
        ("scaled_sin", lambda: ib.faults.scaled("sin", 1.01), looped_reduction, "looped_reduction", "inaccurate"),
        ("syntax_error", lambda: ib.faults.bad_lowering("neg", "-{x}", config={"cpp.simdlen": 1}, triton="(-{x}"),
         pointwise, "pointwise", "compile_error"),
        ("undefined_name", lambda: ib.faults.bad_lowering("neg", "-{x}", config={"cpp.simdlen": 1},
                                                          triton="no_such_function({x})"),
         pointwise, "pointwise", "runtime_error" if DEVICE == "cpu" else "compile_error"),
    ]
    found: dict[str, Any] = {}
    for label, fault, fn, inputs, expected in cases:
        with fault():
            result = ib.diagnose(fn, *_inputs(inputs), out_dir=folder / label, progress=False, minify=60)
        found[label] = {"verdict": result.verdict, "expected": expected,
                        "culprit": result.divergence.culprit if result.divergence else "",
                        "culprit_lines": [line.text.strip() for line in result.culprit_lines],
                        "culprit_source": [line.source.code for line in result.culprit_lines if line.source],
                        "layer": result.layers.first_failing if result.layers else "",
                        "repro": result.repro_path, "repro_ops": result.repro_ops, "text": result.render()}
    return found


def main(argv: list[str]) -> int:
    out = Path(argv[1])
    folder = out.parent / "triton_cases"
    folder.mkdir(parents=True, exist_ok=True)
    on_device = triton_cpu.triton_on_cpu(run_kernels=True) if DEVICE == "cpu" else contextlib.nullcontext()
    with on_device:
        results = {"cases": [run_case(name) for name in CASES], "queries": queries(folder),
                   "faults": faults(folder)}
    out.write_text(json.dumps(results, indent=1))
    for r in results["cases"]:
        print(f"{r['name']:22} kernels {r['kernels']} lines tagged {r['mapped']}/{r['statements']} "
              f"identical {r['identical']} matches eager {r['matches_eager']} {r['seconds']} s")
    for label, f in results["faults"].items():
        print(f"fault {label}: {f['verdict']} (expected {f['expected']}) culprit {f['culprit']} "
              f"lines {f['culprit_lines'][:2]} repro {f['repro']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
