"""Seam: sympy's ``str`` of a linear index expression, written without sympy's general printer.

Most of the expressions the IR text prints are linear forms of plain symbols with integer
coefficients (``768*c0 + c1 + 3*c2``, ``96*p0 + p1 + 64``): every buffer's indexing and every
dependency. ``StrPrinter._print_Add`` orders an ``Add``'s terms with ``Expr.as_ordered_terms``,
which converts every coefficient to a complex number through ``evalf`` and builds a monomial per
term: about 60 microseconds per expression, 1-3 ms of an instrumented compile. For such a form
the order it computes is simple, and :func:`linear_text` writes the same text directly:

* with ``order=None`` the terms are sorted by their monomials over the generators (the symbols,
  sorted by ``default_sort_key``: by name for plain ``Symbol``), highest first in lexicographic
  order, so each symbol's term in its name order, the constant last;
* except sympy's special case ``Add(Number, Mul(Number, x))`` with a positive constant and a
  negative coefficient, printed constant first (``5 - 3*c0``);
* a term prints as ``c*x`` (``x`` for 1, ``-x`` for -1), and a term whose text starts with ``-``
  is joined with `` - ``.

Anything else (a symbol of a subclass, two symbols with one name, a power, a function such as
``FloorDiv``, a rational or float coefficient) returns None and goes to sympy. ``check()``
compares the two on a set of forms, so a sympy that orders or prints differently is reported.
"""

from __future__ import annotations

from typing import Any, Optional

from .. import SeamMoved

__all__ = ["linear_text", "check"]


def _term(expr: Any, symbol_type: type, integer_type: type, mul_type: type) -> Optional[tuple[str, int]]:
    """(symbol name, coefficient) of ``x`` or ``c*x``; None for any other term."""
    kind = type(expr)
    if kind is symbol_type:
        return expr.name, 1
    if kind is mul_type:
        args = expr.args
        if len(args) == 2 and type(args[1]) is symbol_type and isinstance(args[0], integer_type):
            return args[1].name, int(args[0])
    return None


def _term_text(name: str, coefficient: int) -> str:
    if coefficient == 1:
        return name
    if coefficient == -1:
        return f"-{name}"
    return f"{coefficient}*{name}"


def linear_text(expr: Any) -> Optional[str]:
    """``sympy.sstr(expr, order=None)`` for a linear form of plain symbols with integer
    coefficients (an ``Add``, or one ``c*x`` term); None for any other expression."""
    from sympy import Add, Integer, Mul, Symbol

    kind = type(expr)
    if kind is Mul:
        term = _term(expr, Symbol, Integer, Mul)
        return _term_text(*term) if term is not None else None
    if kind is not Add:
        return None
    constant: Optional[int] = None
    terms: list[tuple[str, int]] = []
    for arg in expr.args:
        if isinstance(arg, Integer):
            if constant is not None:
                return None
            constant = int(arg)
            continue
        term = _term(arg, Symbol, Integer, Mul)
        if term is None:
            return None
        terms.append(term)
    if len({name for name, _ in terms}) != len(terms):
        return None  # two symbols of one name (other assumptions): sympy's tie-breaking, not ours
    terms.sort()
    texts = [_term_text(name, coefficient) for name, coefficient in terms]
    if constant is not None:
        if len(terms) == 1 and constant > 0 and terms[0][1] < 0:
            texts.insert(0, str(constant))  # sympy's special case: "5 - 3*x"
        else:
            texts.append(str(constant))
    parts = [texts[0]]
    for text in texts[1:]:
        parts.append(f"- {text[1:]}" if text.startswith("-") else f"+ {text}")
    return " ".join(parts)


def _samples() -> list[Any]:
    """Forms covering every branch: orders by name (``c10`` before ``c2``), signs, the special case,
    constants of either sign, unit coefficients, and forms that must go to sympy."""
    import sympy

    c0, c1, c2, c10, p0, p1, tmp0 = sympy.symbols("c0 c1 c2 c10 p0 p1 tmp0", integer=True, nonnegative=True)
    x = sympy.Symbol("x")
    return [768 * c0 + c1 + 3 * c2, 96 * p0 + p1 + 64, c1 + 32 * tmp0, c10 + c2 + c1, 5 - 3 * c0, 5 - c0, c0 - 5,
            -c0 - 5, -3 * c0 + 2 * c1 - 7, -c2 + c0, 2 * c0, -c0, -7 * c1, c0 + 1, 1 - c0 + c1, x + 2 * c0,
            c0 + sympy.Rational(1, 2), c0 ** 2 + c1, sympy.Dummy("d") + c0, 2 * c0 * c1 + 3, sympy.Float(2.5) * c0 + 1,
            10 ** 30 * c0 + 10 ** 20, sympy.Symbol("c0") + c0]


def check() -> None:
    """Raise SeamMoved unless every sample prints as sympy prints it (or goes to sympy)."""
    import sympy

    for expr in _samples():
        fast = linear_text(expr)
        if fast is not None and fast != sympy.sstr(expr, order=None):
            raise SeamMoved(f"sympy_linear_text: sympy now prints {sympy.sstr(expr, order=None)!r}, "
                            f"the fast path {fast!r}: its term order or layout moved")
