"""What ``options={"minify": True}`` costs a function that does not fail: the first call, and the process.

Each run is a fresh interpreter (as a user's script is) that compiles a small function with
``backend="instrumented"``, with and without the option, calls it once and exits; pairs are
interleaved (on, off, on, off, ...). Printed per pair and as medians: the first call's wall time
(compile included) and the whole process's wall time (interpreter start, imports, exit included,
so a minifier worker left to stop at exit would show here). Targets: first call <= 1.05x, process
<= 1.05x (no extra time at exit).

    python benchmarks/minify_option.py [--pairs N] [--smoke]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from overhead import bootstrap_interval

CHILD = """
import sys, time, torch
import instrumented_backend as ib
options = {"minify": True} if sys.argv[1] == "on" else {}
def step(x):
    return torch.tanh(x) * 2 + torch.sin(x)
x = torch.randn(64, 64)
started = time.perf_counter()
torch.compile(step, backend="instrumented", options=options)(x)
print(time.perf_counter() - started)
"""


def run(mode: str) -> tuple[float, float]:
    """(first call seconds, process seconds) of one fresh run."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=600)
    process = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"the {mode} run failed:\n{proc.stderr[-2000:]}")
    return float(proc.stdout.strip().splitlines()[-1]), process


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="one pair: checks the benchmark runs")
    args = parser.parse_args(argv)
    pairs = 1 if args.smoke else args.pairs
    if not args.smoke:  # the smoke's figures mean nothing: no run to warm the caches for its one pair
        run("off")  # the first run of a session pays for cold caches of the OS and of the C++ build
    first, process = [], []
    for index in range(pairs):
        on_first, on_process = run("on")
        off_first, off_process = run("off")
        first.append(on_first / off_first)
        process.append(on_process / off_process)
        print(f"pair {index}: first call {on_first:.2f} s vs {off_first:.2f} s ({first[-1]:.3f}x); "
              f"process {on_process:.2f} s vs {off_process:.2f} s ({process[-1]:.3f}x)", flush=True)
    for name, ratios in (("first call", first), ("process", process)):
        print(summary(name, ratios))
    return 0


def summary(name: str, ratios: list[float]) -> str:
    """The line reporting one measure: median ratio and its bootstrap interval over the pairs
    (each pair ran in fresh interpreters of its own, so pairs are resampled one by one)."""
    low, high = bootstrap_interval([[r] for r in ratios]) if len(ratios) > 1 else (ratios[0], ratios[0])
    return (f"minify option, {name}: median {statistics.median(ratios):.3f}x (target <= 1.05x), "
            f"95% bootstrap interval {low:.3f}x - {high:.3f}x over {len(ratios)} pair(s)")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
