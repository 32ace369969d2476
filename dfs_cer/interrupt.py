"""Ctrl-C: one process-wide interruption that stops compiled loops, round trips and pulls, and
a ``KeyboardInterrupt`` raised where Python code may be interrupted.

Two things stand in the way of the plain ``KeyboardInterrupt``:

- Python runs a signal handler only when the main thread executes bytecode. A compiled kernel
  that releases the GIL (the row-pattern VM, for seconds on a pathological pattern) or a
  blocking call into C++ holds the main thread, so the handler waits for it to end.
- When the kernel returns, numba boxes its results by calling back into Python
  (``numba.core.serialize._numba_unpickle``); a handler that raises there leaves a NULL in the
  tuple the kernel returns, and unpacking it crashes the interpreter (a segfault at address 0).

So, while :func:`interruptible` is active on the main thread, the C-level handler also writes
the signal to a socket (``signal.set_wakeup_fd``) that a watcher thread reads at once, whatever
the main thread does: the first Ctrl-C *trips* the interruption: every compiled loop
registered with :func:`stopping` sees its stop flag set and returns, every callback registered
with :func:`on_trip` runs (a pull's stream is cancelled, Spark's jobs are cancelled). The
Python-level handler raises ``KeyboardInterrupt`` unless the main thread is inside such a
callback of compiled code (or inside a call into Spark's JVM, which the cancelled jobs end);
then the raise is left to the next :func:`check` (the engines call it when a kernel returns, a
round calls it before it starts) or to the end of the outermost :func:`interruptible` block. A
call to a storage node made from the main thread runs aside (:func:`call`), so that its wait
can be interrupted. Under the command line (``exit_on_second``) a second Ctrl-C ends the
process at once with exit code 130, without waiting for any clean-up.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

#: the exit code of a process ended by Ctrl-C (128 + SIGINT), as shells report it
EXIT_CODE = 128 + int(signal.SIGINT)

#: where the main thread must not raise: the numba module whose functions compiled code calls
#: back (constants, exceptions; a ``KeyboardInterrupt`` there crashes the interpreter), and
#: py4j's calls into Spark's JVM (raising in one breaks its connection and logs tracebacks;
#: cancelling the jobs ends the call instead)
_NO_RAISE = (os.path.join("numba", "core", "serialize.py"), os.path.join("py4j", ""))


class _State:
    """The one interruption of this process (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tripped = threading.Event()
        #: Ctrl-C presses the watcher counted since the interruption was last reset
        self.presses = 0
        #: times the Python-level handler ran since then
        self.handled = 0
        #: a KeyboardInterrupt was raised in the main thread for this interruption
        self.raised = False
        #: compiled loops' stop flags (one-item integer arrays, or longer ones whose item 0 is
        #: the flag), by id
        self.flags: dict[int, Any] = {}
        self.hooks: dict[int, Callable[[], object]] = {}
        #: the :func:`interruptible` blocks open on the main thread, and whether the outermost
        #: ends the process on a second Ctrl-C
        self.depth = 0
        self.exit_on_second = False
        self.reader: socket.socket | None = None
        self.writer: socket.socket | None = None
        #: the process the socket pair and its watcher belong to (a forked child makes its own)
        self.pid = 0
        #: the wakeup fd that was set before ours (signals other than SIGINT go on to it)
        self.forward = -1


_STATE = _State()


def interrupted() -> bool:
    """Has Ctrl-C interrupted this process's work (since the outermost block began)?"""
    return _STATE.tripped.is_set()


def trip() -> None:
    """Interrupt: set every registered stop flag and run every registered callback (a callback
    that fails is ignored: the others still run)."""
    s = _STATE
    with s.lock:
        if s.tripped.is_set():
            return
        s.tripped.set()
        flags = list(s.flags.values())
        hooks = list(s.hooks.values())
    for flag in flags:
        flag[0] = 1
    for hook in hooks:
        with contextlib.suppress(Exception):
            hook()


def check() -> None:
    """Raise ``KeyboardInterrupt`` when the work was interrupted and the main thread has not
    raised it yet (on another thread: whenever it was interrupted, so that thread's call ends)."""
    s = _STATE
    if not s.tripped.is_set():
        return
    if threading.current_thread() is threading.main_thread():
        if s.raised:
            return
        s.raised = True
    raise KeyboardInterrupt


@contextlib.contextmanager
def stopping(flag: Any) -> Iterator[None]:
    """While the block runs, an interruption sets ``flag[0] = 1`` (a compiled loop reads it
    and returns; the caller then calls :func:`check`)."""
    s = _STATE
    with s.lock:
        s.flags[id(flag)] = flag
        if s.tripped.is_set():
            flag[0] = 1
    try:
        yield
    finally:
        with s.lock:
            s.flags.pop(id(flag), None)


@contextlib.contextmanager
def on_trip(hook: Callable[[], object]) -> Iterator[None]:
    """While the block runs, an interruption calls ``hook`` (from the watcher thread: it must
    not block for long, e.g. cancel a stream). Called at once when already interrupted."""
    s = _STATE
    key = id(hook)
    with s.lock:
        s.hooks[key] = hook
        now = s.tripped.is_set()
    if now:
        with contextlib.suppress(Exception):
            hook()
    try:
        yield
    finally:
        with s.lock:
            s.hooks.pop(key, None)


def _must_not_raise(frame: FrameType | None) -> bool:
    """Is the main thread inside a function that numba-compiled code called, or inside a call
    into Spark's JVM (see :data:`_NO_RAISE`)?"""
    depth = 0
    while frame is not None and depth < 8:
        name = frame.f_code.co_filename
        if name.endswith(_NO_RAISE[0]) or _NO_RAISE[1] in name:
            return True
        frame, depth = frame.f_back, depth + 1
    return False


def _handler(signum: int, frame: FrameType | None) -> None:
    s = _STATE
    s.handled += 1
    further = s.handled > 1 or s.presses > 1
    if further and s.exit_on_second:
        _exit_now()
    if _must_not_raise(frame):
        return  # the watcher trips the interruption; check() raises once the call returns
    if not s.raised:
        s.raised = True
        raise KeyboardInterrupt
    if further:  # Python's behaviour: each further Ctrl-C raises again
        raise KeyboardInterrupt


def _exit_now() -> None:
    """The command line's second Ctrl-C: end the process, no clean-up."""
    with contextlib.suppress(OSError):
        os.write(2, b"\ninterrupted\n")
    os._exit(EXIT_CODE)


def _replaceable(handler: Any) -> bool:
    """May :func:`interruptible` stand in for this SIGINT handler? Python's default (raise
    ``KeyboardInterrupt``) and PySpark's (cancel the jobs, then raise) only: its callbacks do
    what they did. A handler an application installed is left alone."""
    if handler is signal.default_int_handler:
        return True
    return str(getattr(handler, "__module__", "") or "").startswith("pyspark")


def _watch(reader: socket.socket) -> None:
    """The watcher thread: reads the signals the C-level handler wrote, trips the interruption on
    the first Ctrl-C and (under the command line) exits on the second."""
    s = _STATE
    while True:
        try:
            data = reader.recv(64)
        except InterruptedError:
            continue
        except OSError:
            return
        if not data:
            return
        for signum in data:
            if signum != signal.SIGINT:
                if s.forward >= 0:
                    with contextlib.suppress(OSError):
                        os.write(s.forward, bytes([signum]))
                continue
            s.presses += 1
            if s.presses == 1:
                trip()
            elif s.exit_on_second and s.depth > 0:
                _exit_now()


def _install_wakeup() -> None:
    s = _STATE
    if s.reader is None or s.pid != os.getpid():
        s.reader, s.writer = socket.socketpair()
        s.pid = os.getpid()
        s.writer.setblocking(False)
        threading.Thread(
            target=_watch, args=(s.reader,), name="dfs-cer interrupt", daemon=True
        ).start()
    assert s.writer is not None
    s.forward = signal.set_wakeup_fd(s.writer.fileno(), warn_on_full_buffer=False)


def _reset() -> None:
    s = _STATE
    with s.lock:
        s.tripped.clear()
        s.presses = 0
        s.handled = 0
        s.raised = False


def _let_handlers_run() -> None:
    """A Python call: the main thread runs a pending signal handler on entering a function."""


@contextlib.contextmanager
def interruptible(exit_on_second: bool = False) -> Iterator[None]:
    """Make Ctrl-C stop the work inside the block promptly and safely (see the module's text).

    On any thread but the main one, or under a SIGINT handler an application installed, the
    block runs as it would without it. Blocks nest; the outermost restores the handlers and
    resets the interruption as it ends. A Ctrl-C whose ``KeyboardInterrupt`` was not raised yet
    (the kernel it stopped returned into code that does not check) is raised at the end.

    ``exit_on_second``: the command line's behaviour: a second Ctrl-C ends the process at once
    (stderr ``interrupted``, exit code 130), clean-up or not.
    """
    s = _STATE
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    current = signal.getsignal(signal.SIGINT)
    if current is not _handler and not _replaceable(current):
        yield
        return
    outermost = s.depth == 0
    if outermost:
        _reset()
        try:
            _install_wakeup()
            installed = True
        except (ValueError, OSError):  # no wakeup fd here (e.g. an embedding interpreter)
            installed = False
        if not installed:
            yield
            return
        s.exit_on_second = exit_on_second
    previous = current
    if current is not _handler:  # first, or PySpark put its own back meanwhile
        signal.signal(signal.SIGINT, _handler)
    s.depth += 1
    try:
        yield
        _let_handlers_run()
        if outermost and s.tripped.is_set() and not s.raised:
            s.raised = True
            raise KeyboardInterrupt
    finally:
        s.depth -= 1
        if previous is not _handler:
            signal.signal(signal.SIGINT, previous)
        if outermost:
            with contextlib.suppress(ValueError, OSError):
                signal.set_wakeup_fd(s.forward, warn_on_full_buffer=False)
            s.forward = -1
            _reset()


#: seconds between two looks at the interruption while the main thread waits for a call
WAIT_EVERY = 0.1


def call(func: Callable[[], R]) -> R:
    """``func()``; inside :func:`interruptible` on the main thread, in a thread of its own while
    the main thread waits, so that Ctrl-C interrupts the wait: a call into C++ that blocks (a
    round trip to a storage node) would hold the main thread, and its signal handler, until it
    returns. The abandoned call ends in its own time (its deadline)."""
    if _STATE.depth == 0 or threading.current_thread() is not threading.main_thread():
        return func()
    out: list[tuple[bool, Any]] = []
    done = threading.Event()

    def run() -> None:
        try:
            out.append((True, func()))
        except BaseException as exc:  # re-raised in the caller's thread
            out.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=run, name="dfs-cer call", daemon=True).start()
    while not done.wait(WAIT_EVERY):
        check()
    ok, value = out[0]
    if ok:
        return value
    raise value


def guarded(func: Callable[P, R]) -> Callable[P, R]:
    """``func`` run inside :func:`interruptible` (the library's entry points)."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with interruptible():
            return func(*args, **kwargs)

    return wrapper
