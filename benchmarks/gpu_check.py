"""The Triton cases on a real CUDA device: one line per check, within a time limit.

    python benchmarks/gpu_check.py [--timeout 480]

Runs ``tests/triton_cases.py`` with ``IB_TRITON_DEVICE=cuda`` in a fresh process (Inductor writes
Triton kernels for CUDA tensors by default; nothing is interpreted) and prints, for each case, the
kernels, the statement lines tagged, whether the output code is byte-identical to plain Inductor's
and whether the results match eager; then the faults ``diagnose`` found in a Triton lowering.
Without a CUDA device (or without a CUDA build of torch) it says so and runs nothing; exit status 0
when every check passed (or there was nothing to run), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _checks(results: dict) -> list[tuple[str, bool, str]]:
    """(check, passed, detail) for each case and fault of a ``triton_cases`` run."""
    checks = []
    for case in results["cases"]:
        tagged = case["statements"] == case["mapped"] > 0
        checks.append((f"{case['name']}: every statement line tagged", tagged,
                       f"{case['mapped']}/{case['statements']} lines, {case['kernels']} kernel(s)"))
        checks.append((f"{case['name']}: output code identical to Inductor's", case["identical"], ""))
        checks.append((f"{case['name']}: results match eager", case["matches_eager"], ""))
    for label, fault in results["faults"].items():
        found = fault["verdict"] == fault["expected"] and bool(fault["culprit_lines"])
        checks.append((f"fault {label}: found by diagnose", found,
                       f"{fault['verdict']}, culprit {fault['culprit'] or '-'}, lines {fault['culprit_lines'][:1]}"))
    return checks


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--timeout", type=float, default=480.0, help="seconds for the whole run (default 480)")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print(f"gpu_check: no CUDA device (torch {torch.__version__}): nothing run")
        return 0
    print(f"gpu_check: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "IB_TRITON_DEVICE": "cuda", "TORCHINDUCTOR_CACHE_DIR": f"{folder}/inductor_cache"}
        out = Path(folder) / "out.json"
        try:
            run = subprocess.run([sys.executable, str(ROOT / "tests" / "triton_cases.py"), str(out)], env=env,
                                 capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(f"gpu_check: FAILED, the cases ran past {args.timeout:g} s")
            return 1
        if run.returncode != 0:
            print(f"gpu_check: FAILED, the cases exited with status {run.returncode}:\n{run.stderr[-3000:]}")
            return 1
        checks = _checks(json.loads(out.read_text()))
    for name, passed, detail in checks:
        print(f"{'ok  ' if passed else 'FAIL'} {name}{f' ({detail})' if detail else ''}")
    failed = sum(not passed for _, passed, _ in checks)
    print(f"gpu_check: {len(checks) - failed} of {len(checks)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
