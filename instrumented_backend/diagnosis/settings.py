"""The settings of one diagnosis, as one frozen record passed down every stage.

:class:`CompileSettings` is how every compile of the diagnosis is made (as the target's own
``torch.compile`` was called); :class:`DiagnoseSettings` is everything else the caller chose. A
stage that starts a diagnosis again (an exported program's Python-wrapper build) changes them with
:func:`dataclasses.replace`, never by passing a dozen arguments along.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from .auto_minify import MINIFY_SECONDS

__all__ = ["CompileSettings", "DiagnoseSettings", "minify_budget"]


@dataclass(frozen=True)
class CompileSettings:
    """The ``torch.compile`` arguments every compile of a diagnosis repeats."""

    given: dict[str, Any] = field(default_factory=dict)  # dynamic / mode / options / fullgraph, as given
    patches: dict[str, Any] = field(default_factory=dict)  # their Inductor config patches (mode and options)
    dynamo_kwargs: dict[str, Any] = field(default_factory=dict)  # dynamic and fullgraph, for torch.compile

    @classmethod
    def of(cls, compile_kwargs: Optional[dict[str, Any]]) -> "CompileSettings":
        """The settings for ``compile_kwargs``, the arguments the target was compiled with;
        ValueError names an argument diagnose cannot repeat."""
        from ..capture.options import parse_options
        from ..capture.redirect import COMPILE_SETTINGS

        given = {k: v for k, v in (compile_kwargs or {}).items() if v is not None}
        unknown = sorted(set(given) - set(COMPILE_SETTINGS))
        if unknown:
            raise ValueError(f"diagnose: compile_kwargs takes {list(COMPILE_SETTINGS)}, not {unknown}")
        patches = parse_options(given.get("mode"), given.get("options")).inductor_patches
        return cls(given, patches, {k: given[k] for k in ("dynamic", "fullgraph") if k in given})

    @property
    def inductor_options(self) -> dict[str, Any]:
        """The Inductor options of every judged compile: the patches, with Inductor's random numbers
        drawn as eager draws them (``fallback_random``), so that only a bug makes them differ."""
        return {**self.patches, "fallback_random": True}

    @property
    def dynamic(self) -> Optional[bool]:
        return self.dynamo_kwargs.get("dynamic")

    @property
    def fullgraph(self) -> bool:
        return bool(self.dynamo_kwargs.get("fullgraph"))


@dataclass(frozen=True)
class DiagnoseSettings:
    """What the caller of one diagnosis chose (see :func:`~.diagnose.diagnose` for each)."""

    name: str  # the target as the report names it
    out_dir: Path
    compile: CompileSettings = field(default_factory=CompileSettings)
    train: bool = False
    minify_seconds: Optional[float] = MINIFY_SECONDS  # the minifier's budget; None writes no repro
    bisect: bool = False
    tol: Optional[float] = None
    seed: int = 0
    progress: Optional[bool] = None  # one line per step on stderr (None: on a terminal)
    input_gradients: bool = True  # train: every floating input requires grad, not only those passed so
    as_written: tuple[str, ...] = ()  # notes on the torch.compile already on the target, taken off

    @property
    def minify(self) -> bool:
        return self.minify_seconds is not None


def minify_budget(minify: "bool | float") -> Optional[float]:
    """The minifier's time budget ``minify`` asks for: :data:`~.auto_minify.MINIFY_SECONDS` for True,
    None for False (no search), else the number of seconds given. Raises ValueError naming a value
    that is none of these."""
    if isinstance(minify, bool):
        return MINIFY_SECONDS if minify else None
    if isinstance(minify, (int, float)) and minify > 0:
        return float(minify)
    raise ValueError(f"diagnose: minify must be True, False or a positive number of seconds, got {minify!r}")
