"""Resident memory over many recompiles: backend="instrumented" beside backend="inductor".

Each backend runs in its own fresh process: the 150-node block of ``overhead.py`` is compiled
again and again (``torch.compiler.reset()`` then a first call, caches off), the way a long job
that keeps recompiling does, and the process's resident set size is read after each compile.
The instrumented process keeps its captures in the process-wide list, bounded by
``ib.set_capture_limit`` (default 100); ``--limit`` changes it.

After the last compile each process also counts the objects Python's garbage collector tracks and
times a full collection (median of 7), which walks them all: what the kept captures cost a
program's own collections. The instrumented process does it again after ``ib.clear()``.

    python benchmarks/memory.py [--compiles 100] [--limit N]
    python benchmarks/memory.py --smoke      # CI: 2 compiles each
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tabulate import tabulate


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _collection() -> dict[str, float]:
    """GC-tracked objects now, and the median time of a full collection, which visits them all."""
    times = []
    for _ in range(7):
        start = time.perf_counter()
        gc.collect()
        times.append(time.perf_counter() - start)
    return {"objects": len(gc.get_objects()), "ms": statistics.median(times) * 1000}


def child(backend: str, compiles: int, limit: int | None) -> None:
    import torch
    import torch._functorch.config

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from overhead import Block

    if backend == "instrumented":
        import instrumented_backend as ib

        ib.set_capture_limit(limit)
    torch.manual_seed(0)
    model = torch.nn.Sequential(Block(), Block()).eval()
    x = torch.randn(2, 16, 64)
    samples = []
    with torch._functorch.config.patch(enable_autograd_cache=False), torch.no_grad():
        for _ in range(compiles):
            torch.compiler.reset()
            torch.compile(model, backend=backend, options={"fx_graph_cache": False})(x)
            gc.collect()
            samples.append(_rss_mb())
    collections = {backend: _collection()}
    if backend == "instrumented":
        ib.clear()
        collections["instrumented, captures cleared"] = _collection()
    print(json.dumps({"rss": samples, "gc": collections}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compiles", type=int, default=100)
    parser.add_argument("--limit", type=int, default=100, help="ib.set_capture_limit for the instrumented run")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--child", nargs=3, metavar=("BACKEND", "COMPILES", "LIMIT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        backend, compiles, limit = args.child
        child(backend, int(compiles), None if limit == "none" else int(limit))
        return 0
    compiles = 2 if args.smoke else args.compiles
    limit = 1 if args.smoke else args.limit
    series, collections = {}, {}
    for backend in ("inductor", "instrumented"):
        proc = subprocess.run([sys.executable, __file__, "--child", backend, str(compiles), str(limit)],
                              capture_output=True, text=True, timeout=3600)
        if proc.returncode != 0:
            print(proc.stdout[-2000:], proc.stderr[-4000:])
            return 1
        answer = json.loads(proc.stdout.strip().splitlines()[-1])
        series[backend] = answer["rss"]
        collections.update(answer["gc"])
    marks = sorted({0, compiles // 4, compiles // 2, compiles - 1})
    rows = [[f"after compile {i + 1}", *(f"{series[b][i]:.0f} MB" for b in series),
             f"{series['instrumented'][i] / series['inductor'][i]:.2f}x"] for i in marks]
    print(tabulate(rows, headers=["", "inductor RSS", "instrumented RSS", "ratio"], disable_numparse=True))
    growth = {b: series[b][-1] - series[b][marks[1] if len(marks) > 1 else 0] for b in series}
    print(f"growth from compile {marks[1] + 1} to {compiles}: inductor {growth['inductor']:+.0f} MB, "
          f"instrumented {growth['instrumented']:+.0f} MB (capture limit {limit})")
    base = collections["inductor"]
    print(tabulate([[name, f"{c['objects']:,}", f"{c['ms']:.0f} ms", f"{c['ms'] / base['ms']:.2f}x"]
                    for name, c in collections.items()],
                   headers=["after the last compile", "GC-tracked objects", "full gc.collect()", "ratio"],
                   disable_numparse=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
