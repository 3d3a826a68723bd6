"""Seam: the traceback the fake-tensor layer logs when an op's fake implementation raises.

``FakeTensorMode._dispatch_impl`` logs ``"failed while attempting to run meta for %s"`` with the
traceback (``log.exception``, about forty lines) on its module logger,
``torch._subclasses.fake_tensor``, each time a meta or fake kernel raises. A diagnosis compiles
its target again at every step: :func:`meta_failures_unlogged` drops that one record while a
block runs (the error itself still propagates and is reported).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Iterator

from .. import SeamMoved

__all__ = ["meta_failures_unlogged", "check", "LOGGER", "MESSAGE"]

LOGGER = "torch._subclasses.fake_tensor"
MESSAGE = "failed while attempting to run meta"


class _MetaFailureFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(MESSAGE)


@contextlib.contextmanager
def meta_failures_unlogged() -> Iterator[None]:
    """Leave out the fake-tensor layer's "failed while attempting to run meta" records in the block."""
    logger, quiet = logging.getLogger(LOGGER), _MetaFailureFilter()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


def check() -> None:
    """Raise SeamMoved unless the fake-tensor layer still logs meta failures on its module logger."""
    import inspect

    from torch._subclasses import fake_tensor

    logger = getattr(fake_tensor, "log", None)
    if not isinstance(logger, logging.Logger) or logger.name != LOGGER:
        raise SeamMoved(f"fake_tensor_log: torch._subclasses.fake_tensor.log is not the logger {LOGGER!r}")
    dispatch = getattr(getattr(fake_tensor, "FakeTensorMode", None), "_dispatch_impl", None)
    if dispatch is None or MESSAGE not in inspect.getsource(dispatch):
        raise SeamMoved(f"fake_tensor_log: FakeTensorMode._dispatch_impl no longer logs {MESSAGE!r}")
