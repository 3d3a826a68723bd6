"""Our minifier vs PyTorch's (after-AOT, ``TORCHDYNAMO_REPRO_LEVEL=4`` style) side by side, one run.

Cases (float32, ATen graphs from ``make_fx``, the tutorial's doubling-``neg`` bug injected):

  (a) tutorial  the tutorial's 3-op graph (neg, maximum, cat)
  (b) block     a ~60-node block with the neg buried in the middle
  (c) stack     a ~300-node stack of such blocks, the neg in one of them
  (d) compile   the tutorial's uint8 graph with the cast-dropping neg (a C++ compile error)

For each: PyTorch's minifier in its default mode (a fresh subprocess per candidate) and in its
fastest mode (``--no-isolate``), each run as ``python repro.py minify`` on the repro PyTorch's
own ``save_graph_repro`` writes; ours from the same starting point, ``python -m minifier
repro.py`` on the repro ours writes for the same unminified graph (``cold``: interpreter start,
torch import, worker start and exit included), and in this process with a warm worker
(``warm``). Printed: wall time, candidates checked, final compute-node count, ratios.

    python benchmarks/minifier_vs_pytorch.py                  # all cases, all modes (over an hour on 2 cores)
    python benchmarks/minifier_vs_pytorch.py --cases tutorial --skip-default
    python benchmarks/minifier_vs_pytorch.py --cases block stack --modes default
    python benchmarks/minifier_vs_pytorch.py --smoke          # ours only, case (a): CI's smoke run
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from tabulate import tabulate
from torch.fx.experimental.proxy_tensor import make_fx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


# ----------------------------------------------------------------------------- cases

def tutorial(x1, x2):  # no annotations: make_fx copies them into the graph code
    a = torch.neg(x1)
    b = torch.maximum(x2, a)
    return (torch.cat([b], dim=0),)


def _block(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, *, buried: bool) -> torch.Tensor:
    h = torch.mm(x, w) + bias
    h = torch.relu(h) * 0.5 + torch.sigmoid(h)
    mean = h.mean(dim=-1, keepdim=True)
    var = ((h - mean) ** 2).mean(dim=-1, keepdim=True)
    h = (h - mean) / torch.sqrt(var + 1e-5)
    h = torch.tanh(h) + torch.exp(-torch.abs(h))
    if buried:
        h = torch.maximum(h, torch.neg(h) * 0.25)
    g = torch.softmax(h, dim=-1)
    h = h * g + torch.clamp(h, -1, 1)
    h = torch.log1p(torch.abs(h)) - torch.rsqrt(h * h + 1.0)
    m = h.amax(dim=-1, keepdim=True)
    h = torch.where(h > 0, h - m, h + m) * torch.cos(h) + torch.sin(h)
    h = torch.nn.functional.gelu(h) + torch.erf(h) * 0.1 - h.pow(3) * 0.01
    h = torch.nn.functional.silu(h) * torch.reciprocal(torch.abs(h) + 2.0)
    return h + x


def block(x, w, bias):
    return (_block(x, w, bias, buried=True),)


def stack(x, w, bias):
    for i in range(5):
        x = _block(x, w, bias, buried=i == 3)
    return (x,)


def make_case(name: str) -> tuple[torch.fx.GraphModule, list[Any], str]:
    """(ATen graph, inputs, fault preset name) of a benchmark case."""
    torch.manual_seed(0)
    if name == "tutorial":
        fn, inputs, fault = tutorial, [torch.randn(1, 8), torch.randn(8390, 8)], "doubling_neg"
    elif name == "compile":
        fn, fault = tutorial, "cast_dropping_neg"
        inputs = [torch.randint(256, (1, 8), dtype=torch.uint8), torch.randint(256, (8390, 8), dtype=torch.uint8)]
    else:
        fn, fault = {"block": block, "stack": stack}[name], "doubling_neg"
        inputs = [torch.randn(64, 32), torch.randn(32, 32) / 6, torch.randn(32)]
    from torch._inductor.decomposition import select_decomp_table

    with torch.no_grad():  # decomposed as AOT autograd decomposes for Inductor: a real post-AOT graph
        gm = make_fx(fn, decomposition_table=select_decomp_table())(*inputs)
    return gm, inputs, fault


def compute_nodes(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op not in ("placeholder", "output"))


# ----------------------------------------------------------------------------- ours

def run_ours(name: str) -> dict[str, Any]:
    """Minify one case in this process (the worker for its setup must already be warm)."""
    import instrumented_backend as ib
    from minifier import AccuracyFailure, CompileFailure, minify

    gm, inputs, fault = make_case(name)
    check = CompileFailure() if name == "compile" else AccuracyFailure()
    with getattr(ib.faults, fault)(), tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        result = minify(gm, inputs, check=check, repro_dir=out, echo=lambda line: None)
        seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "candidates": result.compiles,
        "start": compute_nodes(gm),
        "final": result.final_nodes,
        "ops": sorted(
            {str(n.target).split(".")[1] for n in result.graph_module.graph.nodes if n.op == "call_function"}
        ),
        "reproduced": result.reproduced,
    }


def warm_ours(name: str) -> None:
    import instrumented_backend as ib
    from minifier import current_context, prewarm
    from minifier.workers import WorkerSetup

    with getattr(ib.faults, make_case(name)[2])():
        prewarm(WorkerSetup.for_context(current_context())).wait_ready()


def run_ours_cold(name: str, workdir: Path) -> dict[str, Any]:
    """``python -m minifier repro.py`` in a fresh process, on our repro of the unminified graph."""
    import instrumented_backend as ib
    from minifier import AccuracyFailure, CompileFailure, minify

    gm, inputs, fault = make_case(name)
    check = CompileFailure() if name == "compile" else AccuracyFailure()
    case_dir = workdir / f"{name}-ours"
    with getattr(ib.faults, fault)():  # no strategies: the repro holds the whole failing graph
        whole = minify(gm, inputs, check=check, strategies=[], repro_dir=case_dir, echo=lambda line: None)
    command = [sys.executable, "-m", "minifier", str(whole.repro_path), "--out", str(case_dir / "minified")]
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"cold run of {name} failed:\n{proc.stderr[-3000:]}")
    summary = re.search(r"(\d+) -> (\d+) nodes in [\d.]+ s, (\d+) compiles", proc.stdout)
    if summary is None:
        raise RuntimeError(f"cold run of {name} printed no summary:\n{proc.stdout[-3000:]}")
    return {"seconds": seconds, "start": int(summary[1]), "final": int(summary[2]), "candidates": int(summary[3])}


# ----------------------------------------------------------------------------- PyTorch's

_SITECUSTOMIZE = "import os\nif os.environ.get('INSTRUMENTED_BACKEND_FAULTS'):\n    import instrumented_backend\n"


def run_pytorch(name: str, isolate: bool, workdir: Path) -> dict[str, Any]:
    """``python repro.py minify [--no-isolate]`` on the repro PyTorch's after-AOT tooling writes."""
    from torch._dynamo.repro.after_aot import save_graph_repro

    import instrumented_backend as ib

    gm, inputs, fault = make_case(name)
    case_dir = workdir / f"{name}-{'isolate' if isolate else 'no-isolate'}"
    case_dir.mkdir(parents=True, exist_ok=True)
    (case_dir / "sitecustomize.py").write_text(_SITECUSTOMIZE)  # the fault reaches every child it spawns
    compiler = "inductor" if name == "compile" else "inductor_accuracy"
    with open(case_dir / "repro.py", "w") as fd:
        save_graph_repro(fd, gm, inputs, compiler, save_dir=str(case_dir / "checkpoints"))
    with getattr(ib.faults, fault)():
        env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(case_dir), str(ROOT), env.get("PYTHONPATH", "")])
    env["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
    env["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"
    command = [sys.executable, "repro.py", "minify"] + ([] if isolate else ["--no-isolate"])
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=case_dir, env=env, capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - start
    queries = re.findall(r"Made (\d+) queries", proc.stderr)
    final = None
    minimal = case_dir / "repro.py"
    text = minimal.read_text() if minimal.exists() else ""
    if "Wrote minimal repro" in proc.stderr and "def forward" in text:
        body = text.split("def forward", 1)[1].split("return", 1)[0]
        final = len(re.findall(r"=\s*torch\.ops\.", body))
    return {"seconds": seconds, "candidates": int(queries[-1]) if queries else None, "final": final,
            "start": compute_nodes(gm), "ok": proc.returncode == 0 and final is not None,
            "tail": proc.stderr[-1500:]}


# ----------------------------------------------------------------------------- report

def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="*", default=["tutorial", "block", "stack", "compile"])
    parser.add_argument("--skip-default", action="store_true", help="skip PyTorch's default (isolated) mode")
    parser.add_argument("--modes", nargs="*", choices=["no-isolate", "default"], default=["no-isolate", "default"],
                        help="PyTorch's modes to run (default: both)")
    parser.add_argument("--skip-pytorch", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="ours only, tutorial case, warm and cold")
    args = parser.parse_args(argv)
    if args.skip_default:
        args.modes = [m for m in args.modes if m != "default"]
    if args.smoke:
        args.cases, args.skip_pytorch = ["tutorial"], True

    rows, failures = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.cases:
            warm_ours(name)
            cold = run_ours_cold(name, Path(tmp))
            warm = run_ours(name)
            row = {
                "case": name,
                "nodes": warm["start"],
                "ours warm s": warm["seconds"],
                "ours cold s": cold["seconds"],
                "ours compiles": warm["candidates"],
                "ours final": warm["final"],
                "ours final ops": ",".join(warm["ops"]),
            }
            if not warm["reproduced"]:
                failures.append(f"{name}: our final graph did not re-check")
            if cold["final"] != warm["final"]:
                failures.append(f"{name}: the cold run ended at {cold['final']} nodes, the warm one at {warm['final']}")
            # PyTorch's after-AOT compile-error mode does not see the injected compile error
            # ("Input graph did not fail the tester"), so case (d) is ours only.
            modes = [] if args.skip_pytorch or name == "compile" else [(m, m == "default") for m in args.modes]
            for label, isolate in modes:
                theirs = run_pytorch(name, isolate, Path(tmp))
                if not theirs["ok"]:
                    failures.append(f"{name}: PyTorch's {label} run did not finish:\n{theirs['tail']}")
                row[f"pt {label} s"] = theirs["seconds"]
                row[f"pt {label} checks"] = theirs["candidates"]
                row[f"pt {label} final"] = theirs["final"]
                row[f"x vs {label} (cold)"] = theirs["seconds"] / cold["seconds"]
                row[f"x vs {label} (warm)"] = theirs["seconds"] / warm["seconds"]
            rows.append(row)
            print(f"done: {name}", file=sys.stderr, flush=True)
    print(tabulate(rows, headers="keys", floatfmt=".1f"))
    for failure in failures:
        print("FAILED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
