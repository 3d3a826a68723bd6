"""What a judged function reaches by name: its closure cells and globals, and those of the user's
own functions it calls through them, transitively.

A compiled ``predict(x)`` that calls a helper ``encode(x)`` reading a global ``model`` names no
model itself: the fp64 referee, the state a training step is run from and the tensors a call
updates in place must all look through the helper. Functions of torch, of installed libraries
(``transformers``), of the standard library and of this package are not looked into: they are
not the user's program, and their module globals are not the user's state.
"""

from __future__ import annotations

import inspect
import os
import sysconfig
import types
from functools import lru_cache
from typing import Any, Callable

import torch

__all__ = ["is_user_function", "reached_names"]


@lru_cache(maxsize=1)
def _library_dirs() -> tuple[str, ...]:
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = sysconfig.get_paths()
    dirs = [os.path.dirname(torch.__file__), package, os.path.join(os.path.dirname(package), "minifier"),
            *(paths.get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib"))]
    return tuple(os.path.join(os.path.abspath(d), "") for d in dirs if d)


def is_user_function(value: Any) -> bool:
    """Whether ``value`` is a plain Python function of the user's own code (a script, a module of
    theirs), not one of torch, an installed library, the standard library or this package."""
    if not isinstance(value, types.FunctionType):
        return False
    filename = value.__code__.co_filename
    if filename.startswith("<"):  # exec'd or typed in: the user's
        return True
    return not os.path.abspath(filename).startswith(_library_dirs())


def _own_names(function: types.FunctionType) -> list[tuple[str, Any]]:
    try:
        names = inspect.getclosurevars(function)
    except (TypeError, ValueError):
        return []
    return [*names.nonlocals.items(), *names.globals.items()]


def reached_names(fn: Callable[..., Any]) -> list[tuple[str, Any]]:
    """``(name, value)`` for every closure cell and global ``fn`` reads, then those of each user
    function (:func:`is_user_function`) among them, transitively, each function once; empty for a
    callable Python cannot inspect. A value reached under two names is listed under each."""
    function = inspect.unwrap(getattr(fn, "__func__", fn))
    if not inspect.isfunction(function):
        return []
    found: list[tuple[str, Any]] = []
    seen = {id(function)}
    pending = [function]
    while pending:
        for name, value in _own_names(pending.pop(0)):
            found.append((name, value))
            if is_user_function(value) and id(value) not in seen:
                seen.add(id(value))
                pending.append(value)
    return found
