"""Warm judging processes: the pool the search uses (:mod:`.parent`) and the process itself (:mod:`.child`).

Neither module imports torch: ``python -m minifier`` starts a worker before it imports torch.
"""

from .parent import Worker, WorkerPool, WorkerSetup, pool, prewarm

__all__ = ["WorkerSetup", "Worker", "WorkerPool", "pool", "prewarm"]
