"""Warm worker processes that judge candidates, so a crash or a hang costs a candidate, not the user.

Importing torch and warming Inductor costs seconds, so workers are started once and reused
across candidates and across ``minify`` calls with the same setup. A worker that dies
(segfault, abort) is replaced and the death is reported as a ``crash`` outcome with its signal;
one that overruns its timeout is killed, replaced, and reported as ``timeout``.

On Linux, one *zygote* process per setup pays the imports
once and never runs an op; every worker is forked from it, so a second worker (judging two
candidates at once) or a replacement after a crash is ready in milliseconds. ``minify()`` called
in a process that has torch loaded forks that process itself as the zygote where it is safe
(:mod:`.caller_fork`), so even its first worker is ready in milliseconds. Elsewhere each worker is
its own ``python -m minifier.workers.child`` process.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

from .child import encode_message, read_message, send_encoded, write_message
from .thread_exits import platform_can_fork

if TYPE_CHECKING:  # this module imports no torch: the CLI starts a worker before it imports torch
    import torch

    from ..context import CarriedContext

__all__ = ["WorkerSetup", "Worker", "ForkedWorker", "Zygote", "WorkerPool", "pool", "prewarm"]

_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)
# How much of a hung worker's stacks a timeout outcome keeps: the innermost frames come first, and
# an outcome keeps only the end of a longer message (a zygote forked from the caller adds its frames).
_STACKS_KEPT = 3000


@dataclasses.dataclass(frozen=True)
class WorkerSetup:
    """What a worker needs before judging: modules to import and environment variables.

    ``warm`` says whether a new worker builds a trivial C++ kernel before it reports ready. That
    pays Inductor's and the compiler's first-use costs early, which helps a worker started ahead
    of need (:func:`prewarm`) and only delays one that is needed at once (it then pays them on its
    first candidate anyway), so ``minify`` starts its workers cold: they only compile a graph
    with no kernel to build (Inductor's lazy imports, tens of milliseconds). It is not part of a
    worker's identity: a warm worker serves a cold setup. Every worker links kernels with a
    faster linker when the machine has one (:mod:`.linker`).
    """

    imports: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    warm: bool = True
    # A worker started ahead of need (prewarm) does its imports and warm-up at the lowest CPU
    # priority, so they only take cycles the user's own compile leaves idle; on Linux the candidates
    # it judges later (and the workers a zygote forks) run at normal priority again, except the
    # speculative ones. Not part of its identity either.
    low_priority: bool = dataclasses.field(default=False, compare=False)

    @classmethod
    def for_context(cls, context: CarriedContext, *, warm: bool = True) -> "WorkerSetup":
        """The setup that carries ``context`` (its imports and environment) into a worker."""
        return cls(imports=context.imports, env=context.env, warm=warm)

    @property
    def key(self) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
        """What makes two setups need different workers."""
        return self.imports, self.env


def _signal_name(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"


def _spawn(setup: WorkerSetup, control: Optional[socket.socket] = None) -> tuple[subprocess.Popen, Any]:
    """Start ``python -m minifier.workers.child`` for ``setup`` (a zygote when given a ``control`` socket)."""
    env = dict(os.environ)
    env.update(dict(setup.env))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
    log = tempfile.TemporaryFile(prefix="minifier-worker-", suffix=".log")  # nameless: nothing left behind
    fds = (control.fileno(),) if control is not None else ()
    # The package imports .child before ``-m`` runs it as __main__; runpy warns about that in every log.
    quiet = "ignore:'minifier.workers.child' found in sys.modules:RuntimeWarning"
    process = subprocess.Popen([sys.executable, "-W", quiet, "-m", "minifier.workers.child"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=log, env=env, pass_fds=fds)
    write_message(process.stdin, {"imports": list(setup.imports), "path": list(sys.path), "warm": setup.warm,
                                  "control": fds[0] if fds else None, "nice": 19 if setup.low_priority else 0})
    return process, log


def _read_within(replies: Any, timeout: Optional[float]) -> Optional[Any]:
    """The next message on ``replies``, ``None`` when its writer died, or raise TimeoutError."""
    ready, _, _ = select.select([replies], [], [], timeout)
    if not ready:
        raise TimeoutError
    return read_message(replies)


def _log_size(log: Any) -> int:
    return os.fstat(log.fileno()).st_size


def _read_log(log: Any, start: int, size: int) -> str:
    """``size`` bytes of a worker's log from byte ``start`` (the worker writes it; we only read)."""
    return os.pread(log.fileno(), size, start).decode(errors="replace")


def _read_log_tail(log: Any, chars: int) -> str:
    try:
        return _read_log(log, max(0, _log_size(log) - chars), chars)
    except (OSError, ValueError):  # ValueError: the log was closed
        return ""


class ForkUnavailable(RuntimeError):
    """The zygote cannot fork safely here (it has threads); the pool spawns workers instead."""


class _Judging:
    """What every worker does: wait until ready, judge a candidate, turn a death or an overrun
    into a ``crash`` or ``timeout`` outcome. Subclasses say where the streams come from."""

    setup: WorkerSetup
    discarded: bool = False

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.ready = False
        self.startup_seconds = 0.0
        self.setup_nice: Optional[int] = None  # the CPU niceness its imports and warm-up ran at
        self._busy = threading.Lock()  # one candidate at a time per worker, whichever thread asks

    # -- supplied by subclasses
    def _streams(self, timeout: float) -> tuple[Any, Any]:
        raise NotImplementedError

    def _exit_code(self) -> int:
        raise NotImplementedError

    def alive(self) -> bool:
        raise NotImplementedError

    def kill(self) -> None:
        raise NotImplementedError

    def log_tail(self, chars: int = 2000) -> str:
        raise NotImplementedError

    def _log(self) -> Any:
        raise NotImplementedError

    def _signal(self, number: int) -> None:
        raise NotImplementedError

    # -- shared
    def stacks(self, settle: float = 2.0) -> str:
        """Every thread's Python stack in this (hung) worker, as it writes them on ``SIGUSR1``;
        empty where that cannot be had. Waits up to ``settle`` seconds for the dump to finish."""
        if not hasattr(signal, "SIGUSR1"):
            return ""
        log = self._log()
        try:
            before = _log_size(log)
            self._signal(signal.SIGUSR1)
            size, deadline = before, time.monotonic() + settle
            while time.monotonic() < deadline:
                time.sleep(0.1)
                now = _log_size(log)
                if now > before and now == size:  # written, and no longer growing
                    break
                size = now
            return _read_log(log, before, 20000).strip()
        except (OSError, ValueError):
            return ""

    def wait_ready(self, timeout: float = 600.0) -> None:
        if self.ready:
            return
        _, replies = self._streams(timeout)
        reply = _read_within(replies, timeout)
        if reply is None:
            raise RuntimeError(
                f"minifier worker failed to start ({_signal_name(self._exit_code())}): {self.log_tail()}"
            )
        self.ready = True
        self.startup_seconds = time.perf_counter() - self.started
        self.setup_nice = reply.get("setup_nice")

    def judge(
        self, module: torch.nn.Module, inputs: Sequence[Any], spec: dict[str, Any], timeout: float
    ) -> dict[str, Any]:
        """Judge one candidate here; a death or an overrun becomes a crash or timeout outcome."""
        from ..judge import CRASH, TIMEOUT, outcome

        try:  # before anything is written: a request that cannot be sent is not a crash
            request = encode_message({"module": module, "inputs": list(inputs), "spec": spec})
        except Exception as exc:
            raise TypeError(f"minifier: this candidate cannot be sent to a worker process ({exc!r}); "
                            "judge in process with isolate=False") from exc
        with self._busy:
            self.wait_ready()
            start = time.perf_counter()
            requests, replies = self._streams(timeout)
            try:
                send_encoded(requests, request)
                reply = _read_within(replies, timeout)
            except TimeoutError:
                stacks = self.stacks()
                self.kill()
                return outcome(TIMEOUT, "timeout", f"no answer within {timeout:.0f} s; worker killed"
                               + (f"; where it was:\n{stacks[:_STACKS_KEPT]}" if stacks else ""),
                               seconds=time.perf_counter() - start)
            except (BrokenPipeError, EOFError, ValueError):  # the worker died (or was discarded) meanwhile
                reply = None
            if reply is None:
                code = self._exit_code()
                tail = self.log_tail()
                return outcome(CRASH, _signal_name(code), f"worker died ({_signal_name(code)})\n{tail}",
                               seconds=time.perf_counter() - start)
            return reply


class Worker(_Judging):
    """One judging subprocess of its own (where the platform cannot fork, or when asked)."""

    def __init__(self, setup: WorkerSetup) -> None:
        super().__init__()
        self.setup = setup
        self.process, self.log = _spawn(setup)

    def _streams(self, timeout: float) -> tuple[Any, Any]:
        return self.process.stdin, self.process.stdout

    def _exit_code(self) -> int:
        return self.process.wait()

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, chars: int = 2000) -> str:
        return _read_log_tail(self.log, chars)

    def _log(self) -> Any:
        return self.log

    def _signal(self, number: int) -> None:
        if self.alive():
            self.process.send_signal(number)

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
            self.process.wait()

    def close(self, wait: bool = True) -> None:
        """End the worker: it exits when its input closes. ``wait=False`` does not wait for its
        teardown (about a second of torch shutting down), for when this process is exiting too."""
        try:
            if self.alive():
                self.process.stdin.close()
                if wait:
                    self.process.wait(timeout=5)
        except Exception:  # noqa: BLE001
            self.kill()
        self.log.close()


class Zygote:
    """A process with torch, the setup's imports and Inductor loaded that forks workers on request.

    It never runs an op (OpenMP state does not survive a fork), so every worker it forks starts
    from the same clean, warm state in milliseconds. ``from_caller``: fork this process as the
    zygote (raises :class:`~.caller_fork.CallerNotForkable` where that is not safe) instead of
    spawning one that imports everything afresh.
    """

    def __init__(self, setup: WorkerSetup, *, from_caller: bool = False) -> None:
        self.setup = setup
        self.from_caller = from_caller
        self.process: Any
        if from_caller:
            from .caller_fork import fork_zygote

            self.process, self._control, self.log = fork_zygote(setup.imports, dict(setup.env))
        else:
            self._control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self.process, self.log = _spawn(setup, control=theirs)
            finally:
                theirs.close()
        self._lock = threading.Lock()
        self.ready = False
        self.setup_nice: Optional[int] = None  # the CPU niceness its imports and warm-up ran at
        self.can_fork = True

    def alive(self) -> bool:
        return self.process.poll() is None

    def wait_ready(self, timeout: float = 600.0) -> None:
        with self._lock:
            if self.ready:
                return
            try:
                reply = _read_within(self.process.stdout, timeout)
            except TimeoutError:
                self.process.kill()
                reply = None
            if reply is None:
                code = self.process.wait()
                raise RuntimeError(f"minifier worker failed to start ({_signal_name(code)}): {self.log_tail()}")
            if not reply.get("ready", True):  # a copy of the caller that found it cannot serve
                self.can_fork = False
                self.process.wait()
                raise ForkUnavailable(f"the minifier's zygote cannot serve: {reply.get('reason')}")
            self.ready = True
            self.setup_nice = reply.get("setup_nice")

    def _ask(self, op: bytes, argument: int = 0, fds: Sequence[int] = ()) -> int:
        message = op + struct.pack("<q", argument)
        if fds:
            socket.send_fds(self._control, [message], list(fds))
        else:
            self._control.sendall(message)
        answer = b""
        while len(answer) < 8:
            more = self._control.recv(8 - len(answer))
            if not more:
                raise RuntimeError(f"minifier: the worker zygote died ({_signal_name(self.process.wait())}): "
                                   f"{self.log_tail()}")
            answer += more
        return struct.unpack("<q", answer)[0]

    def fork(self, timeout: float = 600.0) -> tuple[int, Any, Any]:
        """A new worker: ``(pid, its request stream, its reply stream)``."""
        self.wait_ready(timeout)
        request_read, request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        try:
            with self._lock:
                pid = self._ask(b"F", 0, (request_read, reply_write))
        except BaseException:
            for fd in (request_write, reply_read):
                os.close(fd)
            raise
        finally:
            os.close(request_read)
            os.close(reply_write)
        if pid < 0:
            os.close(request_write)
            os.close(reply_read)
            raise ForkUnavailable("the minifier's zygote cannot fork safely (threads are running in it)")
        return pid, os.fdopen(request_write, "wb"), os.fdopen(reply_read, "rb")

    def exit_code(self, pid: int) -> int:
        """Wait for worker ``pid`` to end; its exit code (``-signal`` when killed by one)."""
        try:
            with self._lock:
                return self._ask(b"R", pid)
        except (OSError, RuntimeError):
            return 0

    def log_tail(self, chars: int = 2000) -> str:
        return _read_log_tail(self.log, chars)

    def close(self, wait: bool = True) -> None:
        """The zygote exits when its control socket closes; its workers live on until closed."""
        try:
            self._control.close()
            if self.process.stdin is not None:
                self.process.stdin.close()
            if wait:
                self.process.wait(timeout=5)
        except Exception:  # noqa: BLE001
            self.process.kill()
        self.log.close()


class ForkedWorker(_Judging):
    """A worker forked from a :class:`Zygote`; the fork happens when it is first needed. If the
    zygote refuses to fork, this worker is a spawned :class:`Worker` underneath."""

    def __init__(self, setup: WorkerSetup, zygote: Zygote) -> None:
        super().__init__()
        self.setup, self.zygote = setup, zygote
        self.pid: Optional[int] = None
        self._requests: Any = None
        self._replies: Any = None
        self._dead = False
        self._spawned: Optional[Worker] = None

    def _streams(self, timeout: float) -> tuple[Any, Any]:
        if self._spawned is not None:
            return self._spawned._streams(timeout)
        if self._requests is None:
            if self._dead:
                raise EOFError
            try:
                self.pid, self._requests, self._replies = self.zygote.fork(timeout)
            except ForkUnavailable:
                self.zygote.can_fork = False  # the pool spawns from now on
                self._spawned = Worker(self.setup)
                return self._spawned._streams(timeout)
        return self._requests, self._replies

    def _exit_code(self) -> int:
        if self._spawned is not None:
            return self._spawned._exit_code()
        self._dead = True
        return self.zygote.exit_code(self.pid) if self.pid is not None else 0

    def alive(self) -> bool:
        if self._spawned is not None:
            return self._spawned.alive()
        if self._dead:
            return False
        return self.pid is not None or self.zygote.alive()

    def log_tail(self, chars: int = 2000) -> str:
        return (self._spawned or self.zygote).log_tail(chars)

    def _log(self) -> Any:
        return (self._spawned or self.zygote).log  # a forked worker writes to its zygote's log

    def _signal(self, number: int) -> None:
        if self._spawned is not None:
            self._spawned._signal(number)
        elif self.pid is not None and not self._dead:
            os.kill(self.pid, number)

    def kill(self) -> None:
        if self._spawned is not None:
            self._spawned.kill()
        elif self.pid is not None and not self._dead:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
            self._exit_code()
        self._dead = True

    def close(self, wait: bool = True) -> None:
        """The worker exits when its requests end; ``wait`` waits until it has."""
        if self._spawned is not None:
            self._spawned.close(wait)
        elif self._requests is not None and not self._dead:
            try:
                self._requests.close()
                if wait:
                    self._exit_code()
            except Exception:  # noqa: BLE001
                self.kill()
        self._dead = True


class WorkerPool:
    """Keeps warm workers per setup (``slot`` numbers them, for judging candidates side by side)
    and replaces a dead one in the background. ``fork=False`` spawns every worker afresh."""

    def __init__(self, fork: Optional[bool] = None) -> None:
        self._lock = threading.Lock()
        self._workers: dict[tuple[Any, ...], _Judging] = {}
        self._zygotes: dict[tuple[Any, ...], Zygote] = {}
        self.forking = platform_can_fork() if fork is None else fork
        self.crashes = 0
        self.caller_fork_refusal: Optional[str] = None  # why the last zygote was spawned, not forked from here

    def _new_zygote(self, setup: WorkerSetup, fork_caller: bool) -> Zygote:
        if fork_caller:
            from .caller_fork import CallerNotForkable

            try:
                return Zygote(setup, from_caller=True)
            except CallerNotForkable as exc:
                self.caller_fork_refusal = str(exc)
        return Zygote(setup)

    def _start(self, setup: WorkerSetup, fork_caller: bool = False) -> _Judging:
        zygote = self._zygotes.get(setup.key)
        if zygote is not None and not zygote.can_fork:
            if zygote.from_caller:  # a copy of this process that could not serve: spawn one instead
                zygote.close(wait=False)
                zygote = self._zygotes[setup.key] = Zygote(setup)
            else:
                self.forking = False
        if not self.forking:
            return Worker(setup)
        if zygote is None or not zygote.alive():
            zygote = self._zygotes[setup.key] = self._new_zygote(setup, fork_caller)
        return ForkedWorker(setup, zygote)

    def get(self, setup: WorkerSetup, slot: int = 0, *, fork_caller: bool = False) -> _Judging:
        """The worker numbered ``slot`` for ``setup``, started (not waited for) when there is none;
        workers and zygotes of other setups are closed. ``fork_caller``: a zygote this needs is
        forked from this process where that is safe (:mod:`.caller_fork`; ``caller_fork_refusal``
        then says why it was spawned instead)."""
        with self._lock:
            for other in [k for k in self._workers if k[0] != setup.key]:
                self._workers.pop(other).close(wait=False)  # it exits once its imports end; do not wait
            for other in [k for k in self._zygotes if k != setup.key]:
                self._zygotes.pop(other).close(wait=False)
            worker = self._workers.get((setup.key, slot))
            if worker is None or not worker.alive():
                if worker is not None:
                    worker.close()
                worker = self._workers[(setup.key, slot)] = self._start(setup, fork_caller)
            return worker

    def has(self, setup: WorkerSetup) -> bool:
        """Whether a live worker or zygote for ``setup`` is already kept."""
        with self._lock:
            return (any(key[0] == setup.key and worker.alive() for key, worker in self._workers.items())
                    or any(key == setup.key and zygote.alive() for key, zygote in self._zygotes.items()))

    def close(self, setup: WorkerSetup) -> None:
        """Close ``setup``'s workers and zygote without waiting (others are left as they are)."""
        with self._lock:
            workers = [self._workers.pop(key) for key in [k for k in self._workers if k[0] == setup.key]]
            zygote = self._zygotes.pop(setup.key, None)
        for worker in workers:
            worker.close(wait=False)
        if zygote is not None:
            zygote.close(wait=False)

    def discard(self, setup: WorkerSetup, slot: int) -> None:
        """Kill the worker in ``slot`` (its candidate is no longer wanted); not counted as a crash."""
        with self._lock:
            worker = self._workers.pop((setup.key, slot), None)
        if worker is not None:
            worker.discarded = True
            worker.kill()

    def judge(self, setup: WorkerSetup, module: torch.nn.Module, inputs: Sequence[Any], spec: dict[str, Any],
              timeout: float, slot: int = 0) -> dict[str, Any]:
        from ..judge import CRASH, INVALID, TIMEOUT, UNLOADABLE

        worker = self.get(setup, slot)
        result = worker.judge(module, inputs, spec, timeout)
        if result["kind"] in (CRASH, TIMEOUT) and not worker.discarded:
            with self._lock:
                self.crashes += 1
            self.get(setup, slot)  # start the replacement now: it warms while the caller carries on
        elif result["kind"] == INVALID and result.get("signature", "").endswith(UNLOADABLE):
            # A failed re-trace ran part of the graph's code on proxies, which can leave global state
            # changed (a torch.func transform's nesting level): that worker judges nothing more.
            self.discard(setup, slot)
        return result

    def shutdown(self, wait: bool = True) -> None:
        with self._lock:
            for worker in self._workers.values():
                worker.close(wait=wait)
            self._workers.clear()
            for zygote in self._zygotes.values():
                zygote.close(wait=wait)
            self._zygotes.clear()


pool = WorkerPool()
atexit.register(pool.shutdown, wait=False)  # workers see their input close and exit on their own


def prewarm(setup: WorkerSetup = WorkerSetup(), *, fork_caller: bool = False) -> "_Judging":
    """Start (or keep) the worker for ``setup`` now, so the first candidate does not wait for it.

    A worker started here runs at the lowest CPU priority: it must not slow the compile it
    overlaps, and it only matters if that compile fails. ``fork_caller``: its zygote is a fork of
    this process where that is safe (no imports to pay; see :meth:`WorkerPool.get`)."""
    return pool.get(dataclasses.replace(setup, low_priority=True), fork_caller=fork_caller)
