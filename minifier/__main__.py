"""``python -m minifier repro.py``: shrink a saved repro again (a thin CLI over :func:`minify`)."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Optional, Sequence

from .checks import AccuracyFailure, CompileFailure, Failure, RuntimeFailure
from .minify import MinifierError, minify


def load_repro(path: Path):
    """Import a repro script as a module (its ``ENV`` and fault imports take effect here)."""
    if not path.is_file():
        raise MinifierError(f"no repro script at {path}")
    spec = importlib.util.spec_from_file_location("minifier_repro", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in ("SPEC", "EXPECTED", "make_module", "make_inputs"):
        if not hasattr(module, name):
            raise MinifierError(f"{path} is not a minifier repro (no {name})")
    return module


def check_for(expected: dict, spec: dict, pattern: Optional[str]) -> Failure:
    kind = expected["kind"]
    if kind == "accuracy":
        return AccuracyFailure(pattern=pattern, tol=spec.get("tol"))
    if kind == "compile_error":
        return CompileFailure(pattern=pattern)
    return RuntimeFailure(pattern=pattern)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minifier", description=__doc__)
    parser.add_argument("repro", type=Path, help="a repro script written by the minifier")
    parser.add_argument("--out", type=Path, default=None, help="folder for the new repro (default: the repro's)")
    parser.add_argument("--no-isolate", action="store_true", help="judge candidates in this process (faster, not crash-proof)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per candidate")
    parser.add_argument("--pattern", default=None, help="regex the failure must also match")
    args = parser.parse_args(argv)
    try:
        repro = load_repro(args.repro)
        spec = repro.SPEC
        config = {k: v for k, v in (spec.get("config") or {}).items() if k != "fallback_random"}
        result = minify(repro.make_module(), repro.make_inputs(),
                        check=check_for(repro.EXPECTED, spec, args.pattern or getattr(repro, "PATTERN", None)),
                        level=spec["level"], config=config, dynamic=spec.get("dynamic") or {},
                        isolate=not args.no_isolate, timeout=args.timeout,
                        repro_dir=args.out or args.repro.parent, seed=spec.get("seed", 0))
    except MinifierError as exc:
        print(f"minifier: {exc}", file=sys.stderr)
        return 2
    print(result.summary())
    return 0 if result.reproduced else 1


if __name__ == "__main__":
    sys.exit(main())
