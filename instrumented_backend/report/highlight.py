"""Syntax highlighting for the HTML report: pygments when installed (the ``[html]`` extra), else
plain escaped text. Either way the result is one HTML fragment per line of the input, so the
page can link lines one for one."""

from __future__ import annotations

import html
from typing import Optional

__all__ = ["highlight_lines", "pygments_available", "TOKEN_CSS"]


def pygments_available() -> bool:
    try:
        import pygments  # noqa: F401
    except ImportError:
        return False
    return True


def highlight_lines(text: str, language: Optional[str]) -> list[str]:
    """``text`` split into lines, each an HTML fragment (``<span class="tk-...">`` tokens when
    pygments is there and ``language`` is ``"python"``); exactly ``len(text.split("\\n"))`` items."""
    lines = text.split("\n")
    if language != "python" or not pygments_available():
        return [html.escape(line) for line in lines]
    from pygments import lex
    from pygments.lexers import PythonLexer
    from pygments.token import STANDARD_TYPES

    out: list[list[str]] = [[]]
    for token, value in lex(text, PythonLexer(stripnl=False, ensurenl=False)):
        css = STANDARD_TYPES.get(token) or STANDARD_TYPES.get(token.parent, "")
        coloured = css in _COLOURED
        for i, piece in enumerate(value.split("\n")):
            if i:
                out.append([])
            if piece:
                escaped = html.escape(piece, quote=False)
                out[-1].append(f'<span class="tk-{css}">{escaped}</span>' if coloured else escaped)
    fragments = ["".join(parts) for parts in out]
    if len(fragments) != len(lines):  # never trade the line-for-line contract for colour
        return [html.escape(line) for line in lines]
    return fragments


# The pygments short token classes that get a colour; names, operators, punctuation and
# whitespace stay plain text (most of a printed graph: a span each would triple the file).
_COLOURED = frozenset({"k", "kn", "kc", "kd", "ow", "s", "s1", "s2", "sa", "sd", "se", "si", "c", "c1", "cm", "ch",
                       "m", "mi", "mf", "mh", "nf", "fm", "nb", "bp", "nc"})
# Colours for those classes (k: keyword, s*: strings, c*: comments, m*: numbers, ...).
TOKEN_CSS = """
.tk-k, .tk-kn, .tk-kc, .tk-kd, .tk-ow { color: #8250df; }
.tk-s, .tk-s1, .tk-s2, .tk-sa, .tk-sd, .tk-se, .tk-si { color: #0a3069; }
.tk-c, .tk-c1, .tk-cm, .tk-ch { color: #6e7781; font-style: italic; }
.tk-m, .tk-mi, .tk-mf, .tk-mh { color: #0550ae; }
.tk-nf, .tk-fm { color: #6639ba; }
.tk-nb, .tk-bp { color: #953800; }
.tk-nc { color: #953800; font-weight: 600; }
"""
