"""Options of the ``instrumented`` backend: this package's own, plus Inductor config patches.

``torch.compile(fn, backend="instrumented", options={...})`` takes every key the ``inductor``
backend takes (validated and applied by Inductor's own code) and these keys of ours:

``dump_dir``
    write every captured graph under this folder as it is compiled. The environment variable
    ``INSTRUMENTED_BACKEND_DUMP_DIR`` sets it for scripts you cannot edit.

``check_accuracy``
    ``True``: on the first call of each compiled graph, compare its outputs with the graph run
    eagerly (fp64 as referee; see :mod:`instrumented_backend.diagnosis.accuracy`) and raise
    ``AccuracyError`` when they disagree; ``"warn"``: warn instead. The report is kept on the
    graph's captures (``cap.accuracy``). Random graphs are reported as not checked.

``minify``
    ``True``: when the accuracy check or the compile fails, shrink the failing graph with the
    :mod:`minifier` and name the repro script in the error (see
    :mod:`instrumented_backend.diagnosis.auto_minify`). ``INSTRUMENTED_BACKEND_MINIFY=1`` sets it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

from ..seams.aot.inductor_options import inductor_config_keys, inductor_config_patches

__all__ = ["BackendOptions", "OUR_OPTIONS", "DUMP_DIR_ENV", "MINIFY_ENV", "parse_options"]

DUMP_DIR_ENV = "INSTRUMENTED_BACKEND_DUMP_DIR"
MINIFY_ENV = "INSTRUMENTED_BACKEND_MINIFY"
OUR_OPTIONS = ("dump_dir", "check_accuracy", "minify")


@dataclass(frozen=True)
class BackendOptions:
    """Parsed options of one ``torch.compile`` call."""

    inductor_patches: dict[str, Any] = field(default_factory=dict)
    dump_dir: Optional[Path] = None
    check_accuracy: "bool | str" = False
    minify: bool = False


def parse_options(mode: Optional[str] = None, options: Optional[Mapping[str, Any]] = None) -> BackendOptions:
    """Split ``options`` into ours and Inductor's; raise ValueError naming any unknown key."""
    if options is not None and not isinstance(options, Mapping):
        raise ValueError(f"instrumented backend: options must be a dict, got {type(options).__name__}")
    ours = {k: v for k, v in (options or {}).items() if k in OUR_OPTIONS}
    theirs = {k: v for k, v in (options or {}).items() if k not in OUR_OPTIONS}
    known = inductor_config_keys()
    unknown = sorted(k for k in theirs if str(k).replace("-", "_") not in known)
    if unknown:
        raise ValueError(
            f"instrumented backend: unknown option(s) {unknown}; options are this package's "
            f"{list(OUR_OPTIONS)} or any Inductor config key (see torch._inductor.config)"
        )
    patches = inductor_config_patches(mode, theirs)

    dump_dir = ours.get("dump_dir", os.environ.get(DUMP_DIR_ENV) or None)
    if dump_dir is not None and not isinstance(dump_dir, (str, os.PathLike)):
        raise ValueError(f"instrumented backend: dump_dir must be a path, got {type(dump_dir).__name__}")
    check = ours.get("check_accuracy", False)
    if check not in (True, False, "warn", "raise"):
        raise ValueError(f"instrumented backend: check_accuracy must be True, False or 'warn', got {check!r}")
    minify = ours.get("minify", os.environ.get(MINIFY_ENV, "") not in ("", "0"))
    if not isinstance(minify, bool):
        raise ValueError(f"instrumented backend: minify must be True or False, got {minify!r}")
    return BackendOptions(inductor_patches=patches, dump_dir=Path(dump_dir) if dump_dir else None,
                          check_accuracy=check, minify=minify)
