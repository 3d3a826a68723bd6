"""Values of the data model that are produced on first read, not during the compile.

Printing an FX graph as Python costs milliseconds per graph, growing with its nodes, paid inside
``torch.compile`` although most captures are never printed. The text fields
that can be produced later from an object the capture keeps anyway (the Dynamo graph's copy, the
post-grad GraphModule, which Inductor no longer changes once ``compile_fx_inner`` returns) hold a
:class:`Deferred` until first read; a :class:`DeferredField` on the dataclass resolves it then
and stores the result, so readers always see a plain value.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Generic, Optional, TypeVar

__all__ = ["Deferred", "DeferredField", "resolve", "stored"]

T = TypeVar("T")
_MISSING = object()


class Deferred(Generic[T]):
    """A value computed once, on first :meth:`get`, by ``produce``.

    If ``produce`` raises, ``on_error(exc)`` is called once and ``fallback`` is the value from
    then on: a capture part that fails late degrades the same way as one that fails early.
    """

    __slots__ = ("_produce", "_fallback", "_on_error", "_value", "_lock")

    def __init__(self, produce: Callable[[], T], *, fallback: T,
                 on_error: Optional[Callable[[BaseException], None]] = None) -> None:
        self._produce: Optional[Callable[[], T]] = produce
        self._fallback = fallback
        self._on_error = on_error
        self._value: Any = _MISSING
        self._lock = threading.Lock()

    def get(self) -> T:
        """The value, computing it on the first call (thread-safe: computed once)."""
        if self._value is not _MISSING:
            return self._value
        with self._lock:
            if self._value is _MISSING:
                produce, self._produce = self._produce, None
                try:
                    self._value = produce()  # type: ignore[misc]
                except Exception as exc:  # noqa: BLE001 - a capture part never raises into the reader
                    self._value = self._fallback
                    if self._on_error is not None:
                        self._on_error(exc)
        return self._value

    @property
    def resolved(self) -> bool:
        """True once the value has been computed."""
        return self._value is not _MISSING

    def map(self, transform: Callable[[T], Any], *, fallback: Any) -> "Deferred[Any]":
        """A Deferred of ``transform(self.get())``, sharing this one's computation."""
        return Deferred(lambda: transform(self.get()), fallback=fallback)


def resolve(value: Any) -> Any:
    """``value.get()`` for a Deferred, else ``value`` itself."""
    return value.get() if isinstance(value, Deferred) else value


def stored(obj: Any, name: str) -> Any:
    """What the :class:`DeferredField` ``name`` of ``obj`` holds now, a Deferred not resolved
    (for a question such as "is anything there" that must not compute the value)."""
    return obj.__dict__[_slot_name(name)]


def _slot_name(field_name: str) -> str:
    """Where a :class:`DeferredField` keeps its value in the instance's ``__dict__``."""
    return f"_deferred_{field_name}"


class _FromFactory:
    """The class-level default of a field with a factory; ``__set__`` swaps in a fresh value."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<made by the field's factory>"


_FROM_FACTORY = _FromFactory()


class DeferredField:
    """A dataclass field that accepts a :class:`Deferred` and reads back its value.

    Declare it as the field's default: ``code: str = DeferredField("")``, or
    ``kernels: list = DeferredField(factory=list)`` for a fresh mutable value per instance;
    ``DeferredField()`` with neither leaves the field required; inside ``field(default=...)`` when
    the field needs ``repr=False`` or ``compare=False``. Dataclasses call ``__set__``
    from ``__init__`` and read the default through ``__get__(None, owner)``.
    """

    def __init__(self, default: Any = _MISSING, *, factory: Optional[Callable[[], Any]] = None) -> None:
        if default is not _MISSING and factory is not None:
            raise ValueError("DeferredField takes a default or a factory, not both")
        self._default = _FROM_FACTORY if factory is not None else default
        self._factory = factory
        self._slot = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._slot = _slot_name(name)

    def __get__(self, obj: Any, owner: Optional[type] = None) -> Any:
        if obj is None:
            if self._default is _MISSING:
                raise AttributeError(self._slot)  # no class-level default: the field is required
            return self._default
        value = obj.__dict__[self._slot]
        if isinstance(value, Deferred):
            value = obj.__dict__[self._slot] = value.get()
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        if value is self:  # declared as ``field(default=DeferredField(...), ...)``: the default is the field
            value = self._default
        if value is _FROM_FACTORY:
            value = self._factory()  # type: ignore[misc]
        obj.__dict__[self._slot] = value
