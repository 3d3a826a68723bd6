"""What a run compiled less of than the user asked for, as one record.

Three things say that the graphs of a run are not the whole program: no graph at all (the frames
Dynamo skipped, and why), frames whose compile failed and ran eagerly while others compiled, and
frames compiled again and again (recompiles, the recompile limit). They are found where the run
happens (``run``, ``ib.profile``, ``diagnose``) and travel together to every view of the run: the
text a command prints, its JSON, the HTML report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from .recompiles import FrameRecompiles
from .skipped_frames import NothingCompiled, SkippedFrame, explain_nothing_compiled, failed_frames

__all__ = ["LeftOut"]


@dataclass
class LeftOut:
    """What the graphs of a run leave out of the program."""

    # No graph compiled: the frames Dynamo skipped, and the advice they support
    nothing_compiled: Optional[NothingCompiled] = None
    # Graphs compiled, yet these frames' compiles failed and they ran eagerly (a module Dynamo does not trace)
    failed_frames: list[SkippedFrame] = field(default_factory=list)
    # Frames compiled more than once, each with the guards that failed (and the recompile limit's refusal)
    recompiles: list[FrameRecompiles] = field(default_factory=list)

    @classmethod
    def of_run(cls, target: Any, skipped: Sequence[str], *, compiled: bool,
               recompiles: Sequence[FrameRecompiles] = ()) -> "LeftOut":
        """What a run of the compiled ``target`` left out, from the frames Dynamo skipped meanwhile
        (``skipped``, from :func:`~instrumented_backend.seams.dynamo.dynamo_skips.skipped_frames`)
        and whether it ``compiled`` any graph; ``target`` None: nothing is said of a run with no graph."""
        if not compiled:
            nothing = explain_nothing_compiled(target, skipped) if target is not None else None
            return cls(nothing_compiled=nothing, recompiles=list(recompiles))
        return cls(failed_frames=failed_frames(skipped, target), recompiles=list(recompiles))

    def __bool__(self) -> bool:
        return self.nothing_compiled is not None or bool(self.failed_frames) or bool(self.recompiles)
