"""Why a compiled target compiled nothing: the frames Dynamo skipped, in words.

``torch.compile`` falls back to eager without a word when Dynamo skips every frame it is handed
(only ``fullgraph=True`` raises). The commonest case is ``model.compile()`` on a module made only
of torch's own modules (an ``nn.Sequential``): it compiles the module's bound ``_call_impl``, and
every frame under it is in torch's files, which Dynamo does not start tracing in.
``torch.compile(model)`` traces the same module. The frames come from
:func:`instrumented_backend.seams.dynamo.dynamo_skips.skipped_frames`. A frame whose compile failed and
fell back to eager is noted by Dynamo only as "an error was suppressed during compilation": its
error (a module Dynamo does not trace, such as ``nn.GRU``, with Dynamo's hint) is read from the
compile's metrics (:func:`instrumented_backend.seams.dynamo.dynamo_reasons.frame_failure`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from ..seams.dynamo.compile_wrappers import compiled_original
from ..seams.dynamo.dynamo_reasons import frame_failure
from ..seams.dynamo.dynamo_skips import FAILED_COMPILE_REASONS

__all__ = ["SkippedFrame", "NothingCompiled", "explain_nothing_compiled", "failed_frames", "failed_frames_heading",
           "failed_frames_lines", "own_code"]

_FRAME = re.compile(r"^(?P<name>.*?) \((?P<file>.*):(?P<line>\d+)\): (?P<reason>.*)$", re.DOTALL)
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_SHOWN = 6  # frames listed before "and N more"
_FAILED = "its compile failed: "  # ours, followed by the error


@dataclass(frozen=True)
class SkippedFrame:
    """A frame Dynamo skipped: its function, where it is defined, and Dynamo's reason."""

    name: str
    file: str
    line: int
    reason: str

    @classmethod
    def parse(cls, text: str) -> "SkippedFrame":
        """Read Dynamo's ``"name (file:line): reason"``."""
        match = _FRAME.match(text)
        if match is None:
            return cls("?", "?", 0, text.strip())
        return cls(match["name"], match["file"], int(match["line"]), match["reason"].strip())

    @property
    def in_torch(self) -> bool:
        """Defined in torch's own files."""
        return self.file.startswith(_TORCH_DIR)

    def render(self) -> str:
        where = "torch/" + self.file[len(_TORCH_DIR):] if self.in_torch else self.file
        return f"{self.name} ({where}:{self.line}): {self.reason.splitlines()[0] if self.reason else '?'}"


def _is_module_compile(target: Any) -> bool:
    """``target`` is what ``model.compile()`` compiles: a module's bound ``_call_impl``."""
    return (isinstance(getattr(target, "__self__", None), torch.nn.Module)
            and getattr(target, "__func__", None) is torch.nn.Module._call_impl)


@dataclass
class NothingCompiled:
    """Why calling a compiled target compiled nothing: the frames Dynamo skipped, and what to do."""

    frames: list[SkippedFrame] = field(default_factory=list)
    advice: str = ""

    def lines(self) -> list[str]:
        """The frames, a line each (the first few), then the advice."""
        out = [f"Dynamo skipped every frame it was handed ({len(self.frames)}):"] if self.frames else []
        out += [f"  {frame.render()}" for frame in self.frames[:_SHOWN]]
        if len(self.frames) > _SHOWN:
            out.append(f"  ... and {len(self.frames) - _SHOWN} more")
        return out + ([self.advice] if self.advice else [])

    def summary(self) -> str:
        """One sentence or two: how many frames and the first, the advice."""
        if len(self.frames) == 1:
            out = [f"Dynamo skipped the one frame it was handed, {self.frames[0].render()}."]
        else:
            out = [f"Dynamo skipped all {len(self.frames)} frames it was handed, the first "
                   f"{self.frames[0].render()}."] if self.frames else []
        if self.advice:
            out.append(f"{self.advice}.")
        return " ".join(out)


def _in_torch(function: Any) -> bool:
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    return code is not None and code.co_filename.startswith(_TORCH_DIR)


def _with_its_error(frame: SkippedFrame) -> SkippedFrame:
    """``frame`` with the error its compile failed with in place of Dynamo's "an error was suppressed"."""
    if frame.reason not in FAILED_COMPILE_REASONS:
        return frame
    failure = frame_failure(frame.name, frame.file, frame.line)
    return dataclasses.replace(frame, reason=_FAILED + failure) if failure else frame


def own_code(target: Any) -> Any:
    """The code object Dynamo is handed first when the compiled ``target`` is called: a module's
    ``forward`` (``model.compile()``'s ``_call_impl`` is torch's, so its module's), a function's own."""
    target = compiled_original(target) or target  # torch.compile's wrapper: what it compiled
    if _is_module_compile(target):
        target = target.__self__
    if isinstance(target, torch.nn.Module):
        target = type(target).forward
    return getattr(getattr(target, "__func__", target), "__code__", None)


def _failed_earlier(target: Any) -> list[SkippedFrame]:
    """The target's own frame, with its error, when an earlier compile of it failed: Dynamo then
    marks its code to skip and never notes it again (a script's own call compiled it first)."""
    code = own_code(target)
    failure = frame_failure(code.co_name, code.co_filename, code.co_firstlineno) if code is not None else ""
    return [SkippedFrame(code.co_name, code.co_filename, code.co_firstlineno, _FAILED + failure)] if failure else []


def explain_nothing_compiled(target: Any, skipped: Sequence[str]) -> NothingCompiled:
    """Why calling the compiled ``target`` compiled nothing, from the frames Dynamo skipped meanwhile
    (``skipped``, as :func:`~instrumented_backend.seams.dynamo.dynamo_skips.skipped_frames` collects them).
    Dynamo notes a frame only the first time it skips it (until ``torch.compiler.reset()``): with
    none noted, the target's own frame is named when a compile of it failed earlier in the process,
    and the advice comes from where the target's code is defined."""
    frames = [_with_its_error(SkippedFrame.parse(text)) for text in skipped] or _failed_earlier(target)
    frames.sort(key=lambda frame: not frame.reason.startswith(_FAILED))  # what explains it first
    advice = ""
    if _is_module_compile(target):
        module = target.__self__
        if all(frame.in_torch for frame in frames) and (frames or _in_torch(type(module).forward)):
            name = type(module).__name__
            advice = (f"model.compile() hands Dynamo the {name}'s bound _call_impl, and every frame under it is "
                      "torch's own code, which Dynamo does not start tracing in (a module made only of torch's "
                      f"modules has no forward of yours): torch.compile(model) traces the {name} instead")
    elif (frames and all(frame.in_torch for frame in frames)) or (not frames and _in_torch(target)):
        advice = ("Every frame is torch's own code, which Dynamo does not start tracing in: compile a "
                  "function or module of yours that calls it")
    return NothingCompiled(frames, advice)


def failed_frames(skipped: Sequence[str], target: Any = None) -> list[SkippedFrame]:
    """The frames among ``skipped`` (as :func:`~instrumented_backend.seams.dynamo.dynamo_skips.skipped_frames`
    collects them) whose compile failed, each with its error: Dynamo ran them eagerly without a word
    (a module it does not trace, such as ``nn.LSTM``), also when the frames they call compiled. With
    the compiled ``target``, its own frame too when its compile failed before (Dynamo, which then
    skips it for good, notes it only the first time). A generator expression is left out: Dynamo
    refuses every generator frame handed to it on its own (it traces one only inside the frame
    that calls it), so one a library runs from eager code (``inspect``'s, under a training step's
    backward) says nothing about the user's program."""
    frames = [_with_its_error(SkippedFrame.parse(text)) for text in skipped]
    failed = [frame for frame in frames if frame.name != "<genexpr>"
              and (frame.reason.startswith(_FAILED) or frame.reason in FAILED_COMPILE_REASONS)]
    if target is not None:
        seen = {(frame.name, frame.file, frame.line) for frame in failed}
        failed += [frame for frame in _failed_earlier(target) if (frame.name, frame.file, frame.line) not in seen]
    return failed


def failed_frames_heading(count: int, consequence: str) -> str:
    """The sentence every view opens the frames whose compile failed with: how many, and what that
    meant where it is said (``consequence``: "they ran eagerly", say)."""
    return f"Dynamo's compile of {count} frame(s) failed, and {consequence}"


def failed_frames_lines(frames: Sequence[SkippedFrame], consequence: str) -> list[str]:
    """:func:`failed_frames_heading` as a heading, then each frame on an indented line."""
    return [f"{failed_frames_heading(len(frames), consequence)}:"] + [f"  {frame.render()}" for frame in frames]
