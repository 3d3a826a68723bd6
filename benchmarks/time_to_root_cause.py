"""Time to root cause: ``ib.diagnose`` from the call to the report, beside one plain compile of the same model.

    python benchmarks/time_to_root_cause.py           # the three cases below
    python benchmarks/time_to_root_cause.py --smoke   # the tutorial case only

Cases: the tutorial's doubling-neg bug (forward); a 6-block Linear/LayerNorm stack whose block 3
alone uses relu, with relu's lowering broken (forward); the same stack with the ``where`` of relu's
gradient broken (backward only, found from the gradients). Each line: the diagnosis's wall time,
one ``backend="inductor"`` compile-and-run of the same model (training step for the backward
case), their ratio, the verdict and the culprit source line found. Each of the two runs starts
from a fresh Inductor cache directory (holding only the CPU's vector-ISA probe, as on any machine
that used Inductor; see ``minifier_vs_pytorch.py``), so neither reuses a kernel the other, an
earlier case or an earlier run built; ``--smoke`` shares the process's cache.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time

import torch

import instrumented_backend as ib


def foo1(x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    a = torch.neg(x1)
    b = torch.maximum(x2, a)
    return torch.cat([b], dim=0)


class Block(torch.nn.Module):
    def __init__(self, hidden: int, relu: bool) -> None:
        super().__init__()
        self.fc, self.norm, self.relu = torch.nn.Linear(hidden, hidden), torch.nn.LayerNorm(hidden), relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(self.fc(x))
        return x + (torch.relu(h) if self.relu else torch.tanh(h))


class Stack(torch.nn.Module):
    def __init__(self, hidden: int = 64, blocks: int = 6, relu_block: int = 3) -> None:
        super().__init__()
        self.blocks = torch.nn.Sequential(*(Block(hidden, i == relu_block) for i in range(blocks)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


def _plain_compile_seconds(model: torch.nn.Module | object, inputs: tuple, train: bool) -> float:
    torch.compiler.reset()
    started = time.perf_counter()
    out = torch.compile(model, backend="inductor")(*inputs)
    if train:
        out.sum().backward()
    return time.perf_counter() - started


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="the tutorial case only")
    args = parser.parse_args(argv)
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    torch.manual_seed(0)
    stack, x = Stack(), torch.randn(32, 64)
    cases = [("tutorial doubling neg (forward)", foo1, (torch.randn(1, 8), torch.randn(8390, 8)), False,
              lambda: ib.faults.doubling_neg())]
    if not args.smoke:
        cases += [
            ("6-block stack, relu broken in block 3 (forward)", stack, (x,), False,
             lambda: ib.faults.bad_lowering("relu", "decltype({x})(-{x})", config={"cpp.simdlen": 1})),
            ("6-block stack, relu's gradient broken (backward only)", stack, (x,), True,
             lambda: ib.faults.bad_lowering("where", "{a} ? {c} : {b}", config={"cpp.simdlen": 1})),
        ]
    if args.smoke:
        fresh_cache = contextlib.nullcontext
    else:
        from minifier_vs_pytorch import fresh_cache
    from minifier.workers import pool

    failed = 0
    for name, model, inputs, train, fault in cases:
        with fresh_cache():
            plain = _plain_compile_seconds(model, inputs, train)
        with fault(), tempfile.TemporaryDirectory() as out, fresh_cache():
            started = time.perf_counter()
            result = ib.diagnose(model, *inputs, train=train, out_dir=out, progress=False)
            seconds = time.perf_counter() - started
            pool.shutdown()  # its worker used this case's cache directory
        lines = result.culprit_lines
        where = f"{lines[0].source.file.rsplit('/', 1)[-1]}:{lines[0].source.line} {lines[0].source.code}" \
            if lines and lines[0].source else "no culprit line"
        failed += not result.found
        print(f"{name}: diagnose {seconds:.1f} s, one plain compile {plain:.1f} s, ratio {seconds / plain:.1f}x; "
              f"{result.verdict}, layer {result.layers.first_failing if result.layers else '-'}, culprit {where}")
        print("    steps: " + ", ".join(f"{step.name} {step.seconds:.1f} s" for step in result.steps))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
