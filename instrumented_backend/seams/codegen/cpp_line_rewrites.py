"""Seam: the C++ codegen's line rewriters in ``torch._inductor.codegen.cpp``.

When a reduction's outer loop is vectorized and its tail runs as a scalar loop, Inductor rewrites
lines it has already generated: ``move_code_under_inner_loop`` renames the loop variable (``x0``
becomes ``x0_tail``) line by line into a new buffer, ``replace_acc_name`` turns ``tmp_acc0`` into
``tmp_acc0_arr[...]`` and ``replace_cascade_sum_with_add`` rewrites the combine, both in place.
Each rewritten line is a new object (a new string, or a new ``DeferredLine``), so the tag
:mod:`.line_tags` keeps for the old object would be lost. These wrappers carry each old line's
tag to the line that replaced it, one for one. Inductor's arguments, text and return values are
its own.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ...recording import recorder as recording
from .. import SeamMoved, install_once

__all__ = ["install", "check", "IN_PLACE", "MOVER"]

IN_PLACE = ("replace_acc_name", "replace_cascade_sum_with_add")  # rewrite buffer._lines in place
MOVER = "move_code_under_inner_loop"  # returns a new buffer: header, "{", the lines, "}"


def _carry(recorder: recording.LineRecorder, old: Sequence[Any], new: Sequence[Any]) -> None:
    """Give each new line object the tag of the old one it replaced."""
    for before, after in zip(old, new):
        if after is before:
            continue
        tag = recorder.entry_tag(before)
        if tag is not None:
            recorder.tag_entry(after, tag)


def _in_place(original: Callable[..., Any]) -> Callable[..., Any]:
    def rewrite(buffer: Any, *args: Any, **kwargs: Any) -> Any:
        recorder = recording.active_recorder()
        before = list(buffer._lines) if recorder is not None else None
        result = original(buffer, *args, **kwargs)
        if before is not None and len(before) == len(buffer._lines):
            try:
                _carry(recorder, before, buffer._lines)
            except Exception as exc:  # noqa: BLE001 - provenance must never break a compile
                recorder.problems.append(f"cpp_line_rewrites: {original.__name__}: {exc!r}")
        return result

    rewrite.__wrapped__ = original  # type: ignore[attr-defined]
    return rewrite


def _mover(original: Callable[..., Any]) -> Callable[..., Any]:
    def move(code: Any, *args: Any, **kwargs: Any) -> Any:
        recorder = recording.active_recorder()
        before = list(code._lines) if recorder is not None else None
        moved = original(code, *args, **kwargs)
        if before is not None:
            after = moved._lines
            try:
                if len(after) == len(before) + 3:  # header, "{", the lines, "}"
                    _carry(recorder, before, after[2:-1])
                else:
                    recorder.problems.append(f"cpp_line_rewrites: {MOVER} wrote {len(after)} lines "
                                             f"for {len(before)}")
            except Exception as exc:  # noqa: BLE001
                recorder.problems.append(f"cpp_line_rewrites: {MOVER}: {exc!r}")
        return moved

    move.__wrapped__ = original  # type: ignore[attr-defined]
    return move


@install_once
def install() -> None:
    """Wrap the three rewriters in the cpp codegen module's namespace, once per process."""
    from torch._inductor.codegen import cpp

    for name in IN_PLACE:
        setattr(cpp, name, _in_place(getattr(cpp, name)))
    setattr(cpp, MOVER, _mover(getattr(cpp, MOVER)))


def check() -> None:
    """Raise SeamMoved unless the rewriters still exist and rewrite one line object per line."""
    import inspect

    from torch._inductor.codegen import cpp
    from torch._inductor.utils import IndentedBuffer

    for name in (*IN_PLACE, MOVER):
        if not callable(getattr(cpp, name, None)):
            raise SeamMoved(f"cpp_line_rewrites: torch._inductor.codegen.cpp.{name} is gone")
    for name in IN_PLACE:
        if "_lines" not in inspect.getsource(inspect.unwrap(getattr(cpp, name))):
            raise SeamMoved(f"cpp_line_rewrites: {name} no longer rewrites buffer._lines in place")
    probe = IndentedBuffer()
    probe.writeline("auto tmp0 = in_ptr0[x0];")
    probe.writeline("auto tmp1 = tmp0;")
    moved = inspect.unwrap(getattr(cpp, MOVER))(probe, "x0", "x0_tail", 0, 8)
    lines = [str(line).strip() for line in moved._lines]
    if len(lines) != 5 or lines[1] != "{" or lines[2] != "auto tmp0 = in_ptr0[x0_tail];" or lines[4] != "}":
        raise SeamMoved(f"cpp_line_rewrites: {MOVER} no longer writes header, '{{', the lines, '}}': {lines}")
