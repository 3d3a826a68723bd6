"""Which rank compiled a graph: torch.distributed's public API, read when the graph is compiled.

Outside a distributed run everything is None. Under ``torchrun`` before the script has called
``init_process_group``, the launcher's ``RANK`` and ``WORLD_SIZE`` still say which rank this
process is (the process group is then unknown).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

__all__ = ["RankInfo", "current_rank", "rank_out_dir", "rank_file", "data_parallel_module",
           "data_parallel_note"]


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


def rank_out_dir(directory: "str | Path") -> Path:
    """Where this process writes what a command makes: ``directory/rank_<r>`` when it is one rank of
    several (under ``torchrun`` every rank runs the command, and they would overwrite, or delete,
    each other's files), else ``directory``; the same layout as a dump's. A ``directory`` already
    inside this rank's folder is kept as it is: the CLI and the library it calls may both ask."""
    info = current_rank()
    root = Path(directory)
    if info.rank is None or (info.world_size or 1) < 2 or f"rank_{info.rank}" in root.parts:
        return root
    return root / f"rank_{info.rank}"


def rank_file(path: "str | Path") -> Path:
    """``path`` as this rank writes it: ``<folder>/rank_<r>/<name>`` when it is one rank of several
    (:func:`rank_out_dir`), else ``path``."""
    path = Path(path)
    return rank_out_dir(path.parent) / path.name


def data_parallel_module(target: Any) -> Optional[Any]:
    """The model a ``DistributedDataParallel`` or ``DataParallel`` wrapper holds (its ``.module``),
    or None for anything else. Replayed after the script, the wrapper's own work (DDP's gradient
    all-reduce, its buffer broadcast) waits on ranks that are not in step, or on a process group
    the script destroyed; the model it wraps computes the same values on this rank alone."""
    import torch

    wrappers = (torch.nn.DataParallel, torch.nn.parallel.DistributedDataParallel)
    inner = getattr(target, "module", None)
    return inner if isinstance(target, wrappers) and isinstance(inner, torch.nn.Module) else None


def data_parallel_note(inner: Any) -> str:
    """What a command says when it replays ``inner``, the model a data-parallel wrapper holds
    (:func:`data_parallel_module`), in the wrapper's place: "the <class> it wraps ... alone: why"."""
    return (f"the {type(inner).__name__} it wraps (its .module), on this rank alone: replayed after the script, "
            "its gradient all-reduce would wait on ranks that are not in step, or on a process group the script "
            "destroyed")
