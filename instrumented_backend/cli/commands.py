"""Command line, thin over the library.

    python -m instrumented_backend run [--dump DIR] script.py [args ...] [--dump DIR] [-- args ...]
    python -m instrumented_backend show DIR [--kernels]
    python -m instrumented_backend html DIR -o report.html
    python -m instrumented_backend ranks DIR
    python -m instrumented_backend diagnose [--out DIR] script.py [args ...]
    python -m instrumented_backend profile [options] script.py [args ...] [options] [-- args ...]

``run`` executes a script unchanged, with every torch.compile call that would use Inductor
(the default backend) using ``backend="instrumented"`` instead, then writes what was captured
to ``DIR`` (also when the script raises or exits).

One convention for ``run`` and ``profile``: this package's options may stand before the script
or anywhere after it; every other argument after the script goes to the script, in order, and
everything after a ``--`` goes to the script unchanged (use it when the script has an option of
the same name, e.g. its own ``--out``).

``profile`` runs a script the same way, then profiles each function or module it compiled on the
inputs of its first call (:mod:`instrumented_backend.profiling.script`): eager vs compiled,
kernels joined to FX nodes and source lines, diagnosis. ``--out DIR`` also writes each report
as JSON and its Perfetto trace. ``--html FILE`` on ``run`` and ``profile`` writes the HTML report
(:func:`instrumented_backend.report.html`) of what they captured; ``html`` writes it for a dump.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, NoReturn, Optional, Sequence

__all__ = ["main", "parse_command_line"]


def _take_own_options(args: argparse.Namespace, options: argparse.ArgumentParser,
                      verbatim: Sequence[str] = ()) -> argparse.Namespace:
    """Move this package's options found after the script into ``args`` (a repeatable one adds to
    those given before it); ``verbatim`` (what followed ``--``) goes to the script after the rest,
    unchanged."""
    found, rest = options.parse_known_args(list(args.script_args))
    for name, value in vars(found).items():
        before = getattr(args, name, None)
        setattr(args, name, before + value if isinstance(before, list) and isinstance(value, list) else value)
    args.script_args = rest + list(verbatim)
    return args


def print_users_traceback(exc: BaseException) -> None:
    """``exc``'s traceback as ``python script.py`` prints it: the frames of this package that ran
    the script (``cli.py``, ``redirect.py``) left out, from the script's first frame on."""
    package = str(Path(__file__).resolve().parents[1])
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename.startswith(package):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def parse_command_line(argv: Sequence[str]) -> argparse.Namespace:
    """The parsed command line: ``run``/``profile`` options taken wherever they stand before a ``--``."""
    argv = list(argv)
    verbatim: list[str] = []
    if "--" in argv:
        argv, verbatim = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    args = _parser().parse_args(argv)
    options = getattr(args, "options_after_script", None)
    if options is not None:
        _take_own_options(args, options, verbatim)
    return args


def _run(args: argparse.Namespace) -> int:
    import instrumented_backend as ib

    from ..capture.redirect import redirect_torch_compile, run_as_main, target_name

    script_args, dump_dir = list(args.script_args), args.dump
    script = Path(args.script)
    if not script.is_file():
        print(f"instrumented_backend run: no such script: {script}", file=sys.stderr)
        return 2
    from ..capture.left_out import LeftOut
    from ..capture.recompiles import recompiles_of
    from ..capture.skipped_frames import failed_frames_lines
    from ..seams.dynamo.dynamo_skips import skipped_frames

    compiled: dict[str, Any] = {}  # what the script handed torch.compile, by name (the first of each)

    def note(target: Any, result: Any, compile_kwargs: dict[str, Any]) -> Any:
        compiled.setdefault(target_name(target), target)
        return result

    undo = redirect_torch_compile(note)
    raised: Optional[BaseException] = None
    try:
        with ib.capture() as session, skipped_frames() as skipped:
            try:
                exit_code = run_as_main(script, script_args)
            except Exception as exc:  # noqa: BLE001 - the script's own error: reported, and what it compiled kept
                raised, exit_code = exc, 1
                print_users_traceback(exc)
    finally:
        undo()
    print(f"\ninstrumented_backend: captured {len(session)} graph(s)", file=sys.stderr)
    if raised is not None:  # a failing script is when the dump and the report are wanted most
        print(f"instrumented_backend run: the script raised {type(raised).__name__} (above); what it compiled until "
              "then is reported and written as asked, the graph that failed included when Inductor had begun it "
              "(`diagnose` finds the failing layer and a minimal repro)", file=sys.stderr)
    # a frame compiled again and again: seconds each, or eager past the limit
    recompiled = [found for name, target in compiled.items()
                  if (found := recompiles_of(target, name=name)) is not None]
    left_out = LeftOut.of_run(next(iter(compiled.values()), None), skipped, compiled=bool(len(session)),
                              recompiles=recompiled)
    if left_out.nothing_compiled is not None:
        print(f"instrumented_backend: the script compiled {', '.join(compiled)} with torch.compile, yet Dynamo handed "
              "no graph to Inductor: never called, or it ran eagerly", file=sys.stderr)
        for line in left_out.nothing_compiled.lines():
            print(f"  {line}", file=sys.stderr)
    elif left_out.failed_frames:  # graphs compiled, yet some frames ran eagerly
        heading, *frames = failed_frames_lines(left_out.failed_frames, "they ran eagerly")
        print(f"instrumented_backend: {heading}", *frames, sep="\n", file=sys.stderr)
    for found in recompiled:
        print(f"instrumented_backend: {found.summary()}", file=sys.stderr)
    if len(session):
        print(ib.report.format_graphs(session), file=sys.stderr)
    if dump_dir:
        session.dump(dump_dir)
        print(f"instrumented_backend: wrote {len(session)} graph(s) to {dump_dir}", file=sys.stderr)
    if args.html:
        from ..capture.distributed import rank_file

        path = ib.report.html(session, rank_file(args.html), left_out=left_out)  # under torchrun, each rank its own
        print(f"instrumented_backend: wrote the HTML report {path}", file=sys.stderr)
    return exit_code


def _diagnose(args: argparse.Namespace) -> int:
    """The diagnosis runs in a forked child: compiled code that kills it (a segfaulting kernel) is
    then reported by kernel and source line instead of ending the command, and the graph it ran
    is minified from the arguments of the call that crashed (unless ``--no-minify``)."""
    from ..capture.distributed import rank_out_dir
    from ..diagnosis import faults
    from ..diagnosis.crash import INTERRUPTED, crash_folder, minify_crash, run_surviving_crashes

    try:  # a bad --fault is refused before anything is run or written
        injected = [faults.from_spec(spec) for spec in args.fault or ()]
    except ValueError as exc:  # UnknownOpError too: it names the ops that come close
        print(f"instrumented_backend diagnose: --fault: {exc}", file=sys.stderr)
        return EXIT_NOT_DIAGNOSED
    args.out = str(rank_out_dir(args.out))  # under torchrun, each rank its own folder
    existed = Path(args.out).exists()
    code, crash = run_surviving_crashes(lambda: _diagnose_here(args, injected), args.out)
    if code == INTERRUPTED:
        return _interrupted(Path(args.out), existed)
    if crash is not None:
        if not args.no_minify and crash.located:
            print(f"instrumented_backend diagnose: the compiled code killed the process ({crash.signal}); "
                  "minifying the graph it ran", file=sys.stderr)
            minify_crash(crash, args.out, max_seconds=args.minify_seconds)
        print(crash.render())
        print(f"instrumented_backend diagnose: the fault traceback and the graphs compiled before the crash are in "
              f"{crash_folder(args.out)}")
        crash.write(args.out)
        if not crash.found:  # the program's error on these arguments: verdict eager_error, as in-process
            return 0
    return code


def _interrupted(out: Path, existed: bool) -> int:
    """Ctrl-C stopped a diagnosis: say so in one line; the folder it made goes, one that was there
    before is marked (its reports may be an earlier run's, or half this one's)."""
    import shutil

    from ..diagnosis.crash import INTERRUPTED

    if not existed:
        shutil.rmtree(out, ignore_errors=True)
        left = "nothing written"
    else:
        (out / "INTERRUPTED").write_text("a diagnosis writing here was interrupted (Ctrl-C): what it wrote is "
                                         "incomplete\n", encoding="utf-8")
        left = f"{out} marked INTERRUPTED"
    print(f"instrumented_backend diagnose: interrupted; {left}", file=sys.stderr)
    return INTERRUPTED


def _diagnose_here(args: argparse.Namespace, injected: Sequence[Any]) -> int:
    """The diagnosis of ``args.script`` with the faults ``injected`` in effect; its exit status."""
    import contextlib

    from ..diagnosis.script import ScriptNotDiagnosed, diagnose_script

    with contextlib.ExitStack() as stack:
        for fault in injected:
            stack.enter_context(fault)
        try:
            results = diagnose_script(args.script, list(args.script_args), out_dir=args.out,
                                      minify=False if args.no_minify else (args.minify_seconds or True),
                                      tol=args.tol)
        except (FileNotFoundError, ScriptNotDiagnosed) as exc:
            print(f"instrumented_backend diagnose: {exc}", file=sys.stderr)
            return EXIT_NOT_DIAGNOSED
        except Exception as exc:  # noqa: BLE001 - the diagnosis failed, not the user's program
            traceback.print_exc()
            print(f"instrumented_backend diagnose: the diagnosis itself failed ({type(exc).__name__}: {exc}"[:400]
                  + ")", file=sys.stderr)
            return EXIT_NOT_DIAGNOSED
    for result in results:
        print(result.render())
        print()
    checked = [label for result in results for label in result.graphs]
    calls = f" ({len(results)} calls)" if len(results) > len({result.target for result in results}) else ""
    print(f"instrumented_backend diagnose: checked {len({result.target for result in results})} compiled "
          f"target(s){calls}, graphs: "
          f"{', '.join(checked) or 'none'}")
    return EXIT_BUG_FOUND if any(result.found for result in results) else EXIT_NO_BUG


def _reading_a_dump(command: str, action: Callable[[], int]) -> int:
    """Run ``action``; a dump that is missing or unreadable is a message and exit status 2."""
    try:
        return action()
    except (FileNotFoundError, ValueError) as exc:
        print(f"instrumented_backend {command}: {exc}", file=sys.stderr)
        return 2


def _ranks(args: argparse.Namespace) -> int:
    import instrumented_backend as ib

    def compare() -> int:
        comparison = ib.compare_ranks(args.dump_dir)
        print(comparison.render())
        return 0 if comparison.equal else 1

    return _reading_a_dump("ranks", compare)


def _html(args: argparse.Namespace) -> int:
    import instrumented_backend as ib

    def write() -> int:
        print(f"instrumented_backend: wrote {ib.report.html(args.dump_dir, args.output)}")
        return 0

    return _reading_a_dump("html", write)


def _show(args: argparse.Namespace) -> int:
    import instrumented_backend as ib

    def show() -> int:
        session = ib.load(args.dump_dir)
        print(ib.report.format_graphs(session))
        if args.kernels:
            print()
            print(ib.report.format_kernels(session))
        return 0

    return _reading_a_dump("show", show)


def _profile(args: argparse.Namespace) -> int:
    from ..profiling.script import profile_script

    try:
        reports = profile_script(args.script, list(args.script_args), warmup=args.warmup, iters=args.iters,
                                 active=args.active)
    except (FileNotFoundError, ValueError) as exc:
        print(f"instrumented_backend profile: {exc}", file=sys.stderr)
        return 2
    for index, report in enumerate(reports):
        print(report)
        if args.out:
            from ..capture.distributed import rank_out_dir

            out = rank_out_dir(args.out)
            out.mkdir(parents=True, exist_ok=True)
            report.to_json(out / f"profile_{index}.json")
            report.export_chrome_trace(out / f"trace_{index}.json")
            print(f"instrumented_backend: wrote {out / f'profile_{index}.json'} and {out / f'trace_{index}.json'} "
                  "(open the trace in ui.perfetto.dev)")
        if args.html:
            from ..capture.distributed import rank_file
            from ..report import html

            target = rank_file(args.html)
            if index:
                target = target.with_name(f"{target.stem}_{index}{target.suffix}")
            html(report.captures, target, profile=report)
            print(f"instrumented_backend: wrote the HTML report {target}")
    return 0 if reports else 1


# Each subcommand's own options: (flag, add_argument keywords).
_RUN_OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("--dump", dict(metavar="DIR", help="write the captures to DIR when the script ends (also when it raises)")),
    ("--html", dict(metavar="FILE", help="write the HTML report of the captures to FILE")),
]


def _positive_number(text: str) -> float:
    """``--tol``, ``--minify-seconds``: a positive finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


# diagnose's exit status: a CI gate reads 0 as "no compiler bug", never as "could not tell"
EXIT_NO_BUG, EXIT_BUG_FOUND, EXIT_NOT_DIAGNOSED = 0, 1, 2
_DIAGNOSE_EXIT_CODES = """exit status:
  0  no compiler bug found in what the script compiled
  1  a bug found: a wrong result, a compile or runtime error, a check the compiled code skips
  2  the script could not be diagnosed: it failed before compiling anything, or the
     diagnosis itself failed"""

_DIAGNOSE_OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("--out", dict(metavar="DIR", default="diagnosis", help="where the reports and the repro go (default diagnosis)")),
    ("--no-minify", dict(action="store_true", default=False, help="skip the minimal repro")),
    ("--minify-seconds", dict(metavar="S", type=_positive_number, default=None,
                              help="how long the minifier may search (default 600); past it, the smallest "
                                   "failing graph found so far is the repro")),
    ("--fault", dict(metavar="FAULT", default=None, action="append",
                     help="inject a codegen bug first (for demos and trying the tool on your model): the "
                          "tutorial's doubling_neg or cast_dropping_neg, or OP*FACTOR, that op's result "
                          "scaled (e.g. 'rsqrt*1.01'); repeat it to inject several")),
    ("--tol", dict(metavar="TOL", type=_positive_number, default=None,
                   help="judge every floating result at this absolute and relative tolerance (default: by "
                        "dtype, 1e-4 for float32, 1e-2 for half precision); a passing diagnosis says how close "
                        "it came")),
]
_PROFILE_OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("--warmup", dict(type=int, default=10, help="warm-up calls before timing (default 10)")),
    ("--iters", dict(type=int, default=50, help="timed calls of each side (default 50)")),
    ("--active", dict(type=int, default=5, help="profiled steps after wait and warm-up (default 5)")),
    ("--out", dict(metavar="DIR", help="write profile_N.json and trace_N.json here")),
    ("--html", dict(metavar="FILE", help="write the HTML report (timings overlaid) to FILE")),
]


def _add_options(parser: argparse.ArgumentParser, options: list[tuple[str, dict[str, Any]]]) -> None:
    for flag, keywords in options:
        parser.add_argument(flag, **keywords)


def _options_only(options: list[tuple[str, dict[str, Any]]], prog: str) -> argparse.ArgumentParser:
    """A parser of a subcommand's options alone, for those given after the script (no defaults:
    an option not repeated there keeps what was given before the script)."""
    parser = argparse.ArgumentParser(prog=prog, add_help=False, allow_abbrev=False)
    for flag, keywords in options:
        parser.add_argument(flag, **{**keywords, "default": argparse.SUPPRESS})
    return parser


def _script_command(sub: Any, name: str, help: str, options: list[tuple[str, dict[str, Any]]],
                    handler: Callable[[argparse.Namespace], int], epilog: str = "") -> None:
    """A subcommand that runs a script: its options before the script or anywhere after it."""
    command = sub.add_parser(name, help=help, epilog=epilog or None,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_options(command, options)
    command.add_argument("script")
    # the script's own arguments are optional: a missing script is the only thing to name
    command.add_argument("script_args", nargs=argparse.REMAINDER).required = False
    command.set_defaults(handler=handler, options_after_script=_options_only(options, name))


class _Parser(argparse.ArgumentParser):
    """An argument parser whose error for an unknown option says which known one comes close."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        import difflib

        unknown = [word for word in message.split() if word.startswith("--")]
        known = sorted({option for action in _all_actions(self) for option in action.option_strings})
        close = [match for word in unknown for match in difflib.get_close_matches(word, known, n=1)]
        if close:
            message += f" (did you mean {', '.join(close)}?)"
        super().error(message)


def _all_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The actions of ``parser`` and of its subcommands' parsers."""
    actions = list(parser._actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for subparser in action.choices.values():
                actions.extend(subparser._actions)
    return actions


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m instrumented_backend", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _script_command(sub, "run", "run a script with every Inductor compile instrumented", _RUN_OPTIONS, _run)
    show = sub.add_parser("show", help="summarize a dump folder")
    show.add_argument("dump_dir")
    show.add_argument("--kernels", action="store_true", help="also list every kernel")
    show.set_defaults(handler=_show)
    _script_command(sub, "diagnose", "from a failing script to the culprit line and a minimal repro; exit 1 when a "
                    "bug is found", _DIAGNOSE_OPTIONS, _diagnose, epilog=_DIAGNOSE_EXIT_CODES)
    ranks = sub.add_parser("ranks", help="compare the ranks of a distributed run's dump; exit 1 when they differ")
    ranks.add_argument("dump_dir")
    ranks.set_defaults(handler=_ranks)
    page = sub.add_parser("html", help="write the HTML report of a dump folder")
    page.add_argument("dump_dir")
    page.add_argument("-o", "--output", default="report.html", help="the report file (default report.html)")
    page.set_defaults(handler=_html)
    _script_command(sub, "profile", "profile what a script compiles: eager vs compiled, kernels to source lines",
                    _PROFILE_OPTIONS, _profile)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of ``python -m instrumented_backend``; returns the exit code."""
    args = parse_command_line(sys.argv[1:] if argv is None else argv)
    try:
        code = int(args.handler(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not as a traceback at exit
        return code
    except BrokenPipeError:  # `show DIR | head`: the reader left; say nothing more
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
