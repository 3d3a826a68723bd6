"""``python -m minifier repro.py``: shrink a saved repro again (a thin CLI over :func:`minify`).

The worker that judges candidates is started first, from what the repro's text says it carries,
so its torch import runs while this process imports torch and loads the repro.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from ._carried import read_carried


def start_worker_early(path: Path) -> bool:
    """Start the worker a repro's candidates will need, before torch is imported here.

    ``minify`` later asks the pool for the worker of the context the repro sets up; when that is
    the same setup (it is, for a repro the minifier wrote) it finds this one already importing.
    It starts at normal CPU priority, unlike :func:`~minifier.workers.prewarm`'s: nothing here
    matters more than its readiness, since this process only waits for it once the repro is loaded.
    """
    try:
        carried = read_carried(path.read_text())
    except (OSError, UnicodeDecodeError):
        return False
    if carried is None:
        return False
    from .workers import WorkerSetup, pool

    imports, env = carried
    pool.get(WorkerSetup(imports=imports, env=env, warm=False))
    return True


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minifier", description=__doc__)
    parser.add_argument("repro", type=Path, help="a repro script written by the minifier")
    parser.add_argument("--out", type=Path, default=None, help="folder for the new repro (default: the repro's)")
    parser.add_argument(
        "--no-isolate", action="store_true", help="judge candidates in this process (faster, not crash-proof)"
    )
    parser.add_argument("--timeout", type=float, default=None, help="seconds per candidate")
    parser.add_argument("--max-seconds", type=float, default=None,
                        help="how long the search may run; past it, the smallest failing graph found is kept")
    parser.add_argument("--pattern", default=None, help="regex the failure must also match")
    args = parser.parse_args(argv)
    if not args.no_isolate:
        start_worker_early(args.repro)
    from .saved import minify_repro
    from .search import MinifierError

    try:
        result = minify_repro(args.repro, out=args.out, pattern=args.pattern, isolate=not args.no_isolate,
                              timeout=args.timeout, max_seconds=args.max_seconds)
    except MinifierError as exc:
        print(f"minifier: {exc}", file=sys.stderr)
        return 2
    print(result.summary())
    return 0 if result.reproduced else 1


def run_and_exit() -> None:
    """Run the CLI, then end the process without tearing torch down (about a second): the output
    is flushed and the workers are told to finish first, which is all the teardown would do
    that matters here."""
    import logging
    import os

    code = main()
    from .workers import pool

    pool.shutdown(wait=False)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run_and_exit()
