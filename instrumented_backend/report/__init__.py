"""What a user reads: tables over captures (``ib.report.format_graphs``) and the HTML report
(``ib.report.html(session, "report.html")``)."""

from pathlib import Path
from typing import Any

from ..diagnosis.written import register_html_writer
from .html import html, render_html
from .tables import format_graphs, format_kernels, graph_rows, kernel_rows

__all__ = ["graph_rows", "kernel_rows", "format_graphs", "format_kernels", "html", "render_html"]


def _diagnosis_report(result: Any, path: Path) -> Path:
    """A diagnosis's HTML report: its captures, its first divergence and its verdict."""
    return html(result.captures, path, divergence=result.divergence, diagnosis=result)


register_html_writer(_diagnosis_report)
