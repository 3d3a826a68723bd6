"""How much of the generated code the line map attributes.

Compiles real models with backend="instrumented" and prints, over all generated kernels:
the share of kernel *statement* lines (lines that compute, load, store or accumulate; not
braces, loop headers, pragmas or the function signature) that carry an FX node, and the share
of kernels with at least one tagged line. Targets: >= 95% of statement lines, 100% of kernels.

    python benchmarks/provenance_coverage.py            # MobileBERT QA (random weights) + training MLP
    python benchmarks/provenance_coverage.py --small    # CI smoke: a 2-layer MobileBERT + the MLP

MobileBERT needs the optional extra ``transformers`` (``pip install -c constraints.txt
transformers``); it is built from ``MobileBertConfig()`` with random weights, never downloaded.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Iterable

import torch
from tabulate import tabulate

import instrumented_backend as ib
from instrumented_backend.model import GraphCapture, KernelLine

# Lines that are structure rather than computation.
_STRUCTURE = re.compile(
    r"^\s*(#|//|\{|\}|for\s*\(|if\s*\(|else\b|extern\s+\"C\"|const\s+\w+\*|\w+\*\s+\w+[,)]|"
    r"#pragma|std::atomic|int tid|inductor_cpu_|auto out_ptr\d+ = in_out_ptr|"
    r"[\w:<>]+\s+\w+\)|\)|return;|import |@triton|def |xoffset|xindex|xmask|r0_|x\d+ = |.*= tl\.program_id)"
)


def statement_lines(kernel_lines: Iterable[KernelLine]) -> list[KernelLine]:
    return [line for line in kernel_lines if line.text.strip() and not _STRUCTURE.match(line.text)]


def coverage(graphs: list[GraphCapture]) -> dict[str, float]:
    kernels = [k for g in graphs for k in g.kernels if k.kind != "extern"]
    statements = [line for k in kernels for line in statement_lines(k.lines)]
    tagged = [line for line in statements if line.fx_nodes]
    kernels_tagged = [k for k in kernels if k.tagged_lines]
    externs = [k for g in graphs for k in g.kernels if k.kind == "extern"]
    wrapper = [line for g in graphs for line in g.wrapper_lines]
    return {
        "graphs": len(graphs),
        "kernels": len(kernels),
        "kernels tagged %": 100.0 * len(kernels_tagged) / max(1, len(kernels)),
        "statement lines": len(statements),
        "statement lines tagged %": 100.0 * len(tagged) / max(1, len(statements)),
        "with source line %": 100.0 * len([l for l in tagged if l.source]) / max(1, len(tagged)),
        "extern calls": len(externs),
        "extern calls tagged %": 100.0 * len([k for k in externs if k.tagged_lines]) / max(1, len(externs)),
        "wrapper statements tagged %": 100.0 * len([l for l in wrapper if l.tagged]) / max(1, len(wrapper)),
    }


class TrainingMLP(torch.nn.Module):
    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.up = torch.nn.Linear(width, 4 * width)
        self.norm = torch.nn.LayerNorm(4 * width)
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.gelu(self.norm(self.up(x)))
        return torch.softmax(self.down(h), dim=-1)


def run_mlp() -> list[GraphCapture]:
    torch.manual_seed(0)
    model = TrainingMLP()
    torch._dynamo.reset()
    with ib.capture() as session:
        torch.compile(model, backend="instrumented")(torch.randn(32, 64)).log().mean().backward()
    return session.graphs


def run_mobilebert(small: bool) -> list[GraphCapture]:
    from transformers import MobileBertConfig, MobileBertForQuestionAnswering

    config = MobileBertConfig()
    if small:
        config.num_hidden_layers = 2
    torch.manual_seed(0)
    model = MobileBertForQuestionAnswering(config).eval()
    input_ids = torch.randint(0, config.vocab_size, (2, 32))
    torch._dynamo.reset()
    with torch.no_grad(), ib.capture() as session:
        torch.compile(model, backend="instrumented")(input_ids=input_ids)
    return session.graphs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="2 MobileBERT layers (CI smoke)")
    args = parser.parse_args(argv)
    rows = []
    mlp = coverage(run_mlp())
    rows.append({"model": "training MLP (fwd+bwd)", **mlp})
    try:
        bert = coverage(run_mobilebert(args.small))
        rows.append({"model": "MobileBERT QA" + (" (2 layers)" if args.small else ""), **bert})
    except ImportError:
        print("transformers is not installed: MobileBERT skipped (pip install -c constraints.txt transformers)")
    print(tabulate(rows, headers="keys", floatfmt=".1f"))
    failed = [r["model"] for r in rows if r["statement lines tagged %"] < 95.0 or r["kernels tagged %"] < 100.0]
    print("targets (>=95% statement lines, 100% kernels):", "MET" if not failed else f"MISSED for {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
