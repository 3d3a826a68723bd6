"""Run corpus cases under both backends, each in fresh processes, and compare what they made.

Used by ``tests/test_corpus.py`` and ``benchmarks/provenance_coverage.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

import torch

RUNNER = Path(__file__).resolve().parent / "run.py"
REPO = RUNNER.parents[2]

__all__ = ["CaseResult", "run_backend", "compare", "run_and_compare", "RUNNER"]


def run_backend(backend: str, cases: Iterable[str], out: Path, *, cache_dir: Optional[Path] = None,
                timeout: int = 1800, triton: bool = False) -> None:
    """Run ``cases`` under ``backend`` in one fresh interpreter (caches off), results in ``out``;
    without ``cache_dir``, Inductor's cache is a fresh folder removed afterwards. ``triton``:
    Triton kernels for the CPU tensors, run by Triton's interpreter (``tests/triton_cpu.py``)."""
    with tempfile.TemporaryDirectory(prefix="ib-corpus-cache-") as fresh_cache:
        env = {**os.environ, "TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0",
               "TORCHINDUCTOR_CACHE_DIR": str(cache_dir or fresh_cache)}
        if triton:
            env.update(IB_CORPUS_TRITON="1", TRITON_INTERPRET="1")
        proc = subprocess.run([sys.executable, str(RUNNER), "--backend", backend, "--out", str(out), *cases],
                              capture_output=True, text=True, env=env, timeout=timeout, cwd=str(REPO))
    if proc.returncode != 0:
        raise RuntimeError(f"corpus run ({backend}: {' '.join(cases)}) failed with {proc.returncode}:\n"
                           f"{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}")


@dataclass
class CaseResult:
    """One case under both backends."""

    case: str
    graphs: int
    codes_identical: bool
    outputs_equal: bool
    grads_equal: bool
    captured_codes_identical: bool  # what the captures hold is what Inductor loaded
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    coverage: dict[str, Any] = field(default_factory=dict)
    unmapped: list[str] = field(default_factory=list)
    unsourced_nodes: list[str] = field(default_factory=list)
    time_ratio: float = float("nan")  # instrumented / inductor wall time of the calls, compiles included
    first_difference: str = ""
    # Outputs / gradients (by index) that differ between two runs of plain Inductor itself, and in
    # a nondeterministic case every embedding weight's gradient (the atomic adds of the embedding
    # backward; two runs can agree by chance): these are compared with a tolerance, the rest bit for bit.
    unstable_outputs: list[int] = field(default_factory=list)
    unstable_grads: list[int] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        cov = self.coverage
        return {"case": self.case, "graphs": self.graphs, "identical": self.codes_identical,
                "outputs equal": self.outputs_equal and self.grads_equal,
                "kernels tagged %": cov.get("kernels tagged %"),
                "IR op + FX node %": cov.get("with IR op + FX node %"),
                "source line %": cov.get("with source line %"),
                "statement lines": cov.get("statement lines"),
                "problems": len(self.problems) + len(self.warnings),
                "time ratio": round(self.time_ratio, 2)}


def _unstable(a: list[Optional[torch.Tensor]], b: list[Optional[torch.Tensor]]) -> list[int]:
    """Indices where two runs of plain Inductor disagree."""
    return [i for i, (x, y) in enumerate(zip(a, b)) if x is not None and y is not None and not torch.equal(x, y)]


def _equal(a: list[Optional[torch.Tensor]], b: list[Optional[torch.Tensor]], unstable: Iterable[int] = ()) -> bool:
    """Bit for bit, except at ``unstable`` indices, which must be close."""
    if len(a) != len(b):
        return False
    loose = set(unstable)
    for index, (x, y) in enumerate(zip(a, b)):
        if x is None or y is None:
            if x is not y:
                return False
        elif index in loose:
            if not torch.allclose(x, y, rtol=1e-4, atol=1e-6):
                return False
        elif not torch.equal(x, y):
            return False
    return True


def _first_difference(ours: list[str], theirs: list[str]) -> str:
    import difflib

    for index, (a, b) in enumerate(zip(theirs, ours)):
        if a != b:
            diff = difflib.unified_diff(a.splitlines(), b.splitlines(), "inductor", "instrumented", lineterm="", n=2)
            return f"graph {index}:\n" + "\n".join(list(diff)[:40])
    return f"{len(theirs)} graphs under inductor, {len(ours)} under instrumented" if len(ours) != len(theirs) else ""


def compare(
    case: str, inductor_dir: Path, instrumented_dir: Path, inductor_again_dir: Optional[Path] = None
) -> CaseResult:
    """Compare one case; ``inductor_again_dir`` holds a second plain run (nondeterministic cases)."""
    theirs = torch.load(inductor_dir / f"{case}.pt", weights_only=False)
    ours = torch.load(instrumented_dir / f"{case}.pt", weights_only=False)
    again = torch.load(inductor_again_dir / f"{case}.pt", weights_only=False) if inductor_again_dir else theirs
    unstable_outputs = _unstable(theirs["outputs"], again["outputs"])
    unstable_grads = _unstable(theirs.get("grads", []), again.get("grads", []))
    if inductor_again_dir is not None:  # the embedding backward's atomic adds: two runs may agree by chance
        unstable_grads = sorted(set(unstable_grads) | set(theirs.get("embedding_grads", [])))
    identical = ours["codes"] == theirs["codes"]
    return CaseResult(
        case=case,
        graphs=len(theirs["codes"]),
        codes_identical=identical,
        outputs_equal=_equal(ours["outputs"], theirs["outputs"], unstable_outputs),
        grads_equal=_equal(ours.get("grads", []), theirs.get("grads", []), unstable_grads),
        unstable_outputs=unstable_outputs,
        unstable_grads=unstable_grads,
        captured_codes_identical=ours["captured_codes"] == ours["codes"],
        problems=ours["problems"],
        warnings=ours["warnings"],
        coverage=ours["coverage"],
        unmapped=ours["unmapped"],
        unsourced_nodes=ours["unsourced_nodes"],
        time_ratio=ours["seconds"] / theirs["seconds"] if theirs["seconds"] else float("nan"),
        first_difference="" if identical else _first_difference(ours["codes"], theirs["codes"]),
    )


def run_and_compare(cases: list[str], workdir: Path, *, per_case_processes: bool = False,
                    cold: bool = False, side_by_side: bool = False,
                    cache_dir: Optional[Path] = None, triton: bool = False) -> list[CaseResult]:
    """Both backends over ``cases``; ``per_case_processes`` gives each case its own processes,
    ``cold`` gives each process its own empty Inductor cache (C++ builds included); otherwise
    they share ``cache_dir`` (default: a new folder in ``workdir``). The FX-graph and AOT caches
    are off either way, so every process generates its own code: a shared cache only saves C++
    builds (a cache's first C++ compile builds Inductor's ten vector-ISA probe libraries, about
    16 s on a 2-core machine).

    ``side_by_side`` runs the two backends' processes at once (the tests: on two cores it takes
    about the time of one); their wall-time ratio (``time_ratio``) then means little. Otherwise
    one after the other, plain Inductor first (the coverage benchmark). ``triton``: both backends
    write Triton kernels, run by Triton's interpreter (:func:`run_backend`)."""
    from concurrent.futures import ThreadPoolExecutor

    from cases import NONDETERMINISTIC

    shared_cache = None if cold else (cache_dir or workdir / "inductor-cache")
    groups = [[case] for case in cases] if per_case_processes else [cases]
    for group in groups:
        with ThreadPoolExecutor(max_workers=2 if side_by_side else 1) as runner:
            runs = [runner.submit(run_backend, backend, group, workdir / backend, cache_dir=shared_cache,
                                  triton=triton)
                    for backend in ("inductor", "instrumented")]
            for run in runs:
                run.result()
        again = [case for case in group if case in NONDETERMINISTIC]
        if again:  # plain Inductor a second time, to show what it does not reproduce itself
            run_backend("inductor", again, workdir / "inductor_again", cache_dir=shared_cache, triton=triton)
    return [compare(case, workdir / "inductor", workdir / "instrumented",
                    workdir / "inductor_again" if case in NONDETERMINISTIC else None) for case in cases]
