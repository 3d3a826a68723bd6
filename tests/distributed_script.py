"""What each rank runs in tests/test_distributed.py (launched by torchrun, 2 ranks, gloo on 127.0.0.1).

``python distributed_script.py SCENARIO OUT``: compiles with ``backend="instrumented"`` and
``dump_dir=OUT`` (or, for ``plain``, the default backend, for ``python -m instrumented_backend
run --dump``), checks the result against eager, and prints ``rank R ok``.

Scenarios: ``all_reduce`` (functional collective), ``diverge`` (rank 1 takes a rank-dependent
branch that changes one op), ``order`` (the ranks reduce two tensors in opposite orders),
``ddp`` (a DDP training step split into two buckets by DDPOptimizer), ``ddp_plain`` (the same
step compiled with the default backend, for ``diagnose``), ``plain``.
"""

from __future__ import annotations

import datetime
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc


def reduce_sin(x: torch.Tensor, rank: int, diverge: bool) -> torch.Tensor:
    y = torch.sin(x) * 2
    if diverge and rank == 1:
        y = torch.cos(x) * 2  # the rank-dependent branch: one op differs on rank 1
    return fc.all_reduce(y, "sum", dist.group.WORLD)


def reduce_two(a: torch.Tensor, b: torch.Tensor, rank: int) -> torch.Tensor:
    if rank == 0:
        ra = fc.all_reduce(a * 2, "sum", dist.group.WORLD)
        rb = fc.all_reduce(b + 1, "sum", dist.group.WORLD)
    else:  # the other order: the ranks exchange the wrong tensors
        rb = fc.all_reduce(b + 1, "sum", dist.group.WORLD)
        ra = fc.all_reduce(a * 2, "sum", dist.group.WORLD)
    return ra + rb


class TwoBuckets(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(512, 512)  # 1 MiB of parameters each: one bucket each
        self.second = torch.nn.Linear(512, 512)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.first(x))
        return self.second(h).sum()


def main(scenario: str, out: str) -> int:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    options = {"dump_dir": out}
    x = torch.linspace(0, 1, 8)
    if scenario in ("all_reduce", "diverge"):
        diverge = scenario == "diverge"
        result = torch.compile(reduce_sin, backend="instrumented", options=options)(x, rank, diverge)
        expected = sum(torch.sin(x) * 2 if not (diverge and r == 1) else torch.cos(x) * 2 for r in range(world))
        assert torch.allclose(result, expected), (result, expected)
    elif scenario == "order":
        torch.compile(reduce_two, backend="instrumented", options=options)(x, x * 3, rank)  # same shapes: no hang
    elif scenario == "ddp":
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(TwoBuckets(), bucket_cap_mb=1)
        compiled = torch.compile(model, backend="instrumented", options=options)
        compiled(torch.randn(4, 512) + rank).backward()
    elif scenario == "ddp_plain":  # for `diagnose` under torchrun: the default backend, as a user's script
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(TwoBuckets(), bucket_cap_mb=1)
        torch.compile(model)(torch.randn(4, 512) + rank).backward()
    elif scenario == "plain":
        step = torch.compile(lambda t: fc.all_reduce(torch.tanh(t), "sum", dist.group.WORLD))
        assert torch.allclose(step(x), torch.tanh(x) * world)
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank} ok")
    return 0


if __name__ == "__main__":
    status = main(sys.argv[1], sys.argv[2])
    if sys.argv[1] in ("plain", "ddp_plain"):  # run by `python -m instrumented_backend run` or `diagnose`,
        # which dump or diagnose after the script
        sys.exit(status)
    # The process group outlives destroy_process_group() (torch's opaque-object registry holds it,
    # with plain Inductor too) and is destroyed during interpreter finalization, where gloo's
    # teardown rarely aborts ("terminate called without an active exception", about 1 run in 100
    # under load) after the rank has finished and said so. Everything checked is done and flushed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
