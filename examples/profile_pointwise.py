"""Where does a fused pointwise kernel's speed-up come from, and how close is it to memory bandwidth?

The tutorial's add-add-mul-add pattern (MobileBERT's FFN epilogue): eager runs four ops and four
passes over memory, Inductor fuses them into one C++ kernel. ``ib.profile`` times both, joins
the kernel's profiler event to the FX nodes and source lines it computes, and states the least
bytes the kernel must move (3 full [rows, 512] tensors: two read, one written) against this
machine's copy bandwidth.

Run:  python examples/profile_pointwise.py [--rows 16384] [--iters 100] [--trace trace.json]
"""

from __future__ import annotations

import argparse
import sys

import torch

import instrumented_backend as ib


def func(arg_0, arg_1, arg_2, arg_3, arg_4):
    add_0 = arg_0 + arg_1
    add_1 = add_0 + arg_2
    mul_1 = add_1 * arg_3
    add_2 = mul_1 + arg_4
    return add_2


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=16384, help="rows of the [rows, 512] tensors (tutorial: 16384)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--trace", help="write the annotated Perfetto trace here")
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    inputs = (torch.rand(args.rows, 512), torch.rand(1, 512), torch.zeros(args.rows, 512), torch.rand(1, 512),
              torch.rand(1, 512))
    report = ib.profile(func, *inputs, warmup=args.warmup, iters=args.iters)
    print(report)

    kernel = max(report.kernels, key=lambda k: k.busy_us)
    lower_bound = 3 * args.rows * 512 * 4 + 3 * 512 * 4
    print()
    print(f"Lower bound for {kernel.kernel}: {lower_bound / 1e6:.2f} MB per call "
          f"(reads arg_0 and arg_2 in full and three [1, 512] rows, writes one [{args.rows}, 512] output); "
          f"the capture says {kernel.bytes / 1e6:.2f} MB.")
    if kernel.bandwidth_share is not None:
        print(f"It runs at {kernel.achieved_gbps:.1f} GB/s = {kernel.bandwidth_share:.0%} of the "
              f"{report.copy_bandwidth_gbps:.1f} GB/s this machine copies at.")
    if args.trace:
        print(f"Perfetto trace: {report.export_chrome_trace(args.trace)}")
    return 0 if kernel.bytes == lower_bound else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
