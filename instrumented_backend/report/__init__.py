"""What a user reads: tables over captures (``ib.report.format_graphs``) and the HTML report
(``ib.report.html(session, "report.html")``)."""

from .html import html, render_html
from .tables import format_graphs, format_kernels, graph_rows, kernel_rows

__all__ = ["graph_rows", "kernel_rows", "format_graphs", "format_kernels", "html", "render_html"]
