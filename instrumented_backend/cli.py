"""Command line, thin over the library.

    python -m instrumented_backend run script.py [args ...] --dump DIR
    python -m instrumented_backend show DIR [--kernels]
    python -m instrumented_backend profile script.py [args ...] [--warmup N --iters N --active N --out DIR]

``run`` executes a script unchanged, with every torch.compile call that would use Inductor
(the default backend) using ``backend="instrumented"`` instead, then writes what was captured
to ``DIR`` (also when the script raises or exits). ``--dump DIR`` is recognised before the
script name or as the last two arguments; everything else after the script name is passed to
the script.

``profile`` runs a script the same way, then profiles each function or module it compiled on the
inputs of its first call (:mod:`instrumented_backend.profiling.script`): eager vs compiled,
kernels joined to FX nodes and source lines, diagnosis. ``--out DIR`` also writes each report
as JSON and its Perfetto trace.
"""

from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path
from typing import Optional, Sequence

from .compile_redirect import redirect_torch_compile

__all__ = ["main", "redirect_torch_compile"]


def _split_trailing_dump(script_args: list[str]) -> tuple[list[str], Optional[str]]:
    if len(script_args) >= 2 and script_args[-2] == "--dump":
        return script_args[:-2], script_args[-1]
    if script_args and script_args[-1].startswith("--dump="):
        return script_args[:-1], script_args[-1].split("=", 1)[1]
    return script_args, None


def _run(args: argparse.Namespace) -> int:
    import instrumented_backend as ib

    script_args, trailing_dump = _split_trailing_dump(list(args.script_args))
    dump_dir = trailing_dump or args.dump
    script = Path(args.script)
    if not script.is_file():
        print(f"instrumented_backend run: no such script: {script}", file=sys.stderr)
        return 2
    undo = redirect_torch_compile()
    old_argv, old_path0 = sys.argv, sys.path[0]
    sys.argv = [str(script), *script_args]
    sys.path[0] = str(script.resolve().parent)
    exit_code = 0
    try:
        with ib.capture() as session:
            try:
                runpy.run_path(str(script), run_name="__main__")
            except SystemExit as exc:
                exit_code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        undo()
        sys.argv, sys.path[0] = old_argv, old_path0
    print(f"\ninstrumented_backend: captured {len(session)} graph(s)", file=sys.stderr)
    if len(session):
        print(ib.report.format_graphs(session), file=sys.stderr)
    if dump_dir:
        session.dump(dump_dir)
        print(f"instrumented_backend: wrote {len(session)} graph(s) to {dump_dir}", file=sys.stderr)
    return exit_code


def _show(args: argparse.Namespace) -> int:
    import instrumented_backend as ib

    try:
        session = ib.load(args.dump_dir)
    except (FileNotFoundError, ValueError) as exc:
        print(f"instrumented_backend show: {exc}", file=sys.stderr)
        return 2
    print(ib.report.format_graphs(session))
    if args.kernels:
        print()
        print(ib.report.format_kernels(session))
    return 0


def _profile(args: argparse.Namespace) -> int:
    from .profiling.script import profile_script

    try:
        reports = profile_script(args.script, list(args.script_args), warmup=args.warmup, iters=args.iters,
                                 active=args.active)
    except (FileNotFoundError, ValueError) as exc:
        print(f"instrumented_backend profile: {exc}", file=sys.stderr)
        return 2
    for index, report in enumerate(reports):
        print(report)
        if args.out:
            out = Path(args.out)
            out.mkdir(parents=True, exist_ok=True)
            report.to_json(out / f"profile_{index}.json")
            report.export_chrome_trace(out / f"trace_{index}.json")
            print(f"instrumented_backend: wrote {out / f'profile_{index}.json'} and {out / f'trace_{index}.json'} "
                  "(open the trace in ui.perfetto.dev)")
    return 0 if reports else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m instrumented_backend", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a script with every Inductor compile instrumented")
    run.add_argument("--dump", metavar="DIR", help="write the captures to DIR when the script ends")
    run.add_argument("script")
    run.add_argument("script_args", nargs=argparse.REMAINDER)
    run.set_defaults(handler=_run)
    show = sub.add_parser("show", help="summarize a dump folder")
    show.add_argument("dump_dir")
    show.add_argument("--kernels", action="store_true", help="also list every kernel")
    show.set_defaults(handler=_show)
    prof = sub.add_parser("profile", help="profile what a script compiles: eager vs compiled, kernels to source lines")
    prof.add_argument("--warmup", type=int, default=10, help="warm-up calls before timing (default 10)")
    prof.add_argument("--iters", type=int, default=50, help="timed calls of each side (default 50)")
    prof.add_argument("--active", type=int, default=5, help="profiled steps after wait and warm-up (default 5)")
    prof.add_argument("--out", metavar="DIR", help="write profile_N.json and trace_N.json here")
    prof.add_argument("script")
    prof.add_argument("script_args", nargs=argparse.REMAINDER)
    prof.set_defaults(handler=_profile)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of ``python -m instrumented_backend``; returns the exit code."""
    args = _parser().parse_args(argv)
    return int(args.handler(args) or 0)
