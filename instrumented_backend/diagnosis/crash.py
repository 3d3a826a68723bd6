"""A diagnosis that survives compiled code killing the process (a kernel that segfaults).

:func:`run_surviving_crashes` runs the diagnosis in a forked child (Linux) that dumps every graph
it compiles before running it (``INSTRUMENTED_BACKEND_DUMP_DIR``) and has Python's fault handler
write the traceback on a fatal signal. When the child dies by a signal, :func:`explain_crash`
reads that traceback: its innermost frame in Inductor's output code is the ``call()`` line that
launched the crashing kernel, and the dumped capture of that code maps the line to the kernel, its
FX nodes and the user's source lines.
"""

from __future__ import annotations

import faulthandler
import os
import re
import shutil
import signal
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from ..capture.options import DUMP_DIR_ENV

__all__ = ["CrashReport", "run_surviving_crashes", "explain_crash"]

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
            lines.append(f"  the graph, runnable: {self.graph_folder}/fx_graph_runnable.py (the minifier judges "
                         "candidates in worker processes: minify(gm, inputs, check=RuntimeFailure()) survives it)")
        return "\n".join(lines)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def run_surviving_crashes(work: Callable[[], int], out_dir: "str | Path") -> tuple[int, Optional[CrashReport]]:
    """``work()``'s exit status, run in a forked child on Linux; ``(1, report)`` when the child
    died by a signal. Elsewhere ``work`` runs here and a crash ends this process."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return work(), None
    crash_dir = Path(out_dir) / "crash"
    shutil.rmtree(crash_dir, ignore_errors=True)
    crash_dir.mkdir(parents=True)
    fault_log, dumps = crash_dir / "fault_traceback.txt", crash_dir / "graphs"
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: the whole diagnosis
        code = 1
        try:
            faulthandler.enable(file=fault_log.open("w"), all_threads=False)
            os.environ[DUMP_DIR_ENV] = str(dumps)
            code = work()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001 - reported as the in-process run would
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        shutil.rmtree(crash_dir, ignore_errors=True)
        return code, None
    return 1, explain_crash(-code, fault_log, dumps)


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
    from ..io.dump import DumpError, graph_folder_name
    from ..io.load import load

    try:
        graphs = load(dumps).graphs if dumps.exists() else []
    except DumpError:
        return
    graph = next((g for g in graphs if g.output_code == code), None)
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
    sources = [graph.nodes[n].source for n in report.fx_nodes if n in graph.nodes and graph.nodes[n].source]
    report.sources = list(dict.fromkeys(f"{s}: {s.code}".rstrip(": ") for s in sources))
