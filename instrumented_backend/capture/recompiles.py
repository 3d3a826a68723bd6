"""How often a compiled target's frame was compiled, and why: its recompiles and the recompile limit.

Dynamo guards every graph on what it was traced for (a Python value, a size, an attribute); a
call that fails every graph's guards compiles a new one, seconds each, and past its recompile
limit (``recompile_limit`` in Dynamo's config, 8) Dynamo compiles the frame no more: its later
calls that fit none of its graphs run eagerly. ``ib.profile`` compiles the target afresh, in a recompile
region of its own, so what a script's calls cost in compiles is read from Dynamo's records of the
script's run (:func:`instrumented_backend.seams.dynamo.dynamo_reasons.frame_compiles`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

from ..fail_soft import warn_once
from ..seams.dynamo.dynamo_reasons import frame_compiles
from .skipped_frames import own_code

__all__ = ["FrameRecompiles", "recompiles_of"]

_SHOWN = 3  # guards named before "and N more"
_GRAPH_PREFIX = re.compile(r"^\d+/\d+: ")  # "0/3: " in "0/3: n == 4": the graph whose guard failed


@dataclass
class FrameRecompiles:
    """The compiles of one frame in this process: how many graphs, the guards whose failures made
    the recompiles (each once, in order), and the error of the compile the recompile limit refused."""

    frame: str  # "forward (model.py:8)"
    compiles: int  # the frame's compiles that succeeded
    guards: list[str] = field(default_factory=list)
    refused: str = ""  # the recompile limit's error, when Dynamo stopped compiling the frame

    @property
    def limit_hit(self) -> bool:
        """Dynamo refused to compile the frame again: calls that fit none of its graphs ran eagerly."""
        return bool(self.refused)

    def summary(self) -> str:
        """What the compiles were and what to do, in a sentence or three."""
        shown = "; ".join(self.guards[:_SHOWN]) + (f" (and {len(self.guards) - _SHOWN} more)"
                                                    if len(self.guards) > _SHOWN else "")
        out = [f"{self.frame} was compiled {self.compiles} times, {self.compiles - 1} of them recompiles (each a "
               f"compile of its own){f', as these guards failed: {shown}' if shown else ''}."]
        if self.limit_hit:
            out.append("Then Dynamo's recompile limit stopped it: the later calls that fit none of its graphs ran "
                       f"eagerly ({self.refused}).")
        out.append("A value guarded as a constant changed from call to call: pass it as a tensor, let a changing "
                   "size be dynamic (torch._dynamo.mark_dynamic), or keep it fixed; raise "
                   "torch._dynamo.config.recompile_limit only if every graph is wanted.")
        return " ".join(out)


def _names_code(name: str, qualname: str) -> bool:
    """``name`` (a target's, in reports) already says whose code ``qualname`` is: the function
    itself, or a module's class for its ``forward``; not for a decorator's ``wrapper`` (a Hugging
    Face model's forward runs as ``can_return_tuple.<locals>.wrapper``)."""
    while name.startswith("partial(") and name.endswith(")"):
        name = name[len("partial("):-1]
    return qualname == name or qualname.startswith(name + ".")


def recompiles_of(target: Any, *, at_least: int = 3, name: str = "") -> Optional[FrameRecompiles]:
    """The compiles of the frame the compiled ``target`` hands Dynamo first (a module's
    ``forward``, a function's own code) recorded so far in this process, when it compiled
    ``at_least`` times or hit the recompile limit; else None (one compile, or a recompile for a
    size that then became dynamic, is what compiling costs anyway). ``name``: what the target is
    called in reports, which leads the frame's label when its code is another function's (a
    decorator's ``wrapper``)."""
    code = own_code(target)
    if code is None:
        return None
    try:
        records = frame_compiles(code.co_name, code.co_filename, code.co_firstlineno)
    except Exception as exc:  # noqa: BLE001 - a report's extra line, never the command's failure
        warn_once("recompiles", f"could not read Dynamo's compile records ({type(exc).__name__}: {exc}); "
                                "recompiles are not reported")
        return None
    # since its newest first compile: a reset (a fault injected, a test) starts the count again
    records = records[max((i for i, r in enumerate(records) if r.first), default=0):]
    compiles = sum(1 for r in records if not r.failure)
    refused = next((r.failure for r in records if r.refused), "")
    if compiles < at_least and not refused:
        return None
    guards = list(dict.fromkeys(_GRAPH_PREFIX.sub("", r.guard_failed) for r in records if r.guard_failed))
    frame = f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"
    if name and not _names_code(name, getattr(code, "co_qualname", code.co_name)):
        frame = f"{name} ({code.co_name} at {code.co_filename}:{code.co_firstlineno})"
    return FrameRecompiles(frame, compiles, guards, refused)
