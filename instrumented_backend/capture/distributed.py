"""Which rank compiled a graph: torch.distributed's public API, read when the graph is compiled.

Outside a distributed run everything is None. Under ``torchrun`` before the script has called
``init_process_group``, the launcher's ``RANK`` and ``WORLD_SIZE`` still say which rank this
process is (the process group is then unknown).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

__all__ = ["RankInfo", "current_rank"]


@dataclass(frozen=True)
class RankInfo:
    rank: Optional[int] = None
    world_size: Optional[int] = None
    process_group: Optional[str] = None  # "<backend>" of the default group, e.g. "gloo" or "nccl"


def current_rank() -> RankInfo:
    """This process's rank, world size and default process group's backend (all None outside one)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return RankInfo(dist.get_rank(), dist.get_world_size(), str(dist.get_backend()))
    rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if rank is not None and world is not None and rank.isdigit() and world.isdigit():
        return RankInfo(int(rank), int(world), None)
    return RankInfo()
