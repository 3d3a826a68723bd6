"""What "still failing" means: the failure kinds a minification can be pinned to.

A candidate counts only when it fails *the same way* as the original graph:

* :class:`CompileFailure`: compiling raises, with the same exception type and normalised message
  (for a C++ compile error, the compiler's first ``error:`` line, kernel and temporary names
  and numbers masked).
* :class:`RuntimeFailure`: compiling succeeds and running raises the same way, or the process
  dies with the same signal, or hangs (when the original hung).
* :class:`AccuracyFailure`: compiles and runs, and an output disagrees with eager (fp64
  referee). The disagreeing output must be one of the originally failing outputs or one of
  their ancestors, so the search cannot drift to an unrelated inaccuracy; an error or a crash
  never counts.

``pattern`` (a regular expression) pins any of them further: it must occur in the failure's
signature or message.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

from .judge import ACCURACY, COMPILE_ERROR, CRASH, RUNTIME_ERROR, TIMEOUT, matches
from .outcome import Outcome

__all__ = ["Failure", "AccuracyFailure", "CompileFailure", "RuntimeFailure"]


@dataclasses.dataclass(frozen=True)
class Failure:
    """Base class: a failure kind, plus an optional regex pin."""

    pattern: Optional[str] = None
    kinds = ()  # outcome kinds this check accepts as "the original fails"
    want = "runtime"

    def describe(self) -> str:
        return type(self).__name__ + (f"(pattern={self.pattern!r})" if self.pattern else "()")

    def accepts_original(self, outcome: Outcome) -> bool:
        """Is ``outcome`` a failure of this kind (and matching the pattern)?"""
        wire = outcome.to_wire()
        return outcome.kind in self.kinds and matches(wire, wire, self.pattern)

    def same_failure(self, original: Outcome, candidate: Outcome,
                     related: Optional[Callable[[int], bool]] = None) -> bool:
        """Does ``candidate`` fail as ``original`` did? (``related``: output index -> allowed?)."""
        if not matches({**original.to_wire(), "failing": []}, candidate.to_wire(), self.pattern):
            return False
        if candidate.is_accuracy and related is not None:
            return any(related(i) for i in candidate.failing)
        return True


@dataclasses.dataclass(frozen=True)
class CompileFailure(Failure):
    """Compiling the graph fails (e.g. a C++ compile error in a generated kernel)."""

    kinds = (COMPILE_ERROR, CRASH, TIMEOUT)
    want = "compile"


@dataclasses.dataclass(frozen=True)
class RuntimeFailure(Failure):
    """The compiled graph raises, crashes or hangs when run."""

    kinds = (RUNTIME_ERROR, CRASH, TIMEOUT)
    want = "runtime"


@dataclasses.dataclass(frozen=True)
class AccuracyFailure(Failure):
    """The compiled graph's outputs disagree with eager's (``tol``: RMSE tolerance, per dtype if None)."""

    tol: Optional[float] = None
    kinds = (ACCURACY,)
    want = "accuracy"
