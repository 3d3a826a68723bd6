"""Chrome/Perfetto trace export with kernel events annotated from the capture."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .report import ProfileReport

__all__ = ["annotated_trace"]


def annotated_trace(report: "ProfileReport") -> dict[str, Any]:
    """The compiled run's trace; each joined kernel event's args gain kernel, graph, FX nodes, lines, bytes."""
    trace = copy.deepcopy(report.compiled_trace)
    by_event: dict[int, Any] = {}
    for row in report.kernels:
        for event_id in row.event_ids:
            by_event[event_id] = row
    for event in trace.get("traceEvents", []):
        args = event.get("args")
        if not isinstance(args, dict) or event.get("ph") != "X":
            continue
        row = by_event.get(args.get("External id"))
        if row is None:
            continue
        args.update({"ib.kernel": row.kernel, "ib.graph": row.graph, "ib.kind": row.kind,
                     "ib.fx_nodes": ", ".join(row.fx_nodes), "ib.dynamo_nodes": ", ".join(row.dynamo_nodes),
                     "ib.source_lines": "; ".join(row.source_lines)})
        if row.bytes:
            args["ib.bytes"] = row.bytes
        if row.bandwidth_share is not None:
            args["ib.bandwidth_share"] = round(row.bandwidth_share, 4)
    return trace
