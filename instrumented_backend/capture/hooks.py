"""What capture asks of the diagnosis, one layer above it, which registers the answers on import.

The backend explains a failed kernel compile through the line map, checks a compiled graph's
accuracy and minifies a failure (its ``check_accuracy`` and ``minify`` options); the script
redirect records, at a compiled target's first call, the faults in effect and the trainable state
the target names. Those are the diagnosis's jobs: :mod:`instrumented_backend.diagnosis` registers
them here (:func:`register_diagnosis_hooks`) when it is imported, and the package imports it on
first use (a public name read, or the backend looked up through its entry point), so that capture
never imports a layer above its own (as the minifier's ``register_context_provider`` lets this
package register what the minifier calls).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

if TYPE_CHECKING:
    import torch

    from ..graphs import GraphCapture

__all__ = ["DiagnosisHooks", "register_diagnosis_hooks", "diagnosis_hooks"]


@dataclass(frozen=True)
class DiagnosisHooks:
    """The diagnosis's answers to capture's questions."""

    # Inductor's error with a failed kernel compile explained, or None when it is no such failure
    explained_compile_error: Callable[["GraphCapture", BaseException], Optional[BaseException]]
    # minify a graph whose compile failed: (the error, the graph, its example inputs, its capture)
    minify_compile_failure: Callable[[BaseException, "torch.fx.GraphModule", list[Any], "GraphCapture"], Any]
    # a compiled graph judged against its Dynamo graph at its first call: (compiled, job, raise on failure)
    accuracy_checked: Callable[[Callable[..., Any], Any, bool], Callable[..., Any]]
    # the trainable state a target names and its arguments hold (its StepState)
    step_state: Callable[[Any, Sequence[Any]], Any]
    # the faults injected now
    active_faults: Callable[[], list[Any]]


_registered: Optional[DiagnosisHooks] = None


def register_diagnosis_hooks(hooks: DiagnosisHooks) -> None:
    """Install ``hooks`` (the diagnosis does, when it is imported)."""
    global _registered
    _registered = hooks


def diagnosis_hooks() -> DiagnosisHooks:
    """The registered hooks; RuntimeError when ``instrumented_backend.diagnosis`` was never imported."""
    if _registered is None:
        raise RuntimeError("instrumented_backend.diagnosis registers what capture asks of it when it is imported: "
                           "import instrumented_backend (which imports it) before compiling")
    return _registered
