"""What a user reads: tables over captures (``ib.report.format_graphs``)."""

from .tables import format_graphs, format_kernels, graph_rows, kernel_rows

__all__ = ["graph_rows", "kernel_rows", "format_graphs", "format_kernels"]
