"""What judging one graph found, as the search reads it.

:mod:`.judge` produces outcomes as plain dicts, because they cross process boundaries and the
repro scripts embed ``judge.py`` verbatim; the search, the checks and :class:`~.search.MinifyResult`
read them as this record, converted once where a judgement comes back.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .judge import ACCURACY, CRASH, INVALID, TIMEOUT, describe

__all__ = ["Outcome"]


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One judgement: ``kind`` (pass, compile_error, runtime_error, accuracy, nondeterministic,
    crash, timeout, invalid) with what must stay the same for a candidate to count."""

    kind: str
    signature: str = ""  # exception type and normalised message: what a candidate must repeat
    message: str = ""  # the error text (its last 4000 characters)
    failing: tuple[int, ...] = ()  # accuracy: the indices of the outputs that disagree with eager
    details: tuple[str, ...] = ()  # accuracy: one line per disagreeing output
    seconds: float = 0.0

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> "Outcome":
        """The record of an outcome dict from :func:`.judge.judge` (unknown keys are ignored)."""
        return cls(kind=data["kind"], signature=data.get("signature", ""), message=data.get("message", ""),
                   failing=tuple(data.get("failing", ())), details=tuple(data.get("details", ())),
                   seconds=float(data.get("seconds", 0.0)))

    @classmethod
    def invalid(cls, why: str) -> "Outcome":
        """A candidate that was not judged (``why`` says so)."""
        return cls(INVALID, why)

    def to_wire(self) -> dict[str, Any]:
        """The dict :mod:`.judge` reads (``matches``, repro scripts)."""
        return {**dataclasses.asdict(self), "failing": list(self.failing), "details": list(self.details)}

    @property
    def is_accuracy(self) -> bool:
        return self.kind == ACCURACY

    @property
    def killed_the_worker(self) -> bool:
        """The candidate crashed or hung its worker process (which was restarted)."""
        return self.kind in (CRASH, TIMEOUT)

    def describe(self) -> str:
        """The outcome in one line (its signature, or for accuracy which outputs differ)."""
        return describe(self.to_wire())
