"""Fidelity and line-map coverage on the real-model corpus, one row per case.

Runs every case of ``tests/corpus/cases.py`` under plain Inductor and under
``backend="instrumented"``, each case in its own fresh processes with caches off and, by
default, an empty Inductor cache per process (so the time ratio compares two cold compiles).
Prints, per case: output code identical to Inductor's, outputs and gradients equal, kernels
with a tagged line, computation lines with IR op and FX node, lines with a user source line,
and the instrumented/inductor wall-time ratio of the calls (compiles included; one cold run
each, so a noisy figure). Targets: byte-identical, equal, 100% kernels, >= 99% mapped, >= 97%
sourced.

    python benchmarks/provenance_coverage.py                 # every case (about 15 minutes on 2 cores)
    python benchmarks/provenance_coverage.py --cases gather_scatter bert_train
    python benchmarks/provenance_coverage.py --smoke         # CI smoke: one small case, shared cache

The Hugging Face cases need the test extra ``transformers`` (built from configs, random weights).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "corpus"))
from cases import CASES  # noqa: E402
from compare import run_and_compare  # noqa: E402

# The smoke checks the script runs and prints its table: one small case (the corpus test runs it and the
# rest of the default cases in full).
SMOKE_CASES = ["int_bool"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), help="run these cases only")
    parser.add_argument("--smoke", action="store_true", help="one small case in one process per backend")
    args = parser.parse_args(argv)
    cases = SMOKE_CASES if args.smoke else (args.cases or list(CASES))
    with tempfile.TemporaryDirectory(prefix="ib-coverage-") as workdir:
        # the smoke builds its C++ in the caller's Inductor cache when it names one (a test run's own)
        shared = os.environ.get("TORCHINDUCTOR_CACHE_DIR") if args.smoke else None
        results = run_and_compare(cases, Path(workdir), per_case_processes=not args.smoke, cold=not args.smoke,
                                  cache_dir=Path(shared) if shared else None)
    print(tabulate([r.row() for r in results], headers="keys", floatfmt=".1f"))
    missed = [r.case for r in results
              if not (r.codes_identical and r.outputs_equal and r.grads_equal and not r.problems and not r.warnings)
              or r.coverage["kernels tagged %"] < 100.0 or r.coverage["with IR op + FX node %"] < 99.0
              or r.coverage["with source line %"] < 97.0]
    print("targets (identical, equal, 100% kernels, >=99% mapped, >=97% sourced):",
          "MET" if not missed else f"MISSED for {missed}")
    for result in results:
        if result.unmapped or result.unsourced_nodes:
            print(f"  {result.case}: unmapped {result.unmapped[:3]} unsourced nodes {result.unsourced_nodes[:6]}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
