"""Seam: the frames Dynamo skipped, and why.

A compiled function that compiles nothing runs eagerly without a word unless
``fullgraph=True``. Dynamo notes each frame it skips (``"forward (file:line): frame is in the
Dynamo skipfiles list"``) in a thread-local list, ``torch._dynamo.eval_frame.dynamo_tls
.skip_reasons``, only while that list exists (its own fullgraph check creates it);
:func:`skipped_frames` creates one around a block on this thread and hands back what was added.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from .. import SeamMoved

__all__ = ["skipped_frames", "FAILED_COMPILE_REASONS", "check"]

# Dynamo's skip reasons for a frame whose compile failed (``convert_frame``): most errors, and those
# with a strategy of their own (the recompile limit: the frame then runs the graphs compiled before
# when their guards pass, else eagerly)
FAILED_COMPILE_REASONS = ("an error was suppressed during compilation",
                          "compilation failed with a custom frame execution strategy")


@contextlib.contextmanager
def skipped_frames() -> Iterator[list[str]]:
    """Collect the frames Dynamo skips on this thread during the block, each once, in order, as
    ``"name (file:line): reason"``; the list is filled when the block ends (also when it raises)."""
    from torch._dynamo.eval_frame import dynamo_tls

    before = dynamo_tls.skip_reasons
    collected: list[str] = []
    ours: list[str] = []
    dynamo_tls.skip_reasons = ours
    try:
        yield collected
    finally:
        # A fullgraph compile inside the block starts a list of its own, and ends with none (the
        # frames skipped after it in the block are not noted): read ours and whichever is there.
        current = dynamo_tls.skip_reasons
        seen = ours + (current if current is not None and current is not ours else [])
        dynamo_tls.skip_reasons = before
        collected.extend(dict.fromkeys(seen))


def check() -> None:
    """Raise SeamMoved unless Dynamo still keeps its thread-local skip reasons, and names a frame
    whose compile failed by :data:`FAILED_COMPILE_REASONS`."""
    import inspect

    from torch._dynamo import convert_frame, eval_frame

    tls = getattr(eval_frame, "dynamo_tls", None)
    if tls is None or not hasattr(tls, "skip_reasons"):
        raise SeamMoved("dynamo_skips: torch._dynamo.eval_frame.dynamo_tls.skip_reasons is gone")
    adder = getattr(eval_frame, "add_skip_reason", None)
    if adder is None or "skip_reasons" not in inspect.getsource(adder):
        raise SeamMoved("dynamo_skips: torch._dynamo.eval_frame.add_skip_reason no longer records into "
                        "dynamo_tls.skip_reasons")
    source = inspect.getsource(convert_frame)
    if missing := [reason for reason in FAILED_COMPILE_REASONS if f'skip_reason="{reason}"' not in source]:
        raise SeamMoved(f"dynamo_skips: torch._dynamo.convert_frame no longer skips a failed frame as {missing}")
