"""A workers' zygote forked from the calling process itself, where that is safe.

``minify()`` called in a process that has torch and Inductor imported would otherwise wait for a
fresh zygote to import them (5-7 s on a 2-core machine) before its first candidate. A fork of
the caller is a zygote with all of that loaded, in milliseconds. A fork copies only the calling
thread, so the caller is forked only when nothing it needs can be held by a thread the copy lacks:

- no accelerator context (CUDA cannot be used after a fork), no compile trace in progress, no
  torch function or dispatch mode active; grad mode, inference mode, autocast and the default
  dtype the copy sets as a fresh process has them, so candidates are judged as a spawned worker
  judges them whatever the caller set around its call;
- every other Python thread is one known to hold nothing while idle: Inductor's compile thread
  pool with no queued work (the copy drops it and starts its own) and tqdm's monitor (stopped
  here; tqdm starts it again for its next progress bar). Any other thread: no fork;
- OpenMP's thread pool is shut down first (``omp_pause_resource_all``): its threads would be
  missing in the copy, whose first parallel region would wait for them forever. The fork waits
  until the kernel has dropped the threads that ended (their thread-local destructors take MKL's
  locks: see :mod:`.thread_exits`).

The copy then checks itself before it reports ready: a child of it runs a matrix multiply and a
parallel op within a time bound. If that hangs (a lock copied while held), the zygote reports it
cannot serve and the pool spawns workers instead. Its descriptors other than its own are pointed
at ``/dev/null``, so a pipe of the caller's (another worker's, the caller's own output) sees its
end when the caller closes it. ``MINIFIER_FORK_CALLER=0`` turns this off.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import faulthandler
import gc
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types
import warnings
from typing import Any, BinaryIO, NoReturn, Optional, Sequence

from .child import prepare, serve_forks, write_message
from .thread_exits import kernel_threads, platform_can_fork, started_threads_ended, track_thread_starts

__all__ = ["CallerNotForkable", "ForkedProcess", "fork_zygote", "refusal"]

OMP_PAUSE_HARD = 2  # omp_pause_resource_t: the runtime frees its threads
_OPENMP_RUNTIMES = ("libgomp", "libiomp", "libomp")


class CallerNotForkable(RuntimeError):
    """The calling process cannot be forked safely now (the message says why)."""


@dataclasses.dataclass
class ForkedProcess:
    """A child this process forked, with the part of ``subprocess.Popen``'s interface a zygote uses."""

    pid: int
    stdout: Optional[BinaryIO] = None  # a zygote's ready message arrives here
    stdin: Optional[BinaryIO] = None
    returncode: Optional[int] = None

    def poll(self) -> Optional[int]:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped by someone else: it has ended
                self.returncode = 0
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
            time.sleep(0.005)
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, number: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, number)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


_forked: list[ForkedProcess] = []  # copies made here: reaped once they end, as Popen reaps its children


def _reap_ended() -> None:
    """Collect the exit status of copies closed without waiting, so none stays a zombie."""
    _forked[:] = [child for child in _forked if child.poll() is None]


def _state_refusal() -> Optional[str]:
    """Why this process's state keeps it from being forked, or None."""
    import torch

    from minifier._seams import inside_compile

    if os.environ.get("MINIFIER_FORK_CALLER", "1") == "0":
        return "MINIFIER_FORK_CALLER=0"
    if not platform_can_fork():
        return "this platform does not fork safely"
    for name in ("cuda", "xpu", "mtia"):
        initialized = getattr(getattr(torch, name, None), "is_initialized", None)
        if initialized is not None and initialized():
            return f"torch.{name} is initialized (its context cannot be used in a forked copy)"
    if inside_compile():
        return "a torch.compile trace is in progress"
    if torch._C._len_torch_function_stack() or torch._C._len_torch_dispatch_stack():
        return "a torch function or dispatch mode is active here (a fresh worker judges without one)"
    return None  # grad mode, inference mode, autocast, the default dtype: the copy resets them


def _as_in_a_fresh_process() -> list[Any]:
    """Give this copy's one thread the torch state a fresh worker has, whatever the caller had
    set around its ``minify()`` call: grad mode on, inference mode and autocast off, float32 as
    the default dtype. Returns the guards that must stay alive for as long as the copy does."""
    import torch

    kept: list[Any] = []
    torch.set_grad_enabled(True)
    if torch.is_inference_mode_enabled():
        guard = torch.inference_mode(False)
        guard.__enter__()  # never left: the copy ends without returning
        kept.append(guard)
    for device in ("cpu", "cuda"):
        if torch.is_autocast_enabled(device):
            torch.set_autocast_enabled(device, False)
    torch.set_default_dtype(torch.float32)
    return kept


def _tqdm_monitors(threads: Sequence[threading.Thread]) -> list[threading.Thread]:
    return [t for t in threads if type(t).__module__.startswith("tqdm") and hasattr(t, "exit")]


def _thread_refusal() -> Optional[str]:
    """Why another thread running Python keeps this process from being forked, or None. Every
    thread with a Python frame counts, also those started through ``_thread`` (execnet's, for one),
    which :func:`threading.enumerate` does not list."""
    from minifier._seams import idle_compile_pool_threads

    frames = sys._current_frames()
    others = set(frames) - {threading.get_ident()}
    if not others:
        return None
    pool_threads = idle_compile_pool_threads()
    if pool_threads is None:
        return "Inductor's compile thread pool has work queued"
    threads = threading.enumerate()
    known = pool_threads | {t.ident for t in _tqdm_monitors(threads)}
    unknown = others - known
    if not unknown:
        return None
    named = {t.ident: t.name for t in threads}
    described = sorted(named.get(ident) or f"{os.path.basename(frames[ident].f_code.co_filename)}:"
                       f"{frames[ident].f_code.co_name}" for ident in unknown)
    return f"other threads run here ({', '.join(described[:4])})"


def refusal() -> Optional[str]:
    """Why the calling process cannot be forked as a zygote now, or None when it can. Changes nothing."""
    return _state_refusal() or _thread_refusal()


def _openmp_runtimes() -> list[str]:
    """Paths of the OpenMP runtimes loaded in this process."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "/" in line}
    except OSError:
        return []
    return sorted(p for p in paths if os.path.basename(p).startswith(_OPENMP_RUNTIMES) and ".so" in p)


def _pause_openmp() -> None:
    """Shut down the calling thread's OpenMP thread pool (the runtime starts a new one when needed)."""
    for path in _openmp_runtimes():
        try:
            runtime = ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 0))
            pause = runtime.omp_pause_resource_all
        except (OSError, AttributeError) as exc:
            raise CallerNotForkable(f"OpenMP's thread pool cannot be shut down ({path}: {exc})") from exc
        pause.argtypes, pause.restype = [ctypes.c_int], ctypes.c_int
        if pause(OMP_PAUSE_HARD) != 0:
            raise CallerNotForkable(f"OpenMP's thread pool did not shut down ({os.path.basename(path)})")


def _wait_for_exits(ending: set[int], within: float = 2.0, settle: float = 0.02) -> None:
    """Wait until the threads in ``ending`` and the OpenMP threads just released have left the
    kernel's list: the list no longer holds ``ending`` and has not changed for ``settle`` seconds."""
    deadline = time.monotonic() + within
    last, stable_since = kernel_threads(), time.monotonic()
    if last is None:
        raise CallerNotForkable("this process's threads cannot be listed (no /proc)")
    while True:
        now = kernel_threads() or set()
        if now != last:
            last, stable_since = now, time.monotonic()
        if not (now & ending) and time.monotonic() - stable_since >= settle:
            return
        if time.monotonic() >= deadline:
            raise CallerNotForkable("threads that were shut down for the fork did not end within "
                                    f"{within:.0f} s")
        time.sleep(0.002)


def _forks_work(within: float) -> bool:
    """Whether a child of this process can run a matrix multiply and a parallel op (no lock was
    copied held into this process), within ``within`` seconds."""
    import torch

    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            a = torch.randn(256, 256)
            torch.mm(a, a).sum()
            torch.randn(1 << 17).sin().sum()
            code = 0
        finally:
            os._exit(code)
    child = ForkedProcess(pid)
    try:
        return child.wait(timeout=within) == 0
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        return False


def _detach_descriptors(keep: set[int]) -> None:
    """Point every descriptor but ``keep`` at /dev/null: the caller's pipes and sockets are no
    longer held open here, and a file object of the caller's that closes its number later closes
    /dev/null, never a descriptor this process opened since."""
    null = os.open(os.devnull, os.O_RDWR)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep and fd != null:
            with contextlib.suppress(OSError):
                os.dup2(null, fd)
    os.close(null)


def _become_zygote(imports: Sequence[str], env: dict[str, str], control: int, ready: int, log: int) -> NoReturn:
    """The forked copy: become a zygote serving ``control``; never returns."""
    code = 1
    try:
        started = time.perf_counter()
        os.dup2(log, 2)
        os.dup2(2, 1)  # stray prints (compilers, graphs) go to the log
        _detach_descriptors({1, 2, control, ready})
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGALRM):
            signal.signal(number, signal.SIG_DFL)
        signal.setitimer(signal.ITIMER_REAL, 0)
        faulthandler.register(signal.SIGUSR1, file=2, all_threads=True)
        os.environ.update(env)
        # A spawned worker cannot see the caller's script: neither may this copy (a class defined
        # there must be refused as unloadable here too, or the repro, run afresh, could not load it).
        sys.modules["__main__"] = types.ModuleType("__main__")
        from minifier._seams import forget_compile_pool

        forget_compile_pool()
        fresh_state = _as_in_a_fresh_process()  # noqa: F841 - its guards live as long as the copy
        track_thread_starts()
        # What a spawned zygote prepares, minus the imports this copy has: the faster linker, the
        # CPU's vector-ISA answers, Inductor's first-compile costs (a compile that builds nothing).
        setup_nice = prepare({"imports": list(imports), "warm": False}, control)
        replies = os.fdopen(ready, "wb")
        started_threads_ended(within=30.0)  # the preparation's threads end before anything forks
        if not _forks_work(within=10.0):
            write_message(replies, {"ready": False, "reason": "a forked copy of this process could not run an op "
                                    "(a lock was copied while held)"})
            return
        write_message(replies, {"ready": True, "seconds": time.perf_counter() - started, "pid": os.getpid(),
                                "setup_nice": setup_nice})
        gc.freeze()  # workers share this copy's objects: keep the collector from writing to them
        code = serve_forks(socket.socket(fileno=control), closing=[ready])
    except BaseException:  # noqa: BLE001 - reported in the log; the pool sees the zygote die
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(code)


def fork_zygote(imports: Sequence[str], env: dict[str, str]) -> tuple[ForkedProcess, socket.socket, Any]:
    """Fork this process as a zygote that imports ``imports`` and sets ``env``: ``(its process,
    the control socket to it, its log)``. Raises :class:`CallerNotForkable` when that is not safe."""
    _reap_ended()
    reason = refusal()
    if reason is not None:
        raise CallerNotForkable(reason)
    monitors = _tqdm_monitors(threading.enumerate())
    for monitor in monitors:
        monitor.exit()  # joins it; tqdm starts a new one for its next bar
    _pause_openmp()
    _wait_for_exits({t.native_id for t in monitors if t.native_id is not None})
    for stream in (sys.stdout, sys.stderr):  # what they hold must not be written twice
        with contextlib.suppress(Exception):
            stream.flush()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ready_read, ready_write = os.pipe()
    log = tempfile.TemporaryFile(prefix="minifier-worker-", suffix=".log")  # nameless: nothing left behind
    with warnings.catch_warnings():  # Python 3.12 warns of forking beside threads: those left are idle
        warnings.filterwarnings("ignore", message=r".*fork\(\) may lead to deadlocks", category=DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        _become_zygote(imports, env, theirs.fileno(), ready_write, log.fileno())
    theirs.close()
    os.close(ready_write)
    child = ForkedProcess(pid, os.fdopen(ready_read, "rb"))
    _forked.append(child)
    return child, ours, log
