"""A warm judging process: ``python -m minifier.workers.child`` (started by :mod:`minifier.workers.parent`).

Protocol on stdin/stdout: length-prefixed pickles. The first message is the setup
(``{"imports": [...], "path": [...], "warm": bool, "control": fd or None}``); the process adds the
caller's ``sys.path`` entries to its own (so it imports what the caller can), imports torch, those
modules and Inductor's compile path (detecting the CPU's vector ISA meanwhile), warms Inductor
when asked and answers ``{"ready": ...}``.

Without ``control`` it then judges one candidate per message (``{"module", "inputs", "spec"}``)
until stdin closes. With ``control`` (a Unix socket) it is a *zygote*: it never runs an op (a
process that has run OpenMP code cannot fork safely) and forks judging workers on request, each
a copy of its warm state that starts in milliseconds instead of seconds. On the socket, requests
are 9 bytes (an op byte and a signed 64-bit argument), answers 8 bytes:

- ``F`` with two file descriptors attached (requests, replies): fork a worker serving them; answers its
  pid, or -1 while a thread it started still runs (:mod:`.thread_exits`: forking then is unsafe);
- ``R`` pid: wait for that worker to end; answers its exit code (``-signal`` when a signal killed it).

Anything the compiler or the graph prints goes to stderr (a log file the parent reads when a
worker dies). ``SIGUSR1`` writes every thread's Python stack there (the parent sends it to a
worker that overran its timeout, before killing it, so the outcome says where it hung).
"""

from __future__ import annotations

import faulthandler
import gc
import importlib
import os
import pickle
import signal
import socket
import struct
import sys
import threading
import time
from typing import Any, BinaryIO, Callable, Optional

from minifier.workers.thread_exits import started_threads_ended, track_thread_starts


def read_frame(stream: BinaryIO) -> Optional[bytes]:
    """One length-prefixed message's bytes, or None when the stream ended."""
    header = stream.read(8)
    if len(header) < 8:
        return None
    (size,) = struct.unpack("<Q", header)
    payload = stream.read(size)
    if len(payload) < size:
        return None
    return payload


def read_message(stream: BinaryIO) -> Optional[Any]:
    payload = read_frame(stream)
    return None if payload is None else pickle.loads(payload)


def encode_message(message: Any) -> bytes:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return struct.pack("<Q", len(payload)) + payload


def send_encoded(stream: BinaryIO, encoded: bytes) -> None:
    stream.write(encoded)
    stream.flush()


def write_message(stream: BinaryIO, message: Any) -> None:
    send_encoded(stream, encode_message(message))


def _warm(judge: Any, *, run: bool, build: bool) -> None:
    """Pay Inductor's first-compile costs now. ``build``: compile a graph with a C++ kernel (the
    compiler's first-use costs too, about a second); else a graph of one library call (tens of
    milliseconds, no kernel to build: Inductor's lazy imports and wrapper code generation).
    ``run=False`` (a zygote) compiles without running and without Inductor's compile threads: a
    process that has run OpenMP code or started threads must not fork."""
    import torch

    from minifier._seams import compile_without_threads

    class Tiny(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
            if build:
                return (torch.ops.aten.add.Tensor(x, 1),)
            return (torch.ops.aten.mm.default(x, x),)

    gm = torch.fx.symbolic_trace(Tiny())
    example = [torch.zeros(4, 4)]
    if run:
        judge(gm, example, {"level": "aten", "want": "compile"})
    else:
        compile_without_threads(gm, example)


def serve(requests: BinaryIO, replies: BinaryIO) -> int:
    """Judge one candidate per request until the requests end."""
    from minifier.judge import INVALID, UNLOADABLE, judge, outcome

    while True:
        payload = read_frame(requests)
        if payload is None:
            return 0
        try:
            request = pickle.loads(payload)
        except Exception as exc:  # noqa: BLE001 - code FX cannot re-trace, a class it cannot import: say so
            write_message(replies, outcome(INVALID, f"{type(exc).__name__}: {UNLOADABLE}",
                                           f"{type(exc).__name__}: {exc}"))
            continue
        if request["spec"].get("nice") and hasattr(os, "setpriority"):  # speculative: only idle cycles, from now on
            os.setpriority(os.PRIO_PROCESS, 0, max(os.getpriority(os.PRIO_PROCESS, 0), request["spec"]["nice"]))
        try:
            result = judge(request["module"], request["inputs"], request["spec"])
        except BaseException as exc:  # noqa: BLE001 - report, keep serving
            result = outcome(INVALID, f"{type(exc).__name__}: judging failed", repr(exc))
        write_message(replies, result)


def _recv_exactly(control: socket.socket, size: int) -> tuple[bytes, list[int]]:
    data, fds, _, _ = socket.recv_fds(control, size, 2)
    while data and len(data) < size:
        more = control.recv(size - len(data))
        if not more:
            return b"", fds
        data += more
    return data, fds


def own_progress_bar_locks() -> None:
    """Give this freshly forked worker tqdm write locks of its own.

    tqdm's write lock (taken by every progress bar's constructor, even a disabled one: FX's
    ``Interpreter.run`` makes one per run, so every compile takes it) holds a multiprocessing
    lock, a semaphore shared with every process forked from the one that made it. A sibling
    worker killed while holding it (a discarded speculative judgement) left it taken for every
    later worker of the zygote: each then hung in its first compile until its judgement timed
    out. The copy's thread lock is replaced too (a zygote thread may have held it at the fork).
    """
    std = sys.modules.get("tqdm.std")
    if std is None:
        return
    lock_class = std.TqdmDefaultWriteLock
    lock_class.th_lock = threading.RLock()
    lock_class.mp_lock = None  # a worker never shares a progress bar with another process
    std.tqdm.set_lock(lock_class())


def serve_forks(control: socket.socket, closing: list[int]) -> int:
    """The zygote's loop: fork a worker per ``F``, report exit codes per ``R``, end at EOF.

    ``closing`` are this process's own descriptors a forked worker must not keep.
    """
    finished: dict[int, int] = {}

    def reap(block_for: Optional[int] = None) -> None:
        while True:
            try:
                pid, status = os.waitpid(block_for or -1, 0 if block_for else os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            finished[pid] = os.waitstatus_to_exitcode(status)
            if block_for:
                return

    while True:
        data, fds = _recv_exactly(control, 9)
        if len(data) < 9:
            return 0
        op, argument = data[:1], struct.unpack("<q", data[1:])[0]
        reap()
        if op == b"F" and len(fds) == 2 and started_threads_ended(within=5.0):
            pid = os.fork()
            if pid == 0:  # the new worker
                code = 1
                try:
                    control.close()
                    for fd in closing:
                        os.close(fd)
                    own_progress_bar_locks()
                    requests, replies = os.fdopen(fds[0], "rb"), os.fdopen(fds[1], "wb")
                    write_message(replies, {"ready": True, "seconds": 0.0, "pid": os.getpid()})
                    code = serve(requests, replies)
                    replies.close()
                finally:
                    sys.stderr.flush()
                    os._exit(code)
            for fd in fds:
                os.close(fd)
            control.sendall(struct.pack("<q", pid))
        elif op == b"R":
            if argument not in finished:
                reap(block_for=argument)
            control.sendall(struct.pack("<q", finished.pop(argument, 0)))
        else:
            for fd in fds:
                os.close(fd)
            control.sendall(struct.pack("<q", -1))


def prepare(setup: dict[str, Any], control: Optional[int]) -> int:
    """Import torch, the setup's modules and Inductor's compile path, detect the CPU's vector ISA
    and warm Inductor; returns the CPU niceness this ran at."""
    from minifier.workers.linker import use_fast_linker

    linker = threading.Thread(target=use_fast_linker, name="minifier-linker-check", daemon=True)
    linker.start()  # a compiler call of its own: it runs while torch imports
    from minifier._seams import keep_fork_safe, start_cpu_isa_probe

    if control is not None:
        keep_fork_safe()

    probe = start_cpu_isa_probe(remember=True)  # its child processes run while the imports below do
    sys.path.extend(entry for entry in setup.get("path", []) if entry not in sys.path)  # the caller's modules
    for name in setup.get("imports", []):
        importlib.import_module(name)
    from minifier._seams import import_compiler

    import_compiler()  # the first candidate's compile needs it

    from minifier.judge import judge

    if probe is not None:
        probe.join()
    linker.join()

    try:  # a worker needed at once only gets the light warm-up: its first candidate builds anyway
        _warm(judge, run=control is None, build=setup.get("warm", True))
    except Exception as exc:  # noqa: BLE001 - a cold worker still works
        print(f"minifier worker: warm-up failed: {exc!r}", file=sys.stderr)
    return os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else 0


def _niced(nice: int, work: Callable[[], int]) -> int:
    """Run ``work`` at CPU niceness ``nice`` (a process started ahead of need takes only idle
    cycles for its imports and warm-up) without lowering the priority of what comes after it.

    On Linux niceness is per thread, and a thread or process without privileges cannot raise its
    priority again: ``work`` runs on a thread of its own, niced, while this thread waits at its
    own priority, which the workers a zygote forks from it and the candidates a worker judges on
    it keep. Elsewhere the whole process is niced.
    """
    if not nice:
        return work()
    if not sys.platform.startswith("linux"):
        os.nice(nice)
        return work()
    outcome: list[Any] = []

    def run() -> None:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
        except OSError:
            pass  # not niced: still prepared
        try:
            outcome.append(work())
        except BaseException as exc:  # noqa: BLE001 - raised again on the waiting thread
            outcome.append(exc)

    thread = threading.Thread(target=run, name="minifier-setup")
    thread.start()
    thread.join()  # a zygote forks only once every thread but this one has ended
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def main() -> int:
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints (compilers, graphs) must not corrupt the protocol
    if hasattr(signal, "SIGUSR1"):  # forked workers inherit it
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    requests = sys.stdin.buffer
    setup = read_message(requests) or {}
    control = setup.get("control")
    if control is not None:
        track_thread_starts()  # a zygote forks only once every thread it started has ended natively
    start = time.perf_counter()
    setup_nice = _niced(int(setup.get("nice") or 0), lambda: prepare(setup, control))
    if control is not None:
        started_threads_ended(within=30.0)  # the setup's threads finish ending before a fork is asked for
    write_message(replies, {"ready": True, "seconds": time.perf_counter() - start, "pid": os.getpid(),
                            "setup_nice": setup_nice})
    if control is None:
        return serve(requests, replies)
    gc.freeze()  # workers share the zygote's objects: keep the collector from writing to (copying) them
    code = serve_forks(socket.socket(fileno=control), closing=[0, replies.fileno()])
    sys.stderr.flush()
    os._exit(code)  # nothing to tear down: the zygote never ran an op


if __name__ == "__main__":
    sys.exit(main())
