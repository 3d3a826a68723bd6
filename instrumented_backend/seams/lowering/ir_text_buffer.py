"""Seam: the ``IndentedBuffer`` the scheduler's debug text is written to, made cheap while we format.

``BaseSchedulerNode.debug_str`` (and ``FusedSchedulerNode``'s, and ``SchedulerBuffer``'s) write
each node's text into an ``IndentedBuffer`` by ``splice``: a text is dedented, then written one
``writeline`` at a time (an ``isinstance`` chain, a prefix built, and, during an instrumented
compile, :mod:`.line_tags`' hook on every line), and read back by ``getrawvalue`` (another
``isinstance`` chain per line). A fused node's text holds the whole text of every node fused
into it, so the post-fusion log writes thousands of lines this way.

While :mod:`.ir_format` formats (and only on that thread), the scheduler module's name
``IndentedBuffer`` refers to :func:`formatting_buffer`'s subclass, whose ``writeline``,
``splice`` and ``getrawvalue`` produce the very same entries and text in bulk for plain strings
and defer to Inductor's own methods for anything else (line contexts, deferred lines, another
buffer, a line continued by a backslash). The IR text never becomes kernel code, so
:mod:`.line_tags` has nothing to tag in it. ``check()`` compares the subclass with Inductor's
methods on sample texts, so a change in how Inductor writes a buffer is reported, not copied.
"""

from __future__ import annotations

import functools
import re
import textwrap
from typing import Any, Optional

from .. import SeamMoved

__all__ = ["formatting_buffer", "check"]


@functools.lru_cache(maxsize=None)
def formatting_buffer(original: type, state: Any) -> type:
    """A subclass of ``original`` (Inductor's ``IndentedBuffer``) writing plain strings in bulk
    while ``state.memo`` is set on the calling thread, and exactly as ``original`` otherwise."""

    class FormattingBuffer(original):  # type: ignore[valid-type, misc]
        __slots__ = ()

        def writeline(self, line: Any) -> None:
            if type(line) is not str or state.memo is None:
                return original.writeline(self, line)
            self._lines.append(f"{self.prefix()}{line}" if line.strip() else "")

        def splice(self, other_code: Any, strip: bool = False) -> None:
            if type(other_code) is not str or state.memo is None:
                return original.splice(self, other_code, strip)
            margin = None if strip else _margin(other_code)
            if margin is None:  # Inductor's way: dedent, strip, split
                text = textwrap.dedent(other_code)
                if strip:
                    text = text.lstrip()
                if not text:
                    return
                margin, other_code = 0, text
            prefix = self.prefix()
            self._lines.extend([f"{prefix}{line[margin:]}" if line.strip() else ""
                                for line in other_code.rstrip().split("\n")])

        def getrawvalue(self) -> str:
            lines = self._lines
            if state.memo is None or not lines or any(type(line) is not str for line in lines):
                return original.getrawvalue(self)
            text = "\n".join(lines)
            if text.endswith("\\") or "\\\n" in text:  # a line continued by a backslash
                return original.getrawvalue(self)
            return text + "\n"

    FormattingBuffer.__qualname__ = FormattingBuffer.__name__ = original.__name__
    return FormattingBuffer


_LEADING = re.compile(r"[ \t]*")


@functools.lru_cache(maxsize=64)
def _line_without(margin: str) -> "re.Pattern[str]":
    """A line that does not start with ``margin`` yet has a character other than spaces and tabs."""
    return re.compile(rf"^(?!{re.escape(margin)})[ \t]*[^ \t\n]", re.MULTILINE)


def _margin(text: str) -> Optional[int]:
    """How many characters ``textwrap.dedent`` takes off the start of each non-blank line of
    ``text``, when its first line is not blank and every other non-blank line starts with the
    first one's indentation (the scheduler's texts: a node's, or a fused node's indented by
    four); None otherwise. Blank lines are written empty whatever dedent does to them."""
    indentation = _LEADING.match(text).group()  # type: ignore[union-attr]
    if text[len(indentation):len(indentation) + 1] in ("", "\n"):
        return None  # a blank first line: the margin is the other lines'
    if indentation and _line_without(indentation).search(text):
        return None
    return len(indentation)


class _Formatting:
    """A stand-in thread state for :func:`check`: formatting."""

    memo: Any = True


_FORMATTING = _Formatting()


def check() -> None:
    """Raise SeamMoved unless the bulk buffer writes what Inductor's ``IndentedBuffer`` writes."""
    from torch._inductor import scheduler
    from torch._inductor.utils import IndentedBuffer, LineContext

    if getattr(scheduler, "IndentedBuffer", None) is not IndentedBuffer:
        raise SeamMoved("ir_text_buffer: the scheduler no longer writes its debug text to "
                        "torch._inductor.utils.IndentedBuffer by its module name IndentedBuffer")
    for method in ("writeline", "splice", "getrawvalue", "prefix"):
        if method not in vars(IndentedBuffer):
            raise SeamMoved(f"ir_text_buffer: IndentedBuffer.{method} is gone")
    fast_class = formatting_buffer(IndentedBuffer, _FORMATTING)
    texts = ["", "   \n  ", "a", "  a\n    b\n\n  c  \n", "\n\n  x = 1\\\n  y\n", "a\\", "  p:\n\tq\n  r",
             "    a:\n      b\n  \n\n    c\n   ", "    a\n  b\n    c", "\ta\n\t\tb\n\tc", "\ta\n    b", "  \n  a\n  b",
             "a\n  b\n \x0c\n", "  a\n  \x0c\n  b\n\x0c", "  a\r\n  b", "  a.b(x)\n  [y]", "x\n"]
    for text in texts:
        for strip in (False, True):
            for indent in (0, 2):
                plain, fast = IndentedBuffer(initial_indent=indent), fast_class(initial_indent=indent)
                for buffer in (plain, fast):
                    buffer.writeline("head")
                    buffer.writeline("   ")
                    buffer.splice(text, strip)
                    with buffer.indent():
                        buffer.writeline(text)
                        buffer.splice(text)
                if fast._lines != plain._lines or fast.getrawvalue() != plain.getrawvalue():
                    raise SeamMoved(f"ir_text_buffer: IndentedBuffer no longer writes {text!r} (strip={strip}, "
                                    f"indent={indent}) as the bulk writer does: {plain._lines!r}")
    mixed = fast_class()
    mixed.writeline(LineContext("ctx"))
    mixed.writeline("a")
    if mixed.getrawvalue() != "a\n":
        raise SeamMoved("ir_text_buffer: IndentedBuffer.getrawvalue no longer skips line contexts")
