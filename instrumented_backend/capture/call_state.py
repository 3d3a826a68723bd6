"""The torch state a compiled call ran in, and the one a diagnosis judges it in.

A call compiled with grad on is not the call compiled under ``no_grad``: with parameters that
require grad, AOTAutograd traces a joint graph and partitions it, with other decompositions, so a
divergence can live in one and not the other. The state is read at the script's call
(:meth:`CallState.now`) and every judged run applies it (:func:`judging_in`,
:func:`judged_state`). Plain data over torch: it imports nothing of this package.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from typing import Iterator

import torch

__all__ = ["CallState", "INFERENCE", "judged_state", "judging_in"]


@dataclass(frozen=True)
class CallState:
    """Grad mode, inference mode and deterministic algorithms, as at one call."""

    grad_enabled: bool = False
    inference_mode: bool = False
    deterministic: bool = False

    @classmethod
    def now(cls) -> "CallState":
        """The state in effect here."""
        return cls(grad_enabled=torch.is_grad_enabled(), inference_mode=torch.is_inference_mode_enabled(),
                   deterministic=torch.are_deterministic_algorithms_enabled())

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """Inside the block, this state is in effect; as it was afterwards."""
        deterministic = torch.are_deterministic_algorithms_enabled()
        mode = (torch.inference_mode() if self.inference_mode
                else torch.inference_mode(False) if torch.is_inference_mode_enabled() else contextlib.nullcontext())
        with mode, torch.set_grad_enabled(self.grad_enabled and not self.inference_mode):
            if deterministic != self.deterministic:
                torch.use_deterministic_algorithms(self.deterministic)
            try:
                yield
            finally:
                if deterministic != self.deterministic:
                    torch.use_deterministic_algorithms(deterministic)

    def describe(self) -> str:
        """``grad on``, ``no_grad`` or ``inference_mode``, and ``deterministic algorithms`` when on."""
        mode = "inference_mode" if self.inference_mode else "grad on" if self.grad_enabled else "no_grad"
        return mode + (", deterministic algorithms" if self.deterministic else "")


# How an inference call is judged unless told otherwise: under no_grad.
INFERENCE = CallState()

_JUDGED: contextvars.ContextVar[CallState] = contextvars.ContextVar("judged_call_state", default=INFERENCE)


def judged_state() -> CallState:
    """The state judged runs apply (:data:`INFERENCE` unless inside :func:`judging_in`)."""
    return _JUDGED.get()


@contextlib.contextmanager
def judging_in(state: CallState) -> Iterator[None]:
    """Inside the block, judged runs apply ``state``: the one the script's call ran in."""
    token = _JUDGED.set(state)
    try:
        yield
    finally:
        _JUDGED.reset(token)
