"""The real-bug corpus: public PyTorch issue reports of compiled-vs-eager divergence, as scripts.

Each ``cases/*.py`` is the report's script as its author wrote it (the device set to ``cpu``,
failing asserts turned into prints), under a header that cites the issue and records the verdict
the maintainers' discussion supports, decided before the package's verdicts were changed::

    # issue: https://github.com/pytorch/pytorch/issues/NNNNN
    # expected: bug | not_a_bug
    # verdict: inaccurate | wrong_gradient | skipped_error | ... (diagnose's verdict)
    # culprit: the op or mechanism the thread names

:func:`diagnose_case` runs ``python -m instrumented_backend diagnose`` on one case in a fresh
process with a fresh Inductor cache, and :func:`plain_run` the script itself under plain
Inductor, the floor a diagnosis is measured against.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from instrumented_backend.diagnosis.verdict import NOT_FOUND

CASES_DIR = Path(__file__).resolve().parent / "cases"
# The header's verdicts as the maintainers' words have them, in diagnose's verdict names.
_VERDICT_NAMES = {"eager_error_compiled_returns": "skipped_error"}
# Verdicts that are no compiler bug (diagnose exits 0 on them)
NOT_A_BUG = NOT_FOUND


@dataclass(frozen=True)
class RealCase:
    """One issue report: its script and the verdict its discussion supports."""

    name: str
    path: Path
    issue: str
    expected: str  # "bug" or "not_a_bug"
    verdict: str  # diagnose's verdict name
    culprit: str
    header: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def number(self) -> str:
        found = re.search(r"/issues/(\d+)", self.issue)
        return f"#{found.group(1)}" if found else "-"


def _header(path: Path) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        found = re.match(r"#\s*(issue|title|expected|verdict|culprit|grad|discussion|reproduces):\s*(.*)", line)
        if found:
            fields.setdefault(found.group(1), found.group(2).strip())
        elif not line.startswith("#"):
            break
    return fields


def load_cases() -> list[RealCase]:
    """Every case of ``cases/``, sorted by name."""
    cases = []
    for path in sorted(CASES_DIR.glob("*.py")):
        header = _header(path)
        verdict = header.get("verdict", "").split()[0] if header.get("verdict") else ""
        cases.append(RealCase(path.stem, path, header.get("issue", "none"), header.get("expected", ""),
                              _VERDICT_NAMES.get(verdict, verdict), header.get("culprit", ""), header))
    return cases


@dataclass
class CaseRun:
    """What ``diagnose`` said of one case, and what it cost."""

    case: RealCase
    exit_code: int
    verdict: str
    seconds: float
    culprit: str = ""
    culprit_line: str = ""
    repro: str = ""
    repro_reproduces: Optional[bool] = None
    output_tail: str = ""
    plain_seconds: Optional[float] = None

    @property
    def right(self) -> bool:
        """The verdict is the one the maintainers' discussion supports."""
        return self.verdict == self.case.verdict

    @property
    def ratio(self) -> Optional[float]:
        return self.seconds / self.plain_seconds if self.plain_seconds else None


def _fresh_env(cache: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(TORCHINDUCTOR_CACHE_DIR=cache, TORCHINDUCTOR_FX_GRAPH_CACHE="0", TORCHINDUCTOR_AUTOGRAD_CACHE="0",
               PYTHONWARNINGS="ignore")
    return env


def _diagnoses(out: Path) -> list[dict[str, Any]]:
    found = [json.loads(p.read_text()) for p in sorted(out.rglob("diagnosis.json"))]
    return sorted(found, key=lambda d: not d.get("found"))  # a bug found first


def _where(source: Optional[dict[str, Any]]) -> str:
    return f"{Path(source['file']).name}:{source.get('line')}" if source and source.get("file") else ""


def _culprit(diagnosis: dict[str, Any]) -> tuple[str, str]:
    """(the culprit, its source line) as a diagnosis names them: the first divergence's culprit,
    the ops of a difference by design or of the scalars eager rounds, the ops where rounding the
    program amplifies starts and grows past the tolerance, or the line where eager raises."""
    divergence = diagnosis.get("divergence") or {}
    designed = diagnosis.get("by_design") or diagnosis.get("unrounded_scalars") or {}
    if designed.get("ops"):
        first = designed["ops"][0]
        return f"{first['node']} ({first['op']})", _where(first.get("source"))
    chain = (diagnosis.get("amplified") or {}).get("chain") or []
    if chain:  # rounding the program amplifies: where compiled and eager part, and what amplifies it
        last = next((step for step in chain if step["used"] > 1.0), chain[-1])
        return f"{chain[0]['op']} -> {last['op']}", _where(last.get("source"))
    if divergence.get("given_wrong") and not divergence.get("culprit"):  # the graph Inductor was given is wrong
        return (f"{divergence['given_wrong']} ({divergence.get('given_wrong_op', '')})",
                _where(divergence.get("given_wrong_source")))
    culprit = divergence.get("culprit") or ""
    if divergence.get("culprit_target"):
        culprit = f"{culprit} ({divergence['culprit_target']})"
    line = next((_where(kernel_line.get("source")) for kernel_line in divergence.get("lines") or []
                 if _where(kernel_line.get("source"))), "")
    eager_line = diagnosis.get("eager_error_at", "")
    if eager_line and not line:
        line = f"{Path(eager_line.split(':')[0]).name}:{eager_line.split(':')[1]}"
    if diagnosis.get("verdict") == "crashed":  # the smallest graph that still crashes
        sources = diagnosis.get("culprit_sources") or []
        line = line or (Path(sources[0].split(":")[0]).name + ":" + sources[0].split(":")[1] if sources else "")
        return ", ".join(diagnosis.get("culprit_nodes") or []), line
    repro_ops = diagnosis.get("repro_ops") or []
    if not culprit and repro_ops:  # a graph wrong before code generation: the ops the minimal repro holds
        culprit = " + ".join(op.split(" at ")[0] for op in repro_ops[:4])
        line = line or (repro_ops[-1].split(" at ")[1].split(": ")[0] if " at " in repro_ops[-1] else "")
    return culprit, line


def diagnose_case(case: RealCase, *, minify: bool = True, timeout: float = 900.0,
                  check_repro: bool = True) -> CaseRun:
    """``python -m instrumented_backend diagnose`` on ``case`` in a fresh process and Inductor cache."""
    with tempfile.TemporaryDirectory(prefix="real_bug_") as tmp:
        out = Path(tmp) / "diagnosis"
        argv = [sys.executable, "-m", "instrumented_backend", "diagnose", "--out", str(out)]
        argv += [] if minify else ["--no-minify"]
        began = time.perf_counter()
        proc = subprocess.run([*argv, str(case.path)], cwd=case.path.parent, env=_fresh_env(str(Path(tmp) / "cache")),
                              capture_output=True, text=True, timeout=timeout)
        seconds = time.perf_counter() - began
        diagnoses = _diagnoses(out)
        first = diagnoses[0] if diagnoses else {}
        culprit, line = _culprit(first)
        verdict = first.get("verdict", "(none)" if proc.returncode != 2 else "not_diagnosed")
        run = CaseRun(case, proc.returncode, verdict, seconds, culprit, line, first.get("repro_path", "") or "",
                      output_tail=(proc.stdout + proc.stderr)[-3000:])
        if check_repro and run.repro and Path(run.repro).is_file():
            rerun = subprocess.run([sys.executable, run.repro], capture_output=True, text=True, timeout=timeout,
                                   env=_fresh_env(str(Path(tmp) / "cache_repro")))
            run.repro_reproduces = rerun.returncode == 1 and "REPRODUCES" in rerun.stdout
    return run


def plain_run(case: RealCase, timeout: float = 900.0) -> float:
    """Seconds of ``python script.py`` under plain Inductor in a fresh process and Inductor cache:
    the floor a diagnosis of the same script cannot go below (import, compile, run)."""
    with tempfile.TemporaryDirectory(prefix="real_bug_plain_") as tmp:
        began = time.perf_counter()
        subprocess.run([sys.executable, str(case.path)], cwd=case.path.parent, env=_fresh_env(tmp),
                       capture_output=True, text=True, timeout=timeout)
        return time.perf_counter() - began
