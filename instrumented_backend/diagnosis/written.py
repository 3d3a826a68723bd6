"""A diagnosis on disk: ``diagnosis.txt``, ``diagnosis.json`` and the HTML report, written together.

The HTML report is drawn by :mod:`instrumented_backend.report`, a layer above this one, which
registers its writer here when it is imported (:func:`register_html_writer`; the package imports it).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from .accuracy import error_line as _error_text
from .verdict import Diagnosis

if TYPE_CHECKING:
    from ..graphs import GraphCapture

__all__ = ["write_reports", "finish", "register_html_writer"]

# (the diagnosis, the path) -> the path written
_html_writer: Optional[Callable[[Diagnosis, Path], Path]] = None


def register_html_writer(writer: Callable[[Diagnosis, Path], Path]) -> None:
    """Draw each diagnosis's HTML report with ``writer`` (the report package does, when imported)."""
    global _html_writer
    _html_writer = writer


def write_reports(result: Diagnosis, out: Path) -> None:
    """Write ``diagnosis.txt``, ``diagnosis.json`` and, when it compiled graphs, ``report.html``
    under ``out``; again after ``result`` changed (the script's replay notes), all three agree."""
    out.mkdir(parents=True, exist_ok=True)
    result.reports = {"text": str(out / "diagnosis.txt"), "json": str(out / "diagnosis.json")}
    if result.captures and _html_writer is None:
        result.reports["html"] = "(not written: instrumented_backend.report, which draws it, was not imported)"
    elif result.captures:
        try:
            result.reports["html"] = str(_html_writer(result, out / "report.html"))
        except Exception as exc:  # noqa: BLE001 - the text and JSON reports still stand
            result.reports["html"] = f"(not written: {_error_text(exc)})"
    (out / "diagnosis.txt").write_text(result.render() + "\n", encoding="utf-8")
    (out / "diagnosis.json").write_text(json.dumps(result.to_dict(), indent=1, default=str), encoding="utf-8")


def finish(result: Diagnosis, out: Path, graphs: list["GraphCapture"], started: float,
           say: Callable[[str], None]) -> Diagnosis:
    """``result`` complete: its time, the captures its HTML report is drawn from, its reports written."""
    result.seconds = time.perf_counter() - started
    result.captures = graphs
    write_reports(result, out)
    say(f"done: {result.verdict} in {result.seconds:.1f} s; report in {out}")
    return result
