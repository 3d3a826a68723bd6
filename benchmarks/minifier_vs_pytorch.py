"""Our minifier vs PyTorch's (after-AOT, ``TORCHDYNAMO_REPRO_LEVEL=4`` style) side by side, one run.

Cases (float32 unless said, ATen graphs from ``make_fx`` with Inductor's decompositions):

  tutorial       the tutorial's 3-op graph (neg, maximum, cat), doubling-``neg`` accuracy bug
  block          a ~60-node block with the neg buried in the middle
  stack          a ~300-node stack of such blocks, the neg in one of them
  compile        the tutorial's uint8 graph with the cast-dropping neg (a C++ compile error)
  stack_compile  the ~300-node stack with a uint8 section in one block, cast-dropping neg

Two starting points, each timed for both minifiers with a fresh Inductor cache directory holding no
kernel either one built before (only the CPU's vector-ISA probe, which any earlier use of Inductor
on the machine leaves behind; without it every fresh process spends about 4 s rebuilding it).
Our workers also read which of those test libraries load from answers an earlier worker on the
machine remembered (``minifier/workers/isa_answers.py``, keyed by the libraries' bytes, so the
template's probe runs as a worker's does; a first-ever worker loads them, ~0.8 s of CPU); set
``MINIFIER_FRESH_ISA_PROBE=1`` to time ours without them:

* ``cold``: a fresh process on a saved repro of the unminified graph: ``python -m minifier
  repro.py`` (ours, on the repro ours writes) against ``python repro.py minify --no-isolate``
  (PyTorch's fastest mode, on the repro PyTorch's ``save_graph_repro`` writes) and, with
  ``--pytorch-modes default``, PyTorch's default mode (a fresh subprocess per candidate).
  Beside ours, ``1 check cold s`` times ``python repro.py`` on that unminified repro (a fresh
  process judging the whole graph once), and ``x cold ... if 1 check`` divides PyTorch's time by
  it: the ratio a minifier started cold would reach if it cost what seeing the failure once in
  a fresh process costs. Not a ceiling: a minifier can overlap its worker's imports with its own
  start (ours does), but it tells how much room a machine's fixed costs leave.
* ``in-process``: in a process that has seen the failure, as a user who calls a minifier has:
  torch imported and the case's graph compiled once by Inductor with its bug (once per case,
  before any timing; since session 28, so the tutorial case, the first, no longer pays Inductor's
  import inside whichever minifier ran first). From the call to the written repro: ``minify()``
  with its worker started by the call (``ours``: its zygote a fork of this process, as ``minify()``
  starts one where that is safe; ``started`` says whether it was), the same with the zygote
  spawned afresh (``ours spawned``, ``MINIFIER_FORK_CALLER=0``: it imports torch and Inductor
  first) and with a worker already warm (``ours warm``), against PyTorch's
  ``minify --no-isolate`` run in this process.

``--repeats N`` times the in-process start N times, ours (started by the call) and PyTorch's
alternating, and reports the medians, their ratio and the range of the N pairs' ratios: one pair
of a one-second search moves by a quarter from run to run on these machines.

``--workers 1 2`` also times ours in-process (warm workers) with one and with two workers judging
candidates side by side, on the cases named by ``--scaling-cases``.

    python benchmarks/minifier_vs_pytorch.py --workers 1 2       # every case, both starting points
    python benchmarks/minifier_vs_pytorch.py --cases tutorial block stack
    python benchmarks/minifier_vs_pytorch.py --cases tutorial block --starts in-process --repeats 5
    python benchmarks/minifier_vs_pytorch.py --cases stack_compile --workers 1 2 --starts  # scaling only
    python benchmarks/minifier_vs_pytorch.py --smoke             # ours only, tutorial case: CI's smoke run
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

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


def _block(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, *, buried: str = "") -> torch.Tensor:
    h = torch.mm(x, w) + bias
    h = torch.relu(h) * 0.5 + torch.sigmoid(h)
    mean = h.mean(dim=-1, keepdim=True)
    var = ((h - mean) ** 2).mean(dim=-1, keepdim=True)
    h = (h - mean) / torch.sqrt(var + 1e-5)
    h = torch.tanh(h) + torch.exp(-torch.abs(h))
    if buried == "float":
        h = torch.maximum(h, torch.neg(h) * 0.25)
    elif buried == "uint8":  # the tutorial's uint8 neg and maximum, inside a float block
        q = (torch.abs(h) * 10).to(torch.uint8)
        h = h + torch.maximum(q, torch.neg(q)).to(h.dtype) * 0.01
    g = torch.softmax(h, dim=-1)
    h = h * g + torch.clamp(h, -1, 1)
    h = torch.log1p(torch.abs(h)) - torch.rsqrt(h * h + 1.0)
    m = h.amax(dim=-1, keepdim=True)
    h = torch.where(h > 0, h - m, h + m) * torch.cos(h) + torch.sin(h)
    h = torch.nn.functional.gelu(h) + torch.erf(h) * 0.1 - h.pow(3) * 0.01
    h = torch.nn.functional.silu(h) * torch.reciprocal(torch.abs(h) + 2.0)
    return h + x


def block(x, w, bias):
    return (_block(x, w, bias, buried="float"),)


def stack(x, w, bias):
    for i in range(5):
        x = _block(x, w, bias, buried="float" if i == 3 else "")
    return (x,)


def stack_compile(x, w, bias):
    for i in range(5):
        x = _block(x, w, bias, buried="uint8" if i == 3 else "")
    return (x,)


CASES = ("tutorial", "block", "stack", "compile", "stack_compile")
COMPILE_CASES = ("compile", "stack_compile")
TARGETS = {"tutorial": 3.0, "block": 5.0, "stack": 5.0}  # ours must be this many times faster


def fault_of(name: str) -> str:
    """The ``ib.faults`` preset whose bug case ``name`` holds."""
    return "cast_dropping_neg" if name in COMPILE_CASES else "doubling_neg"


def make_case(name: str) -> tuple[torch.fx.GraphModule, list[Any], str]:
    """(ATen graph, inputs, fault preset name) of a benchmark case."""
    torch.manual_seed(0)
    fault = fault_of(name)
    if name == "tutorial":
        fn, inputs = tutorial, [torch.randn(1, 8), torch.randn(8390, 8)]
    elif name == "compile":
        fn = tutorial
        inputs = [torch.randint(256, (1, 8), dtype=torch.uint8), torch.randint(256, (8390, 8), dtype=torch.uint8)]
    else:
        fn = {"block": block, "stack": stack, "stack_compile": stack_compile}[name]
        inputs = [torch.randn(64, 32), torch.randn(32, 32) / 6, torch.randn(32)]
    from torch._inductor.decomposition import select_decomp_table

    with torch.no_grad():  # decomposed as AOT autograd decomposes for Inductor: a real post-AOT graph
        gm = make_fx(fn, decomposition_table=select_decomp_table())(*inputs)
    return gm, inputs, fault


def see_failure(name: str) -> None:
    """Compile case ``name`` with Inductor and its bug once in this process and run it, as the
    user who goes on to minify it did (its own fresh cache: nothing it builds is reused later)."""
    import copy

    from torch._inductor.compile_fx import compile_fx_inner

    import instrumented_backend as ib

    gm, inputs, fault = make_case(name)
    with getattr(ib.faults, fault)(), fresh_cache():
        try:
            compile_fx_inner(copy.deepcopy(gm), inputs)(list(inputs))
        except Exception:  # noqa: BLE001 - a compile-error case fails here: that is the failure seen
            pass


def compute_nodes(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op not in ("placeholder", "output"))


def _check(name: str) -> Any:
    from minifier import AccuracyFailure, CompileFailure

    return CompileFailure() if name in COMPILE_CASES else AccuracyFailure()


_TEMPLATE: list[str] = []
_SMOKE_SEED: list[str] = []  # --smoke: the caller's Inductor cache (a test run's: its probe usually done)


def _link_or_copy(source: str, destination: str) -> None:
    """A hard link where the file system allows one (cache files are written once, never edited)."""
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)


def _seeded_template() -> str:
    """A cache directory holding only what any earlier use of Inductor on this machine leaves:
    the CPU's vector-ISA probe (four small C++ builds, about 4 s). Made once per benchmark run."""
    if not _TEMPLATE:
        import atexit

        directory = tempfile.mkdtemp(prefix="bench-inductor-template-")
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
        if _SMOKE_SEED:  # the smoke's figures mean nothing: its probe starts from the caller's libraries
            shutil.copytree(_SMOKE_SEED[0], directory, copy_function=_link_or_copy, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("fxgraph", "aotautograd", "locks"))
        # Inductor's own detection, as a worker runs it: a worker started later on this machine
        # then reads which of these test libraries load (see the module docstring).
        probe = "from minifier._seams import start_cpu_isa_probe; start_cpu_isa_probe(remember=True).join()"
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": directory,
               "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
        subprocess.run([sys.executable, "-c", probe], check=True, env=env)
        _TEMPLATE.append(directory)
    return _TEMPLATE[0]


@contextlib.contextmanager
def fresh_cache(in_process: bool = True) -> Iterator[str]:
    """A fresh Inductor cache directory holding no kernel either minifier built before (only the
    vector-ISA probe's builds, as on any machine that used Inductor; under ``--smoke`` the caller's
    kernels too). ``in_process``: this process (and any worker started inside the block) uses it;
    else only its path is given."""
    from torch._inductor.runtime.cache_dir_utils import temporary_cache_dir

    with tempfile.TemporaryDirectory(prefix="bench-inductor-cache-") as parent:
        directory = os.path.join(parent, "cache")
        shutil.copytree(_seeded_template(), directory, copy_function=_link_or_copy)
        if in_process:
            with temporary_cache_dir(directory):
                yield directory
        else:
            yield directory


def timed_cold_run(command: list[str], *, cwd: Path, env: dict[str, str] | None = None,
                   timeout: float | None = None) -> tuple[subprocess.CompletedProcess, float]:
    """Run ``command`` in a fresh process with a fresh Inductor cache (:func:`fresh_cache`) and
    ``env`` (default: this process's); return it and its wall seconds."""
    with fresh_cache(in_process=False) as cache:
        env = {**(os.environ if env is None else env), "TORCHINDUCTOR_CACHE_DIR": cache}
        start = time.perf_counter()
        proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        return proc, time.perf_counter() - start


# ----------------------------------------------------------------------------- ours

def run_ours(name: str, *, warm: bool, workers: int | None = None, spawn: bool = False) -> dict[str, Any]:
    """Minify one case in this process, from the call to the written repro. ``warm``: a worker
    pool already started (and its first compile paid) before the clock starts; else none exists,
    and ``minify()`` forks this process as its zygote, or spawns one with ``spawn``."""
    import instrumented_backend as ib
    from minifier import current_context, minify, prewarm
    from minifier.workers import WorkerSetup, pool

    gm, inputs, fault = make_case(name)
    pool.shutdown()  # every worker inherits this run's fresh cache directory
    pool.caller_fork_refusal = None
    before = os.environ.get("MINIFIER_FORK_CALLER")
    os.environ["MINIFIER_FORK_CALLER"] = "0" if spawn else "1"
    try:
        with getattr(ib.faults, fault)(), fresh_cache(), tempfile.TemporaryDirectory() as out:
            if warm:
                prewarm(WorkerSetup.for_context(current_context())).wait_ready()
            start = time.perf_counter()
            result = minify(gm, inputs, check=_check(name), repro_dir=out, echo=lambda line: None, workers=workers)
            seconds = time.perf_counter() - start
    finally:
        os.environ.pop("MINIFIER_FORK_CALLER")
        if before is not None:
            os.environ["MINIFIER_FORK_CALLER"] = before
    started = "warm" if warm else ("fork" if pool.caller_fork_refusal is None else "spawn")
    pool.shutdown()
    return {
        "seconds": seconds,
        "started": started,
        "refusal": pool.caller_fork_refusal,
        "candidates": result.compiles,
        "start": compute_nodes(gm),
        "final": result.final_nodes,
        "ops": sorted(
            {str(n.target).split(".")[1] for n in result.graph_module.graph.nodes if n.op == "call_function"}
        ),
        "reproduced": result.reproduced,
    }


def run_ours_cold(name: str, workdir: Path) -> dict[str, Any]:
    """``python -m minifier repro.py`` in a fresh process, on our repro of the unminified graph."""
    import instrumented_backend as ib
    from minifier import minify

    gm, inputs, fault = make_case(name)
    case_dir = workdir / f"{name}-ours"
    with getattr(ib.faults, fault)():  # no strategies: the repro holds the whole failing graph
        whole = minify(gm, inputs, check=_check(name), strategies=[], repro_dir=case_dir, echo=lambda line: None)
    command = [sys.executable, "-m", "minifier", str(whole.repro_path), "--out", str(case_dir / "minified")]
    proc, seconds = timed_cold_run(command, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"cold run of {name} failed:\n{proc.stderr[-3000:]}")
    summary = re.search(r"(\d+) -> (\d+) nodes in [\d.]+ s, (\d+) compiles", proc.stdout)
    if summary is None:
        raise RuntimeError(f"cold run of {name} printed no summary:\n{proc.stdout[-3000:]}")
    return {"seconds": seconds, "start": int(summary[1]), "final": int(summary[2]), "candidates": int(summary[3]),
            "one check": one_check_cold(whole.repro_path)}


def one_check_cold(repro: Path) -> float:
    """Seconds a fresh process takes to import torch and judge the whole graph once (``python
    repro.py``: one compile, the eager run, the comparison, one after the other), with a fresh
    Inductor cache: what seeing the failure once costs from a cold start."""
    proc, seconds = timed_cold_run([sys.executable, str(repro)], cwd=ROOT)
    if "REPRODUCES" not in proc.stdout:
        raise RuntimeError(f"the unminified repro {repro} did not reproduce:\n"
                           f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return seconds


# ----------------------------------------------------------------------------- PyTorch's

# Put beside PyTorch's repro so that its process and every child it spawns has the case's fault.
# The fault is applied once the process imports torch, not at start-up: Inductor probes the CPU's
# vector ISAs by loading a test library in a bare ``python -c`` child (one per ISA, not importing
# torch on Linux), and importing this package there (torch with it, about 3 s each) made PyTorch's
# cold runs pay seconds no user pays (until session 35: 35 s instead of about 6 s for the tutorial on
# an AVX-512 machine, whose probe starts about ten such children).
_SITECUSTOMIZE = """\
import os
import sys

if os.environ.get("INSTRUMENTED_BACKEND_FAULTS"):

    class _FaultsAfterTorch:
        def find_spec(self, name, path=None, target=None):
            if name != "torch":
                return None
            sys.meta_path.remove(self)
            import importlib.util

            spec = importlib.util.find_spec(name)
            execute = spec.loader.exec_module

            def exec_module(module):
                execute(module)
                import instrumented_backend  # noqa: F401  (activates the faults the variable lists)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _FaultsAfterTorch())
"""


def _pytorch_repro(name: str, case_dir: Path) -> Path:
    """The repro PyTorch's after-AOT tooling writes for the unminified graph of ``name``."""
    from torch._dynamo.repro.after_aot import save_graph_repro

    gm, inputs, _ = make_case(name)
    case_dir.mkdir(parents=True, exist_ok=True)
    compiler = "inductor" if name in COMPILE_CASES else "inductor_accuracy"
    with open(case_dir / "repro.py", "w") as fd:
        save_graph_repro(fd, gm, inputs, compiler, save_dir=str(case_dir / "checkpoints"))
    return case_dir / "repro.py"


def _pytorch_result(name: str, case_dir: Path, seconds: float, log: str, ok: bool) -> dict[str, Any]:
    queries = re.findall(r"Made (\d+) queries", log)
    final = None
    minimal = case_dir / "repro.py"
    text = minimal.read_text() if minimal.exists() else ""
    if "Wrote minimal repro" in log and "def forward" in text:
        body = text.split("def forward", 1)[1].split("return", 1)[0]
        final = len(re.findall(r"=\s*torch\.ops\.", body))
    return {"seconds": seconds, "candidates": int(queries[-1]) if queries else None, "final": final,
            "ok": ok and final is not None, "tail": log[-1500:]}


def pytorch_environment(name: str, case_dir: Path) -> dict[str, str]:
    """The environment PyTorch's cold run of ``name`` gets in ``case_dir``: the case's fault (through
    the ``sitecustomize`` written there, so it reaches every child the run spawns), caches off."""
    import instrumented_backend as ib

    case_dir.mkdir(parents=True, exist_ok=True)
    (case_dir / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    with getattr(ib.faults, fault_of(name))():
        env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(case_dir), str(ROOT), env.get("PYTHONPATH", "")])
    env["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
    env["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"
    return env


def run_pytorch(name: str, isolate: bool, workdir: Path) -> dict[str, Any]:
    """``python repro.py minify [--no-isolate]`` on the repro PyTorch's after-AOT tooling writes."""
    case_dir = workdir / f"{name}-{'isolate' if isolate else 'no-isolate'}"
    _pytorch_repro(name, case_dir)
    env = pytorch_environment(name, case_dir)
    command = [sys.executable, "repro.py", "minify"] + ([] if isolate else ["--no-isolate"])
    proc, seconds = timed_cold_run(command, cwd=case_dir, env=env, timeout=3600)
    return _pytorch_result(name, case_dir, seconds, proc.stderr, proc.returncode == 0)


def run_pytorch_in_process(name: str, workdir: Path) -> dict[str, Any]:
    """PyTorch's ``minify --no-isolate`` in this process (torch imported), on its own repro."""
    import importlib.util
    import io

    from torch._dynamo.repro.after_aot import run_repro

    import instrumented_backend as ib

    case_dir = workdir / f"{name}-in-process"
    path = _pytorch_repro(name, case_dir)
    spec = importlib.util.spec_from_file_location(f"pytorch_repro_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    log, ok = io.StringIO(), True
    argv, cwd = sys.argv, os.getcwd()
    sys.argv = [str(path), "minify", "--no-isolate"]
    os.chdir(case_dir)  # PyTorch's minifier writes its minimal repro.py here
    try:
        with getattr(ib.faults, fault_of(name))(), fresh_cache(), contextlib.redirect_stderr(log):
            start = time.perf_counter()
            try:
                with torch.no_grad():
                    run_repro(module.mod, module.load_args, accuracy=name not in COMPILE_CASES, command="minify",
                              save_dir=str(case_dir / "checkpoints"), tracing_mode="real", check_str=None)
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - reported as a failed run
                ok = False
                log.write(f"\n{exc!r}")
            seconds = time.perf_counter() - start
    finally:
        sys.argv = argv
        os.chdir(cwd)
    return _pytorch_result(name, case_dir, seconds, log.getvalue(), ok)


# ----------------------------------------------------------------------------- report

def _ratio(theirs: dict[str, Any], ours: dict[str, Any]) -> float | None:
    return theirs["seconds"] / ours["seconds"] if theirs.get("ok") else None


def paired_medians(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    """Alternating runs ``(ours, theirs)``: each side's median seconds (``ours``, ``theirs``: theirs
    ``ok`` only if every one of its runs finished), the ratio of the medians (None if not ok) and
    the lowest and highest ratio of one pair."""
    ours = {"seconds": statistics.median(o["seconds"] for o, _ in pairs)}
    theirs = {"ok": all(t.get("ok") for _, t in pairs), "seconds": statistics.median(t["seconds"] for _, t in pairs)}
    ratio = _ratio(theirs, ours)
    ratios = [t["seconds"] / o["seconds"] for o, t in pairs]
    return {"ours": ours, "theirs": theirs, "ratio": ratio,
            "pair range": (min(ratios), max(ratios)) if ratio is not None else None}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=CASES)
    parser.add_argument("--starts", nargs="*", choices=["cold", "in-process"], default=["cold", "in-process"],
                        help="starting points to time (default: both)")
    parser.add_argument("--pytorch-modes", nargs="*", choices=["no-isolate", "default"], default=["no-isolate"],
                        help="PyTorch's modes for the cold start (default: its fastest, no-isolate)")
    parser.add_argument("--skip-pytorch", action="store_true")
    parser.add_argument("--repeats", type=int, default=1,
                        help="in-process: time ours (started by the call) and PyTorch's this many times, "
                             "alternating; report medians and the range of the pairs' ratios (default 1)")
    parser.add_argument("--workers", nargs="*", type=int, default=[],
                        help="also time ours in-process (warm) with each of these worker counts")
    parser.add_argument("--scaling-cases", nargs="*", choices=CASES, default=["stack_compile"],
                        help="the cases --workers times (default: stack_compile, the longest search)")
    parser.add_argument("--smoke", action="store_true", help="ours only, tutorial case, both starts, 1 and 2 workers")
    args = parser.parse_args(argv)
    if args.smoke:
        args.cases, args.skip_pytorch, args.workers, args.scaling_cases = ["tutorial"], True, [1, 2], ["tutorial"]
        if os.environ.get("TORCHINDUCTOR_CACHE_DIR"):  # a test run's own cache
            _SMOKE_SEED.append(os.environ["TORCHINDUCTOR_CACHE_DIR"])

    rows, scaling, failures = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        # PyTorch's minifier writes its checkpoints under the debug directory (default: the cwd).
        os.environ["TORCH_COMPILE_DEBUG_DIR"] = tmp  # its subprocesses
        torch._dynamo.config.debug_dir_root = os.path.join(tmp, "torch_compile_debug")  # this process
        for name in args.cases:
            row: dict[str, Any] = {"case": name, "nodes": compute_nodes(make_case(name)[0])}
            if "cold" in args.starts:
                cold = run_ours_cold(name, Path(tmp))
                row.update({"ours cold s": cold["seconds"], "ours compiles": cold["candidates"],
                            "ours final": cold["final"], "1 check cold s": cold["one check"]})
                for mode in ([] if args.skip_pytorch else args.pytorch_modes):
                    theirs = run_pytorch(name, mode == "default", Path(tmp))
                    if not theirs["ok"]:
                        failures.append(f"{name}: PyTorch's cold {mode} run did not finish:\n{theirs['tail']}")
                    row.update({f"pt cold {mode} s": theirs["seconds"], f"pt {mode} checks": theirs["candidates"],
                                f"pt {mode} final": theirs["final"], f"x cold {mode}": _ratio(theirs, cold),
                                f"x cold {mode} if 1 check": _ratio(theirs, {"seconds": cold["one check"]})})
            if "in-process" in args.starts:
                see_failure(name)
                runs, pairs = [], []
                for _ in range(max(1, args.repeats)):  # ours started by the call and PyTorch's, alternating
                    runs.append(run_ours(name, warm=False))
                    if not args.skip_pytorch:
                        pairs.append((runs[-1], run_pytorch_in_process(name, Path(tmp))))
                ours = {**runs[0], "seconds": statistics.median(r["seconds"] for r in runs)}
                spawned = run_ours(name, warm=False, spawn=True)
                warm = run_ours(name, warm=True)
                row.update({"ours in-proc s": ours["seconds"], "started": ours["started"],
                            "ours spawned s": spawned["seconds"], "ours warm s": warm["seconds"],
                            "ours final ops": ",".join(warm["ops"])})
                if ours["refusal"]:
                    print(f"{name}: this process was not forked: {ours['refusal']}", file=sys.stderr)
                for result in (*runs, spawned, warm):
                    if not result["reproduced"]:
                        failures.append(f"{name}: our final graph did not re-check")
                if pairs:
                    for _, theirs in pairs:
                        if not theirs["ok"]:
                            failures.append(f"{name}: PyTorch's in-process run did not finish:\n{theirs['tail']}")
                    summary = paired_medians(pairs)
                    theirs = summary["theirs"]
                    row.update({"pt in-proc s": theirs["seconds"], "x in-proc": summary["ratio"],
                                "x in-proc (spawned)": _ratio(theirs, spawned),
                                "x in-proc (warm)": _ratio(theirs, warm)})
                    if len(pairs) > 1 and summary["ratio"] is not None:
                        row["x in-proc pairs"] = "{:.1f}-{:.1f}".format(*summary["pair range"])
            if name in TARGETS and not args.skip_pytorch:
                row["target"] = f">= {TARGETS[name]:.0f}x"
            rows.append(row)
            for workers in (args.workers if name in args.scaling_cases else []):
                result = run_ours(name, warm=True, workers=workers)
                scaling.append({"case": name, "workers": workers, "seconds": result["seconds"],
                                "compiles": result["candidates"], "final nodes": result["final"]})
            print(f"done: {name}", file=sys.stderr, flush=True)
    print(tabulate(rows, headers="keys", floatfmt=".1f"))
    if scaling:
        base = {s["case"]: s["seconds"] for s in scaling if s["workers"] == min(args.workers)}
        for s in scaling:
            s[f"speed-up vs {min(args.workers)} worker(s)"] = base[s["case"]] / s["seconds"]
        print()
        print(tabulate(scaling, headers="keys", floatfmt=".2f"))
    for failure in failures:
        print("FAILED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
