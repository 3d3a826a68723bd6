"""Judging the candidates the search may want next on worker slots that would otherwise wait.

The first compile of an accuracy search is the every-node probe (one worker slot, seconds of
compiling); only its answer says which single node to isolate next. Meanwhile a spare slot
guesses, with one of two plans:

* on a small graph (at most :data:`SPECULATE_UP_TO` nodes), :func:`single_nodes`: each node
  alone, in graph order (the needed one is about one in ``nodes``);
* on a larger one, :func:`first_half_guesses`: the every-node probe of the graph's first half
  (about half the probe's compile), then the earliest nodes it finds diverging, alone. When the
  first diverging node lies in that half, which is the node the search isolates after the probe
  (the first half's values are computed from the same inputs by the same ops), its answer is
  ready or under way by the time the whole probe's is.

When the one the search then asks for is among the guesses, its answer is read from here instead
of being compiled after the probe. The search's answer is the same with or without guessing: a
judgement is keyed by its candidate, and what the search does not ask for is cancelled (its
worker killed and replaced), never used. Guesses run at the lowest CPU priority.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING, Callable, Generator, Iterable, Optional, Sequence

from .graph import Candidate, GraphSlicer, InvalidCandidate
from .outcome import Outcome

if TYPE_CHECKING:
    from .checks import Failure

__all__ = ["SPECULATE_UP_TO", "Guesses", "Speculation", "Pending", "speculate", "cancel", "single_nodes",
           "first_half_guesses"]

SPECULATE_UP_TO = 8

Pending = dict[str, tuple[int, "Future[Outcome]"]]  # candidate key -> (worker slot, its judgement)
# A plan of guesses: yields the next candidate to judge, and is sent the outcome of the one before
# (None for the first, or when judging it raised).
Guesses = Generator[Candidate, Optional[Outcome], None]


def single_nodes(candidates: Iterable[Candidate]) -> Guesses:
    """Guess ``candidates`` in order, whatever their outcomes."""
    for candidate in candidates:
        yield candidate


def first_half_guesses(slicer: GraphSlicer, check: "Failure", current: Candidate, *, isolated: int) -> Guesses:
    """The every-node probe of ``current``'s first half (in graph order), then up to ``isolated``
    of the nodes it finds diverging, earliest first, each alone: what the search isolates after
    the whole probe when the first divergence is in that half. Nothing when the check is not
    about accuracy or the half cannot be cut out."""
    from .strategies import divergence_probe

    order = slicer.sort(current.nodes)
    try:
        half = slicer.make(set(order[:len(order) // 2]))
    except InvalidCandidate:
        return
    probe = divergence_probe(slicer, check, half)
    if probe is None:
        return
    seen = yield probe
    if seen is None or not seen.is_accuracy:
        return
    diverging = slicer.sort(probe.outputs[i] for i in seen.failing if i < len(probe.outputs))
    for name in diverging[:isolated]:
        try:
            yield slicer.make({name})
        except InvalidCandidate:
            continue


class Speculation:
    """Judge the candidates ``guesses`` yields on worker slots ``slots``, one at a time per slot,
    until :meth:`stop`. ``judge(candidate, slot)`` compiles and judges; ``key`` names a candidate."""

    def __init__(self, guesses: Guesses, slots: Sequence[int],
                 judge: Callable[[Candidate, int], Outcome], key: Callable[[Candidate], str]) -> None:
        self._guesses = guesses
        self._judge, self._key = judge, key
        self._lock = threading.Lock()  # guards _stopped and pending
        self._guessing = threading.Lock()  # one thread at a time advances the plan
        self._stopped = False
        self.pending: Pending = {}
        self._threads = [threading.Thread(target=self._serve, args=(slot,), daemon=True,
                                          name=f"minifier-speculation-{slot}") for slot in slots]
        for thread in self._threads:
            thread.start()

    def _next(self, slot: int, seen: Optional[Outcome]) -> Optional[tuple[Candidate, "Future[Outcome]"]]:
        with self._guessing:
            if self._stopped:
                return None
            try:
                candidate = self._guesses.send(seen)
            except Exception:  # noqa: BLE001 - StopIteration or a plan that broke: no more guesses
                return None
        with self._lock:
            if self._stopped:
                return None
            future: Future[Outcome] = Future()
            future.set_running_or_notify_cancel()
            self.pending[self._key(candidate)] = (slot, future)
            return candidate, future

    def _serve(self, slot: int) -> None:
        seen: Optional[Outcome] = None
        while (item := self._next(slot, seen)) is not None:
            candidate, future = item
            try:
                seen = self._judge(candidate, slot)
                future.set_result(seen)
            except BaseException as exc:  # noqa: BLE001 - raised to whoever reads it
                seen = None
                future.set_exception(exc)

    def stop(self) -> Pending:
        """Start no more judgements; those started (running or done), by candidate key."""
        with self._lock:
            self._stopped = True
            return dict(self.pending)


def speculate(guesses: Guesses, *, slots: Sequence[int], judge: Callable[[Candidate, int], Outcome],
              key: Callable[[Candidate], str]) -> Optional[Speculation]:
    """Start judging what ``guesses`` yields on worker ``slots`` (their workers only take idle
    cycles), or None when there is no slot."""
    if not slots:
        guesses.close()
        return None
    return Speculation(guesses, slots, judge, key)


def cancel(pending: Pending, discard: Callable[[int], None]) -> None:
    """Stop the judgements in ``pending`` still running (their workers are killed and replaced)."""
    for slot, future in pending.values():
        if not future.done():
            discard(slot)
