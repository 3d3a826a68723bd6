"""The HTML report of MobileBERT (24 layers, ``MobileBertConfig()``, random weights): file size and
time to interactive in headless Chromium.

    python benchmarks/html_report.py            # 24 layers (a few minutes: one Inductor compile)
    python benchmarks/html_report.py --layers 2 # a quick run

Time to interactive is measured in the page: ``performance.now()`` when the report's script has
drawn the index and the first graph's five panes and bound its handlers (``ibReport.readyMs``),
over several loads from ``file://``; the figure is the median.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "examples"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--loads", type=int, default=5, help="page loads to time (default 5)")
    parser.add_argument("--out", type=Path, help="keep the report at this path (default: a temporary file, removed)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ib-html-benchmark-") as folder:
        return _measure(args, args.out or Path(folder) / "mobilebert.html")


def _measure(args: argparse.Namespace, report_path: Path) -> int:

    from browser import start_browser
    from profile_mobilebert import build

    import instrumented_backend as ib

    torch._inductor.config.fx_graph_cache = False
    model, input_ids = build(args.layers, batch=2, seq=32)
    with ib.capture() as session, torch.no_grad():
        torch.compile(model, backend="instrumented")(input_ids)
    started = time.perf_counter()
    path = ib.report.html(session, report_path)
    write_s = time.perf_counter() - started
    lines = sum(len(g.output_code.splitlines()) for g in session)
    driver = start_browser()
    try:
        ready = []
        for _ in range(args.loads):
            driver.get(path.resolve().as_uri())
            ready.append(driver.execute_script("return window.ibReport.readyMs"))
        errors = [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    finally:
        driver.quit()
    size_mb = path.stat().st_size / 1e6
    kernels = sum(len(g.kernels) for g in session)
    layers = f"{args.layers} layer{'s' if args.layers != 1 else ''}"
    print(f"MobileBERT ({layers}): {len(session)} graph(s), {kernels} kernels, {lines} output-code lines")
    where = path if args.out else "a temporary file (--out keeps it)"
    print(f"report: {where}, {size_mb:.2f} MB, written in {write_s:.2f} s")
    print(f"time to interactive (median of {len(ready)} loads): {statistics.median(ready):.0f} ms "
          f"(min {min(ready):.0f}, max {max(ready):.0f}); console errors: {len(errors)}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
