"""Compile-time overhead of backend="instrumented" relative to backend="inductor".

Compiles each workload with both backends, interleaved pairs in each of several fresh processes
(each pair from its own phase of CPython's frame stack, the phases of a process spread evenly over
one 16 KiB stack chunk: see ``measure``), with the FX-graph and
AOTAutograd caches off for both, and prints each process's median, the pooled median ratio
instrumented/inductor and its 95% bootstrap interval beside the target (median <= 1.03x, upper end
of the interval <= 1.05x).
Workloads: ``block``, a stack of transformer-style blocks (2 blocks: about 150 post-grad nodes),
and the corpus models ``gpt2`` (transformers' GPT2LMHeadModel, small config, random weights) and
``resnet`` (ResNet-18's shape at toy width), inference.

Each compile is timed in process CPU time (the machines are 2-core and shared, so wall time
also counts whatever else ran) and in wall time; both medians are printed. Before each compile
the garbage left by the previous one is collected, so a collection that one backend's garbage
made due is not charged to the other. The captures the instrumented compiles record are kept,
as in a user's process.

``--chunk-cache`` runs the measuring processes with CPython's fix for the frame-stack chunk thrash
(gh-142183, see CHUNK_SLOTS and ``measure``) emulated: ``stack_chunk_cache.c``, built here with
the system's C compiler (``CC``, else ``cc``) and preloaded, keeps one freed 16 KiB chunk mapped for the next call,
as CPython 3.13 and later do. Both backends run under it; it takes the chunk mapping, faulting and
unmapping out of both compiles (the block's faults per compile: 8.3k at every stack position,
against 8.3k to 54k) and changes nothing else.

``--instructions`` counts instead the instructions each compile executes, under valgrind's
callgrind (counting only while a compile runs, switched by ``callgrind_control``), with string
hashing fixed so that every counting process takes the same set and dict orders: a count does
not move with the machine's load, so one pair per workload pins, to about 0.2%, the ratio that
CPU time measures only to within a few percent (identical code measured 1.024x
and 1.047x on one VM in one day). It excludes what the C++ compiler's own processes execute, as
CPU time does; it weighs a cache miss like any instruction, which CPU time does not. Kernels are
built for AVX2 at most (``-march=x86-64-v3``, 256-bit vectors), for both backends: valgrind cannot
run AVX-512 code, which Inductor otherwise builds on a machine that has it. Slow (about 20x): a
few minutes per workload.

    python benchmarks/overhead.py [--processes N] [--repeats N] [--models block gpt2 resnet] [--smoke]
    python benchmarks/overhead.py --chunk-cache [--processes N] [--repeats N] [--models ...]
    python benchmarks/overhead.py --instructions [--repeats N] [--models ...]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

import torch
from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MEDIAN_TARGET, INTERVAL_TARGET = 1.03, 1.05
# CPython since 3.11 keeps frames in 16 KiB chunks, each mmapped when a call does not fit in the
# current one and unmapped as soon as that call returns (gh-142183; 3.13 and later cache one since
# a fix in March 2026): a hot call at a chunk boundary maps, faults in and unmaps a chunk each
# time. Where the boundaries fall depends on how deep the stack stood when a compile started, in
# 8-byte slots: a stack padded by 0 .. CHUNK_SLOTS - 1 slots takes every position once.
CHUNK_SLOTS = 16 * 1024 // 8


class Block(torch.nn.Module):
    def __init__(self, width: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.proj = torch.nn.Linear(width, width)
        self.norm2 = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, 4 * width)
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = torch.softmax((q @ k.transpose(-1, -2)) / (c // self.heads) ** 0.5, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, c))
        h = self.up(self.norm2(x))
        h = torch.nn.functional.gelu(h) * torch.sigmoid(h)
        x = x + self.down(torch.nn.functional.dropout(h, 0.0))
        return torch.tanh(x).clamp(-0.9, 0.9) * 2 - x.mean(-1, keepdim=True)


def _block_workload(blocks: int) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    torch.manual_seed(0)
    return torch.nn.Sequential(*[Block() for _ in range(blocks)]).eval(), (torch.randn(2, 16, 64),)


def _corpus_workload(name: str) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    from tests.corpus.cases import build

    workload = build(name)
    return workload.model, workload.calls[0]


def workload_maker(name: str, blocks: int) -> Callable[[], tuple[torch.nn.Module, tuple[Any, ...]]]:
    """A function building a fresh (model, inputs) of workload ``name`` on each call."""
    if name == "block":
        return lambda: _block_workload(blocks)
    return lambda: _corpus_workload(name)


def compile_seconds(backend: str, make: Callable[[], tuple[torch.nn.Module, tuple[Any, ...]]]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) to compile and first-run a fresh workload with ``backend``."""
    torch.compiler.reset()
    model, inputs = make()
    gc.collect()
    with torch._functorch.config.patch(enable_autograd_cache=False), torch.no_grad():
        wall, cpu = time.perf_counter(), time.process_time()
        torch.compile(model, backend=backend, options={"fx_graph_cache": False})(*inputs)
        return time.process_time() - cpu, time.perf_counter() - wall


def post_grad_nodes(make: Callable[[], tuple[torch.nn.Module, tuple[Any, ...]]]) -> int:
    import instrumented_backend as ib

    with ib.capture() as session:  # captures() keeps only the newest 100
        compile_seconds("instrumented", make)
    return sum(c.node_counts["post_grad"] for c in session.graphs)


def stack_padded(slots: int) -> Callable[[Callable[[], Any]], Any]:
    """A function ``pad(fn)`` that calls ``fn()`` from a frame ``slots`` 8-byte slots larger than an
    empty one (``slots`` local variables), moving every frame ``fn`` pushes that far up the stack."""
    source = "def pad(fn):\n" + "".join(f"    v{i} = None\n" for i in range(slots)) + "    return fn()\n"
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<stack padded by {slots} slots>", "exec"), namespace)
    return namespace["pad"]


def stack_phases(pairs: int, seed: int) -> list[int]:
    """``pairs`` paddings spread evenly over one stack chunk from a random offset, in random order."""
    import random

    rng = random.Random(seed)
    offset = rng.random()
    phases = [int((offset + i) * CHUNK_SLOTS / pairs) % CHUNK_SLOTS for i in range(pairs)]
    rng.shuffle(phases)
    return phases


def _minor_faults() -> int:
    try:
        import resource
    except ImportError:  # not on Windows
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def pairs_in_this_process(make: Callable[[], tuple[torch.nn.Module, tuple[Any, ...]]], pairs: int,
                          seed: int) -> tuple[int, list[tuple[float, float, float, float, int, int, int]]]:
    """(post-grad nodes, interleaved (inductor cpu, instrumented cpu, inductor wall, instrumented
    wall, stack padding, inductor minor page faults, instrumented minor page faults) pairs); each
    pair compiled from its own stack phase (see :func:`measure`)."""
    nodes = post_grad_nodes(make)  # also warms up both paths (header compile, imports)
    compile_seconds("inductor", make)
    rows = []
    for i, slots in enumerate(stack_phases(pairs, seed)):
        order = ("inductor", "instrumented") if i % 2 == 0 else ("instrumented", "inductor")
        pad, times, faults = stack_padded(slots), {}, {}
        for backend in order:
            before = _minor_faults()
            times[backend] = pad(lambda: compile_seconds(backend, make))  # noqa: B023 - called at once
            faults[backend] = _minor_faults() - before
        rows.append((times["inductor"][0], times["instrumented"][0], times["inductor"][1], times["instrumented"][1],
                     slots, faults["inductor"], faults["instrumented"]))
    return nodes, rows


def _child(name: str, blocks: int, pairs: int, seed: int) -> int:
    make = workload_maker(name, blocks)
    nodes, rows = pairs_in_this_process(make, pairs, seed)
    print("RESULT " + json.dumps({"rows": rows, "nodes": nodes, "chunk cache": chunk_cache_loaded()}), flush=True)
    return 0


CHUNK_CACHE_SOURCE = Path(__file__).resolve().parent / "stack_chunk_cache.c"


def build_chunk_cache(directory: Path) -> Path:
    """``stack_chunk_cache.c`` built into ``directory`` with the system's C compiler (``CC``, else
    ``cc``); a clear SystemExit where it cannot be (not Linux, no compiler, a failed build)."""
    import os
    import platform
    import shutil

    if platform.system() != "Linux":
        raise SystemExit(f"--chunk-cache preloads a library with LD_PRELOAD: Linux only, not {platform.system()}")
    compiler = os.environ.get("CC") or "cc"
    if shutil.which(compiler) is None:
        raise SystemExit(f"--chunk-cache needs a C compiler: {compiler!r} (CC, else cc) is not on PATH")
    library = directory / "stack_chunk_cache.so"
    proc = subprocess.run([compiler, "-x", "c", "-O2", "-shared", "-fPIC", "-o", str(library),
                           str(CHUNK_CACHE_SOURCE), "-lpthread"], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 or not library.exists():
        raise SystemExit(f"--chunk-cache: building {CHUNK_CACHE_SOURCE.name} with {compiler} failed:\n{proc.stderr}")
    return library


def chunk_cache_loaded() -> bool:
    """Whether this process runs with ``stack_chunk_cache`` preloaded."""
    try:
        return "stack_chunk_cache" in Path("/proc/self/maps").read_text()
    except OSError:
        return False


def _child_result(proc: "subprocess.CompletedProcess[str]") -> Optional[dict[str, Any]]:
    """What a measuring child printed on its ``RESULT`` line, or None if it printed none."""
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    return json.loads(line[len("RESULT "):]) if line is not None else None


def kernels_valgrind_can_run() -> Any:
    """Inductor's config patched to build x86 kernels for AVX2 at most (valgrind cannot run AVX-512
    code, which Inductor builds with ``-march=native`` on a machine that has it); elsewhere a no-op."""
    import contextlib
    import platform

    if platform.machine() not in ("x86_64", "AMD64"):
        return contextlib.nullcontext()
    import torch._inductor.config as inductor_config

    return inductor_config.patch({"cpp.simdlen": 256, "cpp.march": "x86-64-v3"})


def counting_environment() -> dict[str, str]:
    """The environment of a counting process: this one's, with string hashing fixed (unless set).

    With random hashing, set and dict orders, and the code paths they pick, differ from process to
    process: plain Inductor's ResNet compile counted 3,770.0M and 3,796.3M instructions in two
    processes (0.7% apart), against 3,773.6M and 3,779.6M (0.16%) with ``PYTHONHASHSEED=0``.
    """
    import os

    return {**os.environ, "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")}


def _instructions_child(name: str, blocks: int, pairs: int) -> int:
    """Runs under callgrind with counting off: warms both backends, then counts each compile of
    ``pairs`` pairs alone, one dump per compile named after its backend."""
    import os

    def control(*arguments: str) -> None:
        subprocess.run(["callgrind_control", *arguments, str(os.getpid())], check=True, capture_output=True,
                       timeout=120)

    with kernels_valgrind_can_run():
        make = workload_maker(name, blocks)
        nodes = post_grad_nodes(make)
        compile_seconds("inductor", make)
        for i in range(pairs):
            for backend in ("inductor", "instrumented") if i % 2 == 0 else ("instrumented", "inductor"):
                control("--zero")
                control("--instr=on")
                compile_seconds(backend, make)
                control("--instr=off")
                control(f"--dump={backend}")
    print("RESULT " + json.dumps({"nodes": nodes}), flush=True)
    return 0


def dumped_instructions(out_dir: Path) -> dict[str, list[int]]:
    """``{backend: [instructions of each compile, in order]}`` from a child's callgrind dumps, named
    ``callgrind.out.<pid>.<n>``: each one's ``desc: Trigger: dump <backend>`` line names the compile
    it counted, its ``totals:`` line the instructions."""
    counts: dict[str, list[tuple[int, int]]] = {}
    for path in out_dir.glob("callgrind.out.*.*"):
        backend, total = None, None
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("desc: Trigger:"):
                backend = line.rsplit(" ", 1)[-1]
            elif line.startswith("totals:"):  # the dump's last line; its "summary:" header says 0 here
                total = int(line.split()[1])
        if backend in ("inductor", "instrumented") and total is not None:
            counts.setdefault(backend, []).append((int(path.name.rsplit(".", 1)[1]), total))
    return {backend: [total for _, total in sorted(found)] for backend, found in counts.items()}


def measure_instructions(name: str, blocks: int, pairs: int) -> dict[str, Any]:
    """Instruction counts of ``pairs`` pairs of compiles in one process under callgrind."""
    import shutil

    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("--instructions needs valgrind and callgrind_control on PATH (Debian: apt install valgrind)")
    with tempfile.TemporaryDirectory(prefix="overhead-callgrind-") as out_dir:
        command = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                   f"--callgrind-out-file={out_dir}/callgrind.out.%p", sys.executable, __file__,
                   "--instructions-child", name, "--blocks", str(blocks), "--repeats", str(pairs)]
        proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=7200,
                              env=counting_environment())
        counts = dumped_instructions(Path(out_dir))
    result = _child_result(proc)
    if proc.returncode != 0 or result is None or len(counts.get("inductor", [])) != pairs \
            or len(counts.get("instrumented", [])) != pairs:
        raise RuntimeError(f"{name}: the callgrind process failed:\n{proc.stderr[-3000:]}")
    ratios = [ours / theirs for ours, theirs in zip(counts["instrumented"], counts["inductor"])]
    print(f"{name}: instructions per compile, inductor {' '.join(f'{c / 1e6:.1f}M' for c in counts['inductor'])}, "
          f"instrumented {' '.join(f'{c / 1e6:.1f}M' for c in counts['instrumented'])}: "
          f"ratio {statistics.median(ratios):.4f}x (pairs: {' '.join(f'{r:.4f}' for r in ratios)}; "
          f"target <= {MEDIAN_TARGET}x)", flush=True)
    return {"workload": name, "post-grad nodes": result["nodes"], "pairs": pairs,
            "instruction ratio": statistics.median(ratios),
            "extra instructions": statistics.median(counts["instrumented"]) - statistics.median(counts["inductor"])}


def measure(name: str, blocks: int, processes: int, pairs: int, chunk_cache: Optional[Path] = None) -> dict[str, Any]:
    """``pairs`` interleaved pairs in each of ``processes`` fresh processes, pooled.

    Where the Python stack stands when a compile starts moves its CPU time by far more than the
    instrumentation does: the 150-node block compiled in 0.72 s to 1.02 s with plain Inductor,
    depending only on how many slots deep the stack was padded, the minor page faults per compile
    going from 8.5k to 62k with it. CPython (3.11 on; see CHUNK_SLOTS) maps a fresh 16 KiB chunk of
    frame stack for a call that does not fit in the current one and unmaps it when that call
    returns (gh-142183), so a hot call that lands on a chunk boundary pays a map, a page fault and an
    unmap each time. Our hooks add frames, which moves the boundaries within the compile, so at
    one stack position either backend can be the lucky one (single pairs 0.88x-1.16x). Averaged
    over every position, the faults are the same (23.4k against 23.1k per compile for the block).
    So each process pads the stack for its pairs evenly over one chunk, from a random offset
    (both backends of a pair from the same padding), the ratio reported is the median over
    positions, pooled, and the interval resamples processes, then pairs within them. (Until
    2026-11-27 each pair started from a random call depth of 0 to 47 frames: about a third of a
    chunk, so a process saw only some positions.)

    With ``chunk_cache`` (the library :func:`build_chunk_cache` built), every measuring process
    preloads it: a freed chunk is kept for the next call, as CPython 3.13 and later do, and the
    positions no longer matter (the block's faults per compile: 8.3k, from 8.3k to 54k without).
    What is left of the noise is the machine's (single pairs 0.85x-1.27x, 384 pairs of three workloads).
    """
    import os

    env = dict(os.environ)
    if chunk_cache is not None:
        env["LD_PRELOAD"] = " ".join(filter(None, (str(chunk_cache), env.get("LD_PRELOAD"))))
    per_process, rows, nodes = [], [], 0
    for index in range(processes):
        command = [sys.executable, __file__, "--child", name, "--blocks", str(blocks), "--repeats", str(pairs),
                   "--seed", str(index)]
        proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=1800, env=env)
        result = _child_result(proc)
        if proc.returncode != 0 or result is None:
            raise RuntimeError(f"{name}: measuring process {index} failed:\n{proc.stderr[-3000:]}")
        if result["chunk cache"] != (chunk_cache is not None):
            raise RuntimeError(f"{name}: measuring process {index} ran with the chunk cache "
                               f"{'loaded' if result['chunk cache'] else 'not loaded'}, asked the opposite")
        nodes = result["nodes"]
        per_process.append([r[1] / r[0] for r in result["rows"]])
        rows.extend(result["rows"])
        walls = [r[3] / r[2] for r in result["rows"]]
        print(f"{name}: process {index}: median CPU ratio "
              f"{statistics.median(per_process[-1]):.3f}x over {len(per_process[-1])} pairs "
              f"(min {min(per_process[-1]):.3f}, max {max(per_process[-1]):.3f}; wall {statistics.median(walls):.3f}x)",
              flush=True)
    pooled = [ratio for ratios in per_process for ratio in ratios]
    result = {"workload": name, "post-grad nodes": nodes, "pairs": len(pooled), "processes": processes,
              "chunk cache": chunk_cache is not None,
              "median cpu ratio": statistics.median(pooled),
              "total cpu ratio": sum(r[1] for r in rows) / sum(r[0] for r in rows)}
    if len(pooled) >= 5:
        result["interval low"], result["interval high"] = bootstrap_interval(per_process)
    print(f"{name}: median compile-time ratio instrumented/inductor: {result['median cpu ratio']:.3f}x CPU time "
          f"over {len(pooled)} pairs in {processes} processes (target <= {MEDIAN_TARGET}x)")
    if "interval low" in result:
        print(f"{name}: 95% bootstrap interval of that median: {result['interval low']:.3f}x - "
              f"{result['interval high']:.3f}x (target: upper end <= {INTERVAL_TARGET}x)")
    faults = [statistics.mean(r[column] for r in rows) / 1e3 for column in (5, 6)]
    print(f"{name}: all pairs' CPU time, instrumented over inductor: {result['total cpu ratio']:.3f}x; minor page "
          f"faults per compile (frame-stack chunks mapped afresh, mostly), mean over the stack positions: inductor "
          f"{faults[0]:.1f}k, instrumented {faults[1]:.1f}k")
    print(flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=None,
                        help="interleaved pairs per process (default 8; 2 with --instructions)")
    parser.add_argument("--processes", type=int, default=4, help="fresh processes per workload")
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--models", nargs="*", default=["block", "gpt2", "resnet"],
                        choices=["block", "gpt2", "resnet"])
    parser.add_argument("--smoke", action="store_true", help="one block, one process, one pair: checks it runs")
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions under valgrind's callgrind instead of timing (--repeats pairs, "
                             "default 2, in one process per workload)")
    parser.add_argument("--chunk-cache", action="store_true",
                        help="run the measuring processes with CPython's fix for gh-142183 emulated (one freed "
                             "16 KiB frame-stack chunk kept for reuse, as in CPython 3.13+; Linux, a C compiler)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--instructions-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.child, args.blocks, args.repeats, args.seed)
    if args.instructions_child:
        return _instructions_child(args.instructions_child, args.blocks, args.repeats)
    if args.instructions:
        rows = [measure_instructions(name, args.blocks, args.repeats or 2) for name in args.models]
        print(tabulate([[r["workload"], r["post-grad nodes"], r["pairs"], f"{r['instruction ratio']:.4f}",
                         f"{r['extra instructions'] / 1e6:.1f}M", f"<= {MEDIAN_TARGET}x",
                         "met" if r["instruction ratio"] <= MEDIAN_TARGET else "NOT met"] for r in rows],
                       headers=["workload", "post-grad nodes", "pairs", "instruction ratio", "extra per compile",
                                "target", ""]))
        return 0
    args.repeats = args.repeats or 8
    if args.smoke:
        args.repeats, args.processes, args.blocks, args.models = 1, 1, 1, ["block"]
    with tempfile.TemporaryDirectory(prefix="overhead-chunk-cache-") as build_dir:
        chunk_cache = build_chunk_cache(Path(build_dir)) if args.chunk_cache else None
        if chunk_cache is not None:
            print("every measuring process preloads stack_chunk_cache (CPython's fix for gh-142183, emulated)\n")
        results = [measure(name, args.blocks, args.processes, args.repeats, chunk_cache) for name in args.models]
    summary = []
    for r in results:
        met = "interval high" in r and r["median cpu ratio"] <= MEDIAN_TARGET and r["interval high"] <= INTERVAL_TARGET
        workload = r["workload"] + (" (chunk cache)" if r["chunk cache"] else "")
        summary.append([workload, r["post-grad nodes"], f"{r['pairs']} in {r['processes']}", r["median cpu ratio"],
                        f"{r['interval low']:.3f}-{r['interval high']:.3f}" if "interval low" in r else "-",
                        f"<= {MEDIAN_TARGET}x, interval <= {INTERVAL_TARGET}x", "met" if met else "NOT met"])
    print(tabulate(summary, headers=["workload", "post-grad nodes", "pairs in processes", "median cpu ratio",
                                     "95% interval", "target", ""], floatfmt=".3f"))
    return 0


def bootstrap_interval(per_process: list[list[float]], rounds: int = 2000, seed: int = 0) -> tuple[float, float]:
    """The 2.5% and 97.5% quantiles of the pooled median over resamples: processes drawn with
    replacement, then pairs within each drawn process (pairs of one process share its layout)."""
    import random

    rng = random.Random(seed)
    medians = []
    for _ in range(rounds):
        drawn = [rng.choices(ratios, k=len(ratios)) for ratios in rng.choices(per_process, k=len(per_process))]
        medians.append(statistics.median(r for ratios in drawn for r in ratios))
    medians.sort()
    return medians[int(0.025 * rounds)], medians[int(0.975 * rounds) - 1]


if __name__ == "__main__":
    sys.exit(main())
