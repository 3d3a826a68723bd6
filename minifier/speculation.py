"""Judging the candidates the search may want next on worker slots that would otherwise wait.

The first compile of an accuracy search is the every-node probe (one worker slot, seconds of
compiling); only its answer says which single node to isolate next. On a small graph the other
slots judge single-node candidates meanwhile, in graph order: when the one the search then asks
for is among them, its answer is read from here instead of being compiled after the probe.

Each guess costs a core the probe could have used, and is the needed one about once in
``nodes`` times, so speculation only runs on graphs of at most :data:`SPECULATE_UP_TO` nodes.
The search's answer is the same with or without it: a judgement is keyed by its candidate,
and what the search does not ask for is cancelled (its worker killed and replaced), never used.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Callable, Optional, Sequence

from .graph import Candidate
from .outcome import Outcome

__all__ = ["SPECULATE_UP_TO", "Speculation", "Pending", "speculate", "cancel"]

SPECULATE_UP_TO = 8

Pending = dict[str, tuple[int, "Future[Outcome]"]]  # candidate key -> (worker slot, its judgement)


class Speculation:
    """Judge ``candidates`` in order on worker slots ``slots``, one at a time per slot, until
    :meth:`stop`. ``judge(candidate, slot)`` compiles and judges; ``key`` names a candidate."""

    def __init__(self, candidates: Sequence[Candidate], slots: Sequence[int],
                 judge: Callable[[Candidate, int], Outcome], key: Callable[[Candidate], str]) -> None:
        self._queue = list(candidates)
        self._judge, self._key = judge, key
        self._lock = threading.Lock()
        self._stopped = False
        self.pending: Pending = {}
        self._threads = [threading.Thread(target=self._serve, args=(slot,), daemon=True,
                                          name=f"minifier-speculation-{slot}") for slot in slots]
        for thread in self._threads:
            thread.start()

    def _next(self, slot: int) -> Optional[tuple[Candidate, "Future[Outcome]"]]:
        with self._lock:
            if self._stopped or not self._queue:
                return None
            candidate = self._queue.pop(0)
            future: Future[Outcome] = Future()
            future.set_running_or_notify_cancel()
            self.pending[self._key(candidate)] = (slot, future)
            return candidate, future

    def _serve(self, slot: int) -> None:
        while (item := self._next(slot)) is not None:
            candidate, future = item
            try:
                future.set_result(self._judge(candidate, slot))
            except BaseException as exc:  # noqa: BLE001 - raised to whoever reads it
                future.set_exception(exc)

    def stop(self) -> Pending:
        """Start no more judgements; those started (running or done), by candidate key."""
        with self._lock:
            self._stopped = True
            return dict(self.pending)


def speculate(candidates: Sequence[Candidate], *, slots: Sequence[int], nodes: int,
              judge: Callable[[Candidate, int], Outcome], key: Callable[[Candidate], str]) -> Optional[Speculation]:
    """Start judging ``candidates`` on worker ``slots`` (their workers only take idle cycles), or
    None when there is no slot or the graph has more than :data:`SPECULATE_UP_TO` nodes."""
    if not slots or nodes > SPECULATE_UP_TO or not candidates:
        return None
    return Speculation(candidates, slots, judge, key)


def cancel(pending: Pending, discard: Callable[[int], None]) -> None:
    """Stop the judgements in ``pending`` still running (their workers are killed and replaced)."""
    for slot, future in pending.values():
        if not future.done():
            discard(slot)
