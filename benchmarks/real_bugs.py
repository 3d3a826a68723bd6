"""Diagnose every case of the real-bug corpus (``tests/real_bugs/cases``) and print its table.

    .venv/bin/python benchmarks/real_bugs.py [--match SUBSTRING] [--no-minify] [--json FILE]

Per case: the issue, the verdict its maintainers' discussion supports, the verdict ``diagnose``
gave, the culprit and its line, whether the minifier's repro reproduces, the wall time of the
``diagnose`` command and its ratio to the wall time of the script itself under plain Inductor
(both fresh processes with fresh Inductor caches, one after the other). The last lines give the
count of right verdicts and the median ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "real_bugs"))
from corpus import CaseRun, diagnose_case, load_cases, plain_run  # noqa: E402


def _row(run: CaseRun) -> str:
    repro = {None: "-", True: "yes", False: "NO"}[run.repro_reproduces]
    ratio = f"{run.ratio:.1f}x" if run.ratio is not None else "-"
    culprit = f"{run.culprit} {run.culprit_line}".strip() or "-"
    mark = "ok" if run.right else "WRONG"
    return (f"| {run.case.number} {run.case.name} | {run.case.verdict} | {run.verdict} {mark} | {culprit[:60]} | "
            f"{repro} | {run.seconds:.1f} s | {ratio} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--match", default="", help="only the cases whose name contains this")
    parser.add_argument("--no-minify", action="store_true", help="diagnose without the minimal repro")
    parser.add_argument("--json", default="", help="also write the runs here")
    args = parser.parse_args()
    cases = [case for case in load_cases() if args.match in case.name]
    print("| case | expected | verdict given | culprit and line | repro reproduces | time | ratio to plain |")
    print("|---|---|---|---|---|---|---|")
    runs = []
    for case in cases:
        run = diagnose_case(case, minify=not args.no_minify)
        run.plain_seconds = plain_run(case)
        runs.append(run)
        print(_row(run), flush=True)
    right = sum(run.right for run in runs)
    ratios = [run.ratio for run in runs if run.ratio is not None]
    print(f"\n{right} of {len(runs)} verdicts right; median ratio to the plain run "
          f"{statistics.median(ratios):.2f}x" if ratios else "")
    if args.json:
        Path(args.json).write_text(json.dumps([{
            "case": r.case.name, "issue": r.case.issue, "expected": r.case.verdict, "verdict": r.verdict,
            "right": r.right, "culprit": r.culprit, "line": r.culprit_line, "repro_reproduces": r.repro_reproduces,
            "seconds": r.seconds, "plain_seconds": r.plain_seconds, "exit_code": r.exit_code,
            "tail": r.output_tail} for r in runs], indent=1))
    return 0 if right == len(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
