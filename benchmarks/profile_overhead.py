"""Per-iteration cost of ib.profile's instrumentation relative to plain torch.profiler.

The same transformer-style stack is compiled twice: with ``backend="inductor"`` (what a user
profiles today) and the way ``ib.profile`` compiles it (``backend="instrumented"`` with
``cpp.enable_kernel_profile``, so every C++ kernel is a profiler event). Both are then run under
the same torch.profiler (CPU activity), in alternating rounds in one process, and the script
prints the median time per profiled iteration of each and their ratio. Target: <= 1.05x.
The joining, roofline and diagnosis run after profiling and cost nothing per iteration.

    python benchmarks/profile_overhead.py [--rounds N] [--steps N] [--blocks N] [--smoke]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from overhead import Block  # noqa: E402  (the compile-overhead benchmark's block)

import instrumented_backend as ib  # noqa: E402,F401  (registers nothing new; the entry point finds the backend)


def _per_iteration_ms(call, steps: int) -> float:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]):
        started = time.perf_counter()
        for _ in range(steps):
            call()
        elapsed = time.perf_counter() - started
    return elapsed / steps * 1e3


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--smoke", action="store_true", help="1 block, 3 rounds of 3 steps (CI)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.rounds, args.steps, args.blocks, args.batch, args.seq = 3, 3, 1, 2, 32

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Block() for _ in range(args.blocks)]).eval()
    x = torch.randn(args.batch, args.seq, 64)
    plain = torch.compile(model, backend="inductor")
    instrumented = torch.compile(model, backend="instrumented", options={"cpp.enable_kernel_profile": True})
    calls = {"torch.profiler + inductor": lambda: plain(x), "ib.profile's setup": lambda: instrumented(x)}
    samples: dict[str, list[float]] = {name: [] for name in calls}
    with torch.no_grad():
        for call in calls.values():
            for _ in range(3):
                call()  # compile and warm
        names = list(calls)
        for round_index in range(args.rounds):
            for name in (names if round_index % 2 == 0 else names[::-1]):
                samples[name].append(_per_iteration_ms(calls[name], args.steps))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    ratio = medians["ib.profile's setup"] / medians["torch.profiler + inductor"]
    print(tabulate([[name, f"{medians[name]:.3f}", f"{min(samples[name]):.3f}", f"{max(samples[name]):.3f}"]
                    for name in calls], headers=["setup", "median ms/iter", "min", "max"], disable_numparse=True))
    print(f"\nratio ib.profile / plain torch.profiler: {ratio:.3f}x per profiled iteration "
          f"({args.rounds} rounds x {args.steps} steps, {args.blocks} block(s), target <= 1.05x)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
