"""What a judged function reaches by name: its closure cells and globals, and those of the user's
own functions it calls through them, transitively; and the attributes of the user's own objects
among them, the object a judged method is bound to first.

A compiled ``predict(x)`` that calls a helper ``encode(x)`` reading a global ``model`` names no
model itself, nor does a compiled ``trainer.step`` whose ``Trainer`` holds ``self.model`` and
``self.opt``: the fp64 referee, the state a training step is run from and the tensors a call
updates in place must all look through the helper and into the object. Functions and objects of
torch, of installed libraries (``transformers``), of the standard library and of this package are
not looked into: they are not the user's program, and their module globals are not the user's state.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import sysconfig
import types
from functools import lru_cache
from typing import Any, Callable

import torch

__all__ = ["is_user_function", "is_user_object", "reached_names"]


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
    return _is_user_file(value.__code__.co_filename)  # exec'd or typed in ("<string>"): the user's


def _is_user_file(filename: str) -> bool:
    return filename.startswith("<") or not os.path.abspath(filename).startswith(_library_dirs())


def is_user_object(value: Any) -> bool:
    """Whether ``value`` is an instance of a class of the user's own code (a ``Trainer`` holding a
    model and its optimizer), not a module, tensor, function or class, nor one of a library's."""
    if isinstance(value, (torch.nn.Module, torch.Tensor, type, types.ModuleType, types.FunctionType,
                          types.MethodType, types.BuiltinFunctionType)):
        return False
    if not isinstance(getattr(value, "__dict__", None), dict):
        return False
    module = sys.modules.get(type(value).__module__)
    filename = getattr(module, "__file__", None)
    if not isinstance(filename, str):
        return type(value).__module__ == "__main__"
    return _is_user_file(filename)


def _own_names(function: types.FunctionType) -> list[tuple[str, Any]]:
    try:
        names = inspect.getclosurevars(function)
    except (TypeError, ValueError):
        return []
    return [*names.nonlocals.items(), *names.globals.items()]


def _methods(value: Any) -> list[types.FunctionType]:
    """The user functions among the methods of ``value``'s class and its bases."""
    found: dict[int, types.FunctionType] = {}
    for klass in type(value).__mro__:
        for member in vars(klass).values():
            function = getattr(member, "__func__", member)  # a staticmethod or classmethod's function
            if is_user_function(function):
                found.setdefault(id(function), function)
    return list(found.values())


def reached_names(fn: Callable[..., Any]) -> list[tuple[str, Any]]:
    """``(name, value)`` for every closure cell and global ``fn`` reads, then those of each user
    function (:func:`is_user_function`) among them, transitively, each function once; each user
    object (:func:`is_user_object`) reached is looked into too, its attributes named
    ``name.attribute`` and its class's methods read as functions reached. The object ``fn`` is a
    method of (``self``), or ``fn`` itself when it is such an object with a ``__call__``, comes first;
    the arguments a ``functools.partial`` binds before that.
    Empty for a callable Python cannot inspect. A value reached under two names is listed under each."""
    found: list[tuple[str, Any]] = []
    seen: set[int] = set()
    pending: list[types.FunctionType] = []

    def reach(name: str, value: Any) -> None:
        found.append((name, value))
        if id(value) in seen:
            return
        if is_user_function(value):
            seen.add(id(value))
            pending.append(value)
        elif is_user_object(value):
            seen.add(id(value))
            for method in _methods(value):
                if id(method) not in seen:
                    seen.add(id(method))
                    pending.append(method)
            for attribute, held in list(vars(value).items()):
                reach(f"{name}.{attribute}", held)

    while isinstance(fn, functools.partial):  # ``partial(train_step, model, opt)``: what it binds
        for index, bound in enumerate(fn.args):
            reach(f"partial arg {index}", bound)
        for keyword, bound in fn.keywords.items():
            reach(keyword, bound)
        fn = fn.func
    owner = getattr(fn, "__self__", None)
    if owner is not None and not isinstance(owner, torch.nn.Module) and is_user_object(owner):
        reach("self", owner)
    elif is_user_object(fn):
        reach("self", fn)
    function = inspect.unwrap(getattr(fn, "__func__", fn))
    if inspect.isfunction(function) and id(function) not in seen:
        seen.add(id(function))
        pending.insert(0, function)
    while pending:
        for name, value in _own_names(pending.pop(0)):
            reach(name, value)
    return found
