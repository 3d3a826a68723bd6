"""``ib.report.html``: one self-contained HTML file with every graph, every layer, every line linked.

The page opens from ``file://`` with no server and no network: its CSS, script and data are
inline. The data is the JSON of :class:`~.page.GraphPage` records; the script draws one graph at a
time (so a 24-layer model's report is interactive at once) and links lines by their ids.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Optional, Union

from .highlight import TOKEN_CSS, pygments_available
from .page import PANES, graph_page
from .sections import kernel_shares, run_sections, source_shares

if TYPE_CHECKING:
    from minifier import MinifyResult

    from ..capture.left_out import LeftOut
    from ..diagnosis.divergence import DivergenceReport
    from ..diagnosis.verdict import Diagnosis
    from ..graphs import CaptureSession, GraphCapture
    from ..profiling.report import ProfileReport

__all__ = ["html", "render_html"]

Captures = Union["CaptureSession", "GraphCapture", Iterable["GraphCapture"], str, Path]
_ASSETS = Path(__file__).with_name("assets")


def _graphs(source: Captures) -> list["GraphCapture"]:
    from ..capture.load import load
    from ..graphs import CaptureSession, GraphCapture

    if isinstance(source, (str, Path)):
        return list(load(source))
    if isinstance(source, GraphCapture):
        return [source]
    if isinstance(source, CaptureSession):
        return list(source.graphs)
    try:
        graphs = list(source)
    except TypeError:
        raise TypeError(f"report.html: expected a capture session, captures, a capture or a dump folder, "
                        f"got {type(source).__name__}") from None
    bad = [type(g).__name__ for g in graphs if not isinstance(g, GraphCapture)]
    if bad:
        raise TypeError(f"report.html: expected GraphCapture items, got {', '.join(sorted(set(bad)))}")
    return graphs


def render_html(source: Captures, *, profile: Optional["ProfileReport"] = None,
                divergence: Optional["DivergenceReport"] = None, minified: Optional["MinifyResult"] = None,
                diagnosis: Optional["Diagnosis"] = None, left_out: Optional["LeftOut"] = None,
                title: str = "instrumented-backend report") -> str:
    """The report page as a string (see :func:`html`)."""
    graphs = _graphs(source)
    shares = kernel_shares(profile)
    pages = [graph_page(graph, kernel_shares=shares).to_json() for graph in graphs]
    data = {
        "title": title,
        "panes": PANES,
        "graphs": pages,
        "sections": run_sections(graphs, profile=profile, divergence=divergence, minified=minified,
                                 diagnosis=diagnosis, left_out=left_out),
        "sourceShares": source_shares(profile),
        "highlighted": pygments_available(),
    }
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")  # safe inside <script>
    template = (_ASSETS / "report.html").read_text(encoding="utf-8")
    css = (_ASSETS / "report.css").read_text(encoding="utf-8") + TOKEN_CSS
    script = (_ASSETS / "report.js").read_text(encoding="utf-8")
    import html as html_module

    return (template.replace("{{title}}", html_module.escape(title)).replace("{{css}}", css)
            .replace("{{script}}", script).replace("{{data}}", payload))


def html(source: Captures, path: "str | Path", profile: Optional["ProfileReport"] = None, *,
         divergence: Optional["DivergenceReport"] = None, minified: Optional["MinifyResult"] = None,
         diagnosis: Optional["Diagnosis"] = None, left_out: Optional["LeftOut"] = None,
         title: str = "instrumented-backend report") -> Path:
    """Write the report for ``source`` (a session, captures, one capture, or a dump folder) to
    ``path`` and return it. ``profile`` adds the timing overlay and the eager-vs-compiled
    comparison; ``divergence`` (from ``ib.find_first_divergence``), ``minified`` (a minifier
    result) and ``diagnosis`` (from ``ib.diagnose``: its verdict, the outputs and gradients
    against eager, the failing layer, the repro) add their sections; ``left_out``
    (:class:`~instrumented_backend.capture.left_out.LeftOut`) says what the graphs shown leave out
    of the program: nothing compiled and why, frames that ran eagerly because their compile
    failed, frames compiled again and again. Open the file in a browser; it needs no server or
    network.
    """
    target = Path(path)
    text = render_html(source, profile=profile, divergence=divergence, minified=minified, diagnosis=diagnosis,
                       left_out=left_out, title=title)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(target)
    return target
