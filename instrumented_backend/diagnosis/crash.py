"""A diagnosis that survives compiled code killing the process (a kernel that segfaults).

:func:`run_surviving_crashes` runs the diagnosis in a forked child (Linux) that dumps every graph
it compiles before running it (``INSTRUMENTED_BACKEND_DUMP_DIR``) and has Python's fault handler
write the traceback on a fatal signal. When the child dies by a signal, :func:`explain_crash`
reads that traceback: its innermost frame in Inductor's output code is the ``call()`` line that
launched the crashing kernel, and the dumped capture of that code maps the line to the kernel, its
FX nodes and the user's source lines.

Before each graph's compiled code first runs, the child also saves the graph (post-grad) with
copies of that call's arguments as a minifier repro (``crash/first_calls/``), and before each later
call that call's arguments (``crash/later_calls/``, the latest call of each graph only: a crash
ends the graph's calls in the one that crashed). :func:`minify_crash` writes the repro of the
call that crashed, pins it to the signal and shrinks it in worker processes, where the crash
costs a worker, not this process: the culprit node, its source line and a small repro.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import re
import shutil
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from ..capture.options import DUMP_DIR_ENV
from ..records import to_plain
from ..seams.lowering.lowering_patterns import lowered_only

__all__ = ["CrashReport", "run_surviving_crashes", "explain_crash", "minify_crash", "crash_folder",
           "save_first_call", "save_later_call", "SNAPSHOT_LIMIT", "INTERRUPTED"]

# The exit status of a run stopped by Ctrl-C, as a shell gives it (128 + SIGINT)
INTERRUPTED = 130
SNAPSHOT_LIMIT = 256 << 20  # a call whose arguments hold more bytes is not saved
_PENDING = "signal (pending: saved before the first call)"

_FRAME = re.compile(r'File "([^"]+)", line (\d+) in (\S+)')


@dataclass
class CrashReport:
    """Where compiled code killed the process: the signal, the output-code line that was running
    (a kernel launch) and what the line map says of it."""

    signal: str
    code_path: str = ""  # the output code whose call() was running
    line: int = 0  # 1-based, in that file
    statement: str = ""
    graph: str = ""  # the capture's label, when its dump was found
    graph_folder: str = ""  # that dump's folder (fx_graph_runnable.py, output_code.py, the IR)
    kernel: str = ""
    fx_nodes: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # "file:line: code", in graph order
    fault_traceback: str = ""
    crashing_call: int = 0  # which call of the graph crashed (1: its first), when its arguments were saved
    call_repro: str = ""  # the crashing graph and that call's arguments, as a repro
    not_narrowed: str = ""  # why the crash was not minified, when it was not
    minified: str = ""  # the minifier's summary line
    culprit_nodes: list[str] = field(default_factory=list)  # the minified graph's op nodes
    culprit_sources: list[str] = field(default_factory=list)
    repro_path: str = ""
    eager_error: str = ""  # eager raises on the crashing call's arguments too, at culprit_nodes[0]

    def write(self, out_dir: "str | Path") -> Path:
        """Write the crash as the diagnosis of the run (``diagnosis.txt`` and ``diagnosis.json``, verdict
        ``crashed``, under ``out_dir``), as a verdict is written: what reads a diagnosis finds it; returns
        the JSON's path."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        data = {"verdict": self.verdict, "found": self.found, "culprit_nodes": self.culprit_nodes,
                "culprit_sources": self.culprit_sources, "repro_path": self.repro_path, "crash": to_plain(self)}
        for name, text in (("diagnosis.txt", self.render() + "\n"), ("diagnosis.json", json.dumps(data, indent=1))):
            partial = out / (name + ".partial")
            partial.write_text(text, encoding="utf-8")
            partial.replace(out / name)
        return out / "diagnosis.json"

    @property
    def found(self) -> bool:
        """A bug of the compiler: not when eager raises on the same arguments (the program's error)."""
        return not self.eager_error

    @property
    def verdict(self) -> str:
        """``crashed``, or ``eager_error`` when eager raises on the same arguments."""
        return "crashed" if self.found else "eager_error"

    @property
    def located(self) -> bool:
        """True when the crashing statement of Inductor's output code was found."""
        return bool(self.code_path)

    def render(self) -> str:
        lines = [f"the compiled code killed the process ({self.signal})"]
        if not self.fault_traceback.strip():
            lines.append("no fault traceback was written: the signal is one Python cannot report (SIGKILL, "
                         "as the out-of-memory killer sends)")
            return "\n".join(lines)
        if not self.located:
            lines.append("no frame of Inductor's output code in the fault traceback: the crash was elsewhere")
            lines.append(self.fault_traceback.strip())
            return "\n".join(lines)
        lines.append(f"  while running {self.code_path}:{self.line}: {self.statement}")
        if self.kernel:
            lines.append(f"  kernel: {self.kernel} (graph {self.graph})")
        if self.fx_nodes:
            lines.append(f"  FX nodes: {', '.join(self.fx_nodes)}")
        lines.extend(f"  source: {source}" for source in self.sources)
        if self.graph_folder:
            lines.append(f"  the graph, runnable: {self.graph_folder}/fx_graph_runnable.py")
        if self.call_repro:
            which = "its first call" if self.crashing_call == 1 else f"call {self.crashing_call}"
            lines.append(f"  the graph on the arguments of {which} (the one that crashed), as a repro: "
                         f"{self.call_repro}")
        if self.eager_error:
            lines.append(f"  eager raises on the same arguments: {self.eager_error}")
            lines.extend(f"  culprit source line: {source}" for source in self.culprit_sources)
            lines.append("  the crash is that error, raised inside a compiled kernel, where it ends the process "
                         "(an index bounds check aborts): the program's error on these arguments, not the "
                         "compiler's (nothing to minify)")
            return "\n".join(lines)
        if self.minified:
            lines.append(f"  {self.minified}")
        if self.culprit_nodes:
            lines.append(f"  culprit: {', '.join(self.culprit_nodes)} (the smallest graph that still crashes)")
        lines.extend(f"  culprit source line: {source}" for source in self.culprit_sources)
        if self.repro_path:
            lines.append(f"  run it: python {self.repro_path}")
        if self.not_narrowed:
            lines.append(f"  not minified: {self.not_narrowed}")
        return "\n".join(lines)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def crash_folder(out_dir: "str | Path") -> Path:
    """Where a crash's fault traceback, dumped graphs and first-call repros go under ``out_dir``."""
    return Path(out_dir) / "crash"


def run_surviving_crashes(work: Callable[[], int], out_dir: "str | Path") -> tuple[int, Optional[CrashReport]]:
    """``work()``'s exit status, run in a forked child on Linux; ``(1, report)`` when the child
    died by a signal (:func:`minify_crash` narrows the report). Elsewhere ``work`` runs here and
    a crash ends this process."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return work(), None
    crash_dir = crash_folder(out_dir)
    shutil.rmtree(crash_dir, ignore_errors=True)
    crash_dir.mkdir(parents=True)
    fault_log, dumps = crash_dir / "fault_traceback.txt", crash_dir / "graphs"
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: the whole diagnosis
        code = 1
        try:
            from ..capture.backend import before_calls

            # Every thread: a kernel's OpenMP thread that faults has no Python frame; the one
            # that launched the kernel is in Inductor's call().
            faulthandler.enable(file=fault_log.open("w"), all_threads=True)
            os.environ[DUMP_DIR_ENV] = str(dumps)
            with before_calls(lambda graph, args, options: save_first_call(graph, args, options, crash_dir),
                              later=lambda graph, number, args: save_later_call(graph, number, args, crash_dir)):
                code = work()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except KeyboardInterrupt:  # the parent says so, in one line
            code = INTERRUPTED
        except BaseException:  # noqa: BLE001 - reported as the in-process run would
            traceback.print_exc()
        finally:
            # a second Ctrl-C (the parent passes one on when the first reached it alone) must not
            # interrupt the way out with a traceback
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    try:
        _, status = os.waitpid(pid, 0)
    except KeyboardInterrupt:  # Ctrl-C reached both: the child stops too, at most a few seconds later
        _stop_child(pid)
        shutil.rmtree(crash_dir, ignore_errors=True)
        return INTERRUPTED, None
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        shutil.rmtree(crash_dir, ignore_errors=True)
        return code, None
    return 1, explain_crash(-code, fault_log, dumps)


def _stop_child(pid: int, grace: float = 10.0) -> None:
    """Interrupt the forked child ``pid`` (if Ctrl-C did not reach it), wait for it at most
    ``grace`` seconds, then kill it; reaped either way."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C: keep waiting for the child
            if os.waitpid(pid, os.WNOHANG)[0]:
                return
            time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def _first_call_path(crash_dir: Path, graph_folder: str) -> Path:
    return crash_dir / "first_calls" / f"{graph_folder}.py"


def save_first_call(graph: Any, args: list[Any], inductor_options: Mapping[str, Any], crash_dir: Path) -> None:
    """Write ``graph``'s post-grad graph with ``args`` (its first call's, copied) as a minifier
    repro whose expected failure is pending: a crash fills it in."""

    from minifier import current_context
    from minifier.graph import inline_subgraph_calls
    from minifier.repro import write_repro
    from minifier.search import symbolic_inputs

    from ..capture.dump import graph_folder_name

    if graph.post_grad_graph is None:
        return
    path = _first_call_path(crash_dir, graph_folder_name(graph))
    lowered = next((n for n in graph.post_grad_graph.graph.nodes if lowered_only(n)), None)
    if lowered is not None:  # its target takes Inductor IR: no script can run the graph
        path.parent.mkdir(parents=True, exist_ok=True)
        path.with_suffix(".skipped").write_text(
            f"its post-grad graph calls {getattr(lowered.target, '__module__', '?')}."
            f"{getattr(lowered.target, '__name__', lowered.target)} ({lowered.name}), which only Inductor's lowering "
            "runs (a oneDNN fusion under freezing, say): a repro of that graph could not run it\n")
        return
    size = _tensor_bytes(args)
    if size > SNAPSHOT_LIMIT:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.with_suffix(".skipped").write_text(f"its first call's arguments hold {size >> 20} MiB, over the "
                                                f"{SNAPSHOT_LIMIT >> 20} MiB kept for a crash\n")
        return
    module = inline_subgraph_calls(graph.post_grad_graph)
    dims, ints = symbolic_inputs(graph.post_grad_graph)  # a dynamic graph's repro compiles it dynamically
    context = current_context(dict(inductor_options))
    ops = _op_nodes(module)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".nodes.json").write_text(json.dumps(ops))
    nodes = sum(1 for n in module.graph.nodes if n.op not in ("placeholder", "output"))
    write_repro(module, args, spec={"level": "aten", "want": "runtime", "seed": 0, "tol": None,
                                    "config": dict(context.config), "dynamic": dims, "dynamic_ints": ints,
                                    "timeout": None},
                expected={"kind": "crash", "signature": _PENDING, "failing": []}, pattern=None, context=context,
                path=path, header={"start_nodes": nodes, "final_nodes": nodes})


def _later_call_path(crash_dir: Path, graph_folder: str) -> Path:
    return crash_dir / "later_calls" / graph_folder


def _skip_note(path: Path) -> Path:
    return path.with_name(f"{path.name}.skipped")


def _tensor_bytes(args: list[Any]) -> int:
    import torch

    return sum(a.numel() * a.element_size() if a.is_mkldnn else a.untyped_storage().nbytes()  # opaque: no storage
               for a in args if isinstance(a, torch.Tensor))


_snapshots: dict[Path, Any] = {}  # this process's CallSnapshot per graph
_noted: set[Path] = set()  # graphs whose latest later call could not be kept


def save_later_call(graph: Any, number: int, args: list[Any], crash_dir: Path) -> None:
    """Keep call ``number`` (2, 3, ...) of ``graph``'s arguments over its previous later call's
    (a :class:`~.call_snapshot.CallSnapshot`: should this call crash, it is the last one kept).
    Over :data:`SNAPSHOT_LIMIT`, or with an argument it cannot hold, a note of it replaces the
    arguments (a stale earlier call must not be taken for the one that crashed)."""
    from ..capture.dump import graph_folder_name
    from .call_snapshot import CallSnapshot, SnapshotUnsupported

    if graph.post_grad_graph is None:
        return
    path = _later_call_path(crash_dir, graph_folder_name(graph))
    snapshot = _snapshots.get(path)
    if snapshot is None:
        snapshot = _snapshots[path] = CallSnapshot(path)
    size = _tensor_bytes(args)
    why = (f"the arguments of its call {number} hold {size >> 20} MiB, over the {SNAPSHOT_LIMIT >> 20} MiB "
           "kept for a crash" if size > SNAPSHOT_LIMIT else "")
    if not why:
        try:
            snapshot.write(number, args)
        except SnapshotUnsupported as exc:
            why = f"its call {number} could not be kept: {exc}"
        except Exception as exc:  # noqa: BLE001 - a half-copied call must not be read as the one that crashed
            why = f"its call {number} could not be kept: {type(exc).__name__}: {exc}"
    if why:
        snapshot.discard()
        _skip_note(path).write_text(why + "\n")
        _noted.add(path)
    elif path in _noted:
        _skip_note(path).unlink(missing_ok=True)
        _noted.discard(path)


def _crashing_call_repro(crash_dir: Path, folder: str) -> tuple[int, Optional[Path], str]:
    """(the number of the graph's call that crashed, its repro or None, why there is none)."""
    from minifier.saved import repro_with_inputs

    from .call_snapshot import read_snapshot

    first = _first_call_path(crash_dir, folder)
    later = _later_call_path(crash_dir, folder)
    if _skip_note(later).is_file():
        return 0, None, _skip_note(later).read_text().strip()
    if not first.is_file():
        skipped = first.with_suffix(".skipped")
        return 0, None, (skipped.read_text().strip() if skipped.is_file()
                         else "the graph's first call was not saved (it ran before the diagnosis watched it)")
    kept = read_snapshot(later)
    if kept is None:
        return 1, first, ""
    number, inputs = kept
    return number, repro_with_inputs(first, inputs, later.with_name(f"{folder}.call{number}.py")), ""


def _op_nodes(module: Any) -> list[tuple[str, str]]:
    """``(name, op)`` of each call in graph order."""
    return [(n.name, str(n.target)) for n in module.graph.nodes if n.op == "call_function"]


def _renamed(path: Path, module: Any = None) -> dict[str, str]:
    """The post-grad graph's node names by the names a repro's ``make_module`` gives them
    (``module``: that of the repro at ``path``, or of a copy of it on other inputs, when made).

    Tracing the repro names a node after its op (``tanh`` comes back ``tanh_default``) and folds
    calls without tensor inputs into constants (an ``iota`` of positions, its ``unsqueeze``): each
    traced call is matched to the next post-grad call of the same op, in graph order."""
    from minifier.saved import load_repro

    names_file = path.with_suffix(".nodes.json")
    if not names_file.is_file():
        return {}
    original = [tuple(item) for item in json.loads(names_file.read_text())]
    renamed, position = {}, 0
    for traced_name, op in _op_nodes(module if module is not None else load_repro(path).make_module()):
        match = next((i for i in range(position, len(original)) if original[i][1] == op), None)
        if match is None:
            return renamed  # the rest cannot be matched with any confidence
        renamed[traced_name], position = original[match][0], match + 1
    return renamed


def minify_crash(report: CrashReport, out_dir: "str | Path", *, echo: Optional[Callable[[str], None]] = None,
                 max_seconds: Optional[float] = None) -> CrashReport:
    """Shrink the crashing graph's first-call repro to the smallest graph that dies by the same
    signal (judged in worker processes), searching for at most ``max_seconds`` (default:
    :data:`~.auto_minify.MINIFY_SECONDS`); fill ``report``'s culprit, source lines and repro.
    Every reason it cannot is said in ``report.not_narrowed``; nothing raises."""
    if not report.graph_folder:
        return report
    crash_dir, folder = crash_folder(out_dir), Path(report.graph_folder).name
    first = _first_call_path(crash_dir, folder)
    try:
        if first.is_file():
            _activate_carried_faults(first.read_text())
        number, path, why_not = _crashing_call_repro(crash_dir, folder)
    except Exception as exc:  # noqa: BLE001 - the crash report stands without it
        report.not_narrowed = f"the crashing call's repro could not be written: {type(exc).__name__}: {exc}".strip()
        return report
    if path is None:
        report.not_narrowed = why_not
        return report
    path.write_text(path.read_text().replace(repr(_PENDING), repr(f"signal {report.signal}")))
    report.crashing_call, report.call_repro = number, str(path)
    try:
        from minifier import minify_repro

        module, inputs = _loaded(path)  # once, for the names and the eager run
        renamed = _renamed(first, module)
        failure = _eager_failure(module, inputs)
        if failure is not None and number > 1 and _eager_failure(*_loaded(first)) is not None:
            report.not_narrowed = (f"the graph cannot be run eagerly, on its first call's arguments either "
                                   f"({failure[1]}): nothing to compare a candidate with")
            return report
        if failure is not None:  # the graph's own error on these arguments: nothing for a minifier to shrink
            node, report.eager_error = renamed.get(failure[0], failure[0]), failure[1]
            report.culprit_nodes = [node]
            graph = _dumped_graph(crash_dir, folder)
            if graph is not None:
                report.culprit_sources = _sources(graph, [node])
                if node in graph.nodes:
                    report.eager_error += f" (at {node}: {graph.nodes[node].target})"
            return report
        traced_name = {original: traced for traced, original in renamed.items()}
        hints = [traced_name[n] for n in report.fx_nodes if n in traced_name]
        from .auto_minify import MINIFY_SECONDS

        result = minify_repro(path, out=Path(out_dir) / "repros", hint_nodes=hints, echo=echo,
                              max_seconds=max_seconds or MINIFY_SECONDS)
    except Exception as exc:  # noqa: BLE001 - the crash report stands without it
        report.not_narrowed = f"{type(exc).__name__}: {exc}".strip()
        return report
    report.minified = result.summary().removeprefix("minifier: ")
    if not result.reproduced:
        report.not_narrowed = "the smallest graph did not crash again when re-checked"
        return report
    report.repro_path = str(result.repro_path)
    report.culprit_nodes = [renamed.get(n.name, n.name) for n in result.graph_module.graph.nodes
                            if n.op == "call_function"]
    graph = _dumped_graph(crash_dir, folder)
    if graph is not None:
        report.culprit_sources = _sources(graph, report.culprit_nodes)
    return report


def _dumped_graph(crash_dir: Path, folder: str) -> Any:
    """The dumped capture of the graph whose folder is ``folder``, or None."""
    from ..capture.dump import graph_folder_name

    return next((g for g in _dumped_graphs(crash_dir / "graphs") if graph_folder_name(g) == folder), None)


def _loaded(path: Path) -> tuple[Any, list[Any]]:
    """The graph module and the inputs of the repro at ``path``."""
    from minifier.saved import load_repro

    repro = load_repro(path)
    return repro.make_module(), repro.make_inputs()


def _eager_failure(module: Any, inputs: list[Any]) -> Optional[tuple[str, str]]:
    """``(node, error)`` where a repro's graph ``module``, run eagerly on ``inputs``, raises (the
    node named as the repro traces it), or None when eager runs it through. Eager code raises
    where a compiled kernel can only abort: an index out of range is a ``RuntimeError`` here and
    a ``SIGABRT`` from the kernel's bounds check."""
    import torch

    running = [""]

    class Tracked(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            running[0] = n.name
            return super().run_node(n)

    try:
        with torch.no_grad():
            Tracked(module).run(*inputs)
    except Exception as exc:  # noqa: BLE001 - the error is the finding
        return running[0], f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    return None


def _activate_carried_faults(repro_text: str) -> None:
    """The injected faults the crashing child had on (the repro's ``ENV``), on here too: the
    minifier carries the faults in effect in this process into its workers."""
    from minifier._carried import read_carried

    from .faults import ENV_VAR, install_from_environment

    env = dict((read_carried(repro_text) or ((), ()))[1])
    if ENV_VAR in env and not os.environ.get(ENV_VAR):
        os.environ[ENV_VAR] = env[ENV_VAR]
        install_from_environment()


def _dumped_graphs(dumps: Path) -> list[Any]:
    """The captures the child dumped (none when the dump cannot be read)."""
    from ..capture.dump import DumpError
    from ..capture.load import load

    try:
        return load(dumps).graphs if dumps.exists() else []
    except DumpError:
        return []


def _sources(graph: Any, fx_nodes: list[str]) -> list[str]:
    """``file:line: code`` of each node's source line, in order, once each."""
    sources = [graph.nodes[n].source for n in fx_nodes if n in graph.nodes and graph.nodes[n].source]
    return list(dict.fromkeys(s.cited().rstrip(": ") for s in sources))


def explain_crash(signal_number: int, fault_log: "str | Path", dumps: "str | Path") -> CrashReport:
    """Map the fault traceback's innermost frame in Inductor's output code (the ``call()`` line
    running when the signal came) to the kernel it launches, through the dumped captures."""
    text = Path(fault_log).read_text(errors="replace") if Path(fault_log).exists() else ""
    report = CrashReport(signal=_signal_name(signal_number), fault_traceback=text)
    for path, line, function in _FRAME.findall(text):  # most recent call first
        if function != "call" or not Path(path).is_file():
            continue
        code = Path(path).read_text(errors="replace")
        if "async_compile" not in code:
            continue
        report.code_path, report.line = path, int(line)
        lines = code.splitlines()
        report.statement = lines[report.line - 1].strip() if report.line <= len(lines) else ""
        _attribute(report, code, Path(dumps))
        break
    return report


def _attribute(report: CrashReport, code: str, dumps: Path) -> None:
    """Fill the kernel, FX nodes and sources from the dumped capture whose output code is ``code``."""
    from ..capture.dump import graph_folder_name

    graph = next((g for g in _dumped_graphs(dumps) if g.output_code == code), None)
    if graph is None:
        return
    report.graph = graph.label
    report.graph_folder = str(dumps / graph_folder_name(graph))
    kernel = next((k for k in graph.kernels if report.line in k.call_lines), None)  # an extern's: its own line
    if kernel is not None:
        report.kernel = kernel.name
        tagged = [line for line in kernel.lines if line.fx_nodes]
    else:
        tagged = [line for line in graph.wrapper_lines if line.number == report.line and line.fx_nodes]
    report.fx_nodes = list(dict.fromkeys(n for line in tagged for n in line.fx_nodes))
    report.sources = _sources(graph, report.fx_nodes)
