"""Text rendering of a ProfileReport (tabulate tables), read from the data model only."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tabulate import tabulate

from .records import format_us

if TYPE_CHECKING:
    from .report import ProfileReport

__all__ = ["render"]


def _short(items: list[str], limit: int = 4) -> str:
    return ", ".join(items[:limit]) + (f" (+{len(items) - limit})" if len(items) > limit else "")


def _line(source: str) -> str:
    file, _, line = source.rpartition(":")
    return f"{file.rsplit('/', 1)[-1]}:{line}" if file else source


def render(report: "ProfileReport", *, rows: int = 15) -> str:
    """The whole report as text: timing, kernels, source lines, comparison, diagnosis."""
    sections = (_timing, _kernels, _by_source_line, _by_module, _outside_graphs, _by_category, _eager_ops,
                _findings)
    return "\n".join(line for section in sections for line in section(report, rows))


def _timing(report: "ProfileReport", rows: int) -> list[str]:
    out = [f"instrumented-backend profile ({report.device}, {report.step} per step); "
           f"graphs: {', '.join(report.graphs) or 'none'}",
           f"  eager:    {report.eager.describe()}",
           f"  compiled: {report.compiled.describe()}",
           f"  speed-up: {report.speedup:.2f}x",
           *(f"  note: {note}" for note in report.as_written),
           ""]
    if report.copy_bandwidth_gbps:
        out.append(f"Measured copy bandwidth: {report.copy_bandwidth_gbps:.1f} GB/s")
    return out


def _kernels(report: "ProfileReport", rows: int) -> list[str]:
    total = report.share_total_us
    kernel_rows = [[k.kernel, k.kind, f"{k.calls:g}", format_us(k.busy_us),
                    f"{format_us(k.p10_us)}-{format_us(k.p90_us)}", f"{k.share:.1%}" if total else "",
                    f"{k.bytes / 1e6:.2f}" if k.bytes else "",
                    f"{k.bandwidth_share:.2f}x" if k.bandwidth_share is not None else "",
                    _short(k.fx_nodes), _short([_line(s) for s in k.source_lines], 3)]
                   for k in report.kernels[:rows]]
    out = [f"Compiled kernels (per step, medians over {len(report.compiled_step_us)} profiled steps; "
           f"share of {report.share_total_label}, {format_us(total)}):",
           tabulate(kernel_rows, headers=["kernel", "kind", "calls", "time", "p10-p90", "share", "MB moved",
                                          "x copy BW", "FX nodes", "source lines"], disable_numparse=True)]
    if any(k.bandwidth_share is not None and k.bandwidth_share > 1 for k in report.kernels[:rows]):
        out.append("  (x copy BW above 1: the kernel's data stayed in cache, faster than a large copy reaches memory)")
    if len(report.kernels) > rows:
        out.append(f"  ... {len(report.kernels) - rows} more kernels")
    return [*out, ""]


def _by_source_line(report: "ProfileReport", rows: int) -> list[str]:
    line_rows = [[_line(r.source), r.code[:60], format_us(r.compiled_us), format_us(r.eager_us), _short(r.kernels, 2),
                  _short(r.eager_ops, 3)] for r in report.by_source_line()[:rows]]
    return ["Time by source line (compiled kernels split between the lines they fuse):",
            tabulate(line_rows, headers=["line", "code", "compiled", "eager", "kernels", "eager ops"],
                     disable_numparse=True),
            ""]


def _by_module(report: "ProfileReport", rows: int) -> list[str]:
    modules = report.by_module()
    if not modules:
        return []
    module_rows = [[m.module or "(root module's own code)", format_us(m.compiled_us), format_us(m.eager_us),
                    _short(m.kernels, 2), _short(m.eager_ops, 3)] for m in modules[:rows]]
    out = ["Time by module (as named_modules() names them; kernels split between the modules they fuse):",
           tabulate(module_rows, headers=["module", "compiled", "eager", "kernels", "eager ops"],
                    disable_numparse=True)]
    if len(modules) > rows:
        out.append(f"  ... {len(modules) - rows} more modules")
    return [*out, ""]


def _outside_graphs(report: "ProfileReport", rows: int) -> list[str]:
    if not report.ops_outside_graphs:
        return []
    total = report.share_total_us
    out = ["Ran eagerly in the compiled step, outside every compiled graph (per step; share of "
           f"{report.share_total_label}, as the kernels'):",
           tabulate([[op.name, f"{op.calls:g}", format_us(op.busy_us), format_us(op.self_us),
                      f"{op.share:.1%}" if total else ""] for op in report.ops_outside_graphs[:rows]],
                    headers=["op", "calls", "total", "self", "share"], disable_numparse=True)]
    if len(report.ops_outside_graphs) > rows:
        out.append(f"  ... {len(report.ops_outside_graphs) - rows} more ops")
    return [*out, ""]


def _by_category(report: "ProfileReport", rows: int) -> list[str]:
    category_rows = [[c.category, format_us(c.eager_us), format_us(c.compiled_us),
                      f"{c.speedup:.2f}x" if c.speedup else "",
                      f"{c.share_of_saving:.0%}" if c.share_of_saving is not None else "-",
                      _short(c.eager_ops, 3), _short(c.kernels, 3)]
                     for c in report.compare().categories]
    headers = ["category", "eager", "compiled", "speed-up", "share of saving", "eager ops",
               "kernels" + (" (and ops run eagerly)" if report.ops_outside_graphs else "")]
    return ["Eager vs compiled by category (profiled step):",
            tabulate(category_rows, headers=headers, disable_numparse=True),
            ""]


def _eager_ops(report: "ProfileReport", rows: int) -> list[str]:
    eager_rows: dict[str, list[float]] = {}
    for op in report.eager_ops:
        calls, total, own = eager_rows.get(op.name, [0.0, 0.0, 0.0])
        eager_rows[op.name] = [calls + op.calls, total + op.busy_us, own + op.self_us]
    return ["Top eager ops (per step):",
            tabulate([[name, f"{c:g}", format_us(t), format_us(s)] for name, (c, t, s) in
                      sorted(eager_rows.items(), key=lambda i: -i[1][1])[:rows]],
                     headers=["op", "calls", "total", "self"], disable_numparse=True),
            ""]


def _findings(report: "ProfileReport", rows: int) -> list[str]:
    out = ["Diagnosis:", *(f"  - {f.message}" for f in report.findings)]
    if report.unmatched_events:
        out.append(
            f"  (profiler events inside compiled graphs not joined to a kernel: {_short(report.unmatched_events, 6)})"
        )
    return out
