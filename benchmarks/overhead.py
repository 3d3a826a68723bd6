"""Compile-time overhead of backend="instrumented" relative to backend="inductor".

Compiles the same stack of transformer-style blocks (2 blocks: about 150 post-grad nodes) with both backends,
interleaved in one process with the FX-graph and AOTAutograd caches off for both, and prints
each pair and the median ratio instrumented/inductor. Target: <= 1.05x.

Each compile is timed in process CPU time (the machines are 2-core and shared, so wall time
also counts whatever else ran) and in wall time; both medians are printed. Before each compile
the garbage left by the previous one is collected, so a collection that one backend's garbage
made due is not charged to the other. The captures the instrumented compiles record are kept,
as in a user's process.

    python benchmarks/overhead.py [--repeats N] [--blocks N] [--smoke]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time

import torch
from tabulate import tabulate


class Block(torch.nn.Module):
    def __init__(self, width: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.proj = torch.nn.Linear(width, width)
        self.norm2 = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, 4 * width)
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = torch.softmax((q @ k.transpose(-1, -2)) / (c // self.heads) ** 0.5, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, c))
        h = self.up(self.norm2(x))
        h = torch.nn.functional.gelu(h) * torch.sigmoid(h)
        x = x + self.down(torch.nn.functional.dropout(h, 0.0))
        return torch.tanh(x).clamp(-0.9, 0.9) * 2 - x.mean(-1, keepdim=True)


def compile_seconds(backend: str, blocks: int) -> tuple[float, float]:
    """(CPU seconds, wall seconds) to compile and first-run the block stack with ``backend``."""
    torch.compiler.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Block() for _ in range(blocks)]).eval()
    x = torch.randn(2, 16, 64)
    gc.collect()
    with torch._functorch.config.patch(enable_autograd_cache=False), torch.no_grad():
        wall, cpu = time.perf_counter(), time.process_time()
        torch.compile(model, backend=backend, options={"fx_graph_cache": False})(x)
        return time.process_time() - cpu, time.perf_counter() - wall


def post_grad_nodes(blocks: int) -> int:
    import instrumented_backend as ib

    compile_seconds("instrumented", blocks)
    return ib.last_capture().node_counts["post_grad"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=21,
                        help="interleaved pairs (one pair's ratio varies by +-10%% on a shared 2-core VM)")
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="one block, one pair: checks the benchmark runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.repeats, args.blocks = 1, 1
    nodes = post_grad_nodes(args.blocks)  # also warms up both paths (header compile, imports)
    compile_seconds("inductor", args.blocks)
    rows = []
    for i in range(args.repeats):
        order = ("inductor", "instrumented") if i % 2 == 0 else ("instrumented", "inductor")
        times = {backend: compile_seconds(backend, args.blocks) for backend in order}
        (base_cpu, base_wall), (ours_cpu, ours_wall) = times["inductor"], times["instrumented"]
        rows.append([i, base_cpu, ours_cpu, ours_cpu / base_cpu, base_wall, ours_wall, ours_wall / base_wall])
    print(f"block: {nodes} post-grad nodes, {args.repeats} interleaved pairs, caches off")
    print(tabulate(rows, headers=["pair", "inductor cpu s", "instrumented cpu s", "cpu ratio",
                                  "inductor wall s", "instrumented wall s", "wall ratio"], floatfmt=".3f"))
    cpu_median = statistics.median(r[3] for r in rows)
    wall_median = statistics.median(r[6] for r in rows)
    print(f"median compile-time ratio instrumented/inductor: {cpu_median:.3f}x CPU time, "
          f"{wall_median:.3f}x wall time (target <= 1.05x)")
    base_median = statistics.median(r[1] for r in rows)
    ours_median = statistics.median(r[2] for r in rows)
    print(f"median compile: inductor {base_median * 1e3:.0f} ms, instrumented {ours_median * 1e3:.0f} ms of CPU time "
          f"(ratio of the medians {ours_median / base_median:.3f}x)")
    if len(rows) >= 5:
        low, high = bootstrap_interval([r[3] for r in rows])
        print(f"95% bootstrap interval of the CPU-time median: {low:.3f}x - {high:.3f}x "
              f"(how far this machine's noise lets {len(rows)} pairs pin it)")
    return 0


def bootstrap_interval(ratios: list[float], rounds: int = 2000, seed: int = 0) -> tuple[float, float]:
    """The 2.5% and 97.5% quantiles of the median over resamples of ``ratios``."""
    import random

    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(rounds))
    return medians[int(0.025 * rounds)], medians[int(0.975 * rounds) - 1]


if __name__ == "__main__":
    sys.exit(main())
