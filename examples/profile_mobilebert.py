"""Profile MobileBERT for question answering, eager vs compiled, kernels joined to model source lines.

The tutorial's performance half, without downloading anything: the model is built from
``transformers.MobileBertConfig()`` with random weights (transformers is an optional extra:
``pip install -c constraints.txt transformers``). The report shows which eager ops
(``aten::linear``, ``aten::add``, ``aten::mul``...) became which kernels, how much of the speed-up
comes from the GEMMs vs the fused memory-bound kernels, and the diagnosis. ``--train`` profiles a
training step instead: the forward with the question-answering loss, then its backward (the
compiled backward graph's kernels joined to the forward lines they differentiate).

Run:  python examples/profile_mobilebert.py [--layers 24] [--batch 8] [--seq 128] [--train] [--small]
"""

from __future__ import annotations

import argparse
import sys

import torch

import instrumented_backend as ib


def build(layers: int, batch: int, seq: int):
    try:
        from transformers import MobileBertConfig, MobileBertForQuestionAnswering
    except ImportError:
        sys.exit("profile_mobilebert.py needs transformers: pip install -c constraints.txt transformers")
    config = MobileBertConfig(num_hidden_layers=layers)
    torch.manual_seed(0)
    model = MobileBertForQuestionAnswering(config).eval()  # random weights: never a download
    input_ids = torch.randint(0, config.vocab_size, (batch, seq), dtype=torch.int64)
    return model, input_ids


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=24, help="hidden layers (MobileBertConfig default: 24)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--small", action="store_true",
                        help="2 layers (1 with --train), batch 2, sequence 32, 5 iterations (CI)")
    parser.add_argument("--train", action="store_true", help="profile a training step: forward, loss and backward")
    parser.add_argument("--trace", help="write the annotated Perfetto trace here")
    args = parser.parse_args(argv)
    if args.small:
        args.layers, args.batch, args.seq, args.warmup, args.iters = (1 if args.train else 2), 2, 32, 2, 5

    model, input_ids = build(args.layers, args.batch, args.seq)
    if args.train:
        model.train()
        positions = torch.randint(0, args.seq, (2, args.batch))
        report = ib.profile(model, input_ids=input_ids, start_positions=positions[0], end_positions=positions[1],
                            no_grad=False, backward=True, warmup=args.warmup, iters=args.iters)
    else:
        report = ib.profile(model, input_ids=input_ids, warmup=args.warmup, iters=args.iters)
    print(report)
    if args.train:
        backward = [k for k in report.kernels if k.graph.endswith("backward")]
        kernel_us = sum(k.busy_us for k in report.kernels)
        print(f"\nBackward: {len(backward)} of {len(report.kernels)} kernels, "
              f"{sum(k.busy_us for k in backward) / kernel_us:.0%} of kernel time per step; the hottest: "
              f"{backward[0].kernel} ({', '.join(s.rsplit('/', 1)[-1] for s in backward[0].source_lines[:2])})")
    gemm = next(c for c in report.compare().categories if c.category == "gemm")
    print()
    print(f"GEMM-like ops: eager {gemm.eager_us / 1e3:.3f} ms -> compiled {gemm.compiled_us / 1e3:.3f} ms per step "
          f"({', '.join(gemm.eager_ops[:3])} -> {', '.join(gemm.kernels[:3])}).")
    if args.trace:
        print(f"Perfetto trace: {report.export_chrome_trace(args.trace)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
