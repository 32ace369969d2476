"""The process-wide Ctrl-C interruption (:mod:`dfs_cer.interrupt`): stop flags and callbacks,
no ``KeyboardInterrupt`` inside a function compiled code called, a second Ctrl-C under the
command line."""

from __future__ import annotations

import os
import signal
import sys
import textwrap

import numpy as np
import pytest

from dfs_cer import interrupt
from tests.fixtures.signals import interrupt as send_sigint
from tests.fixtures.signals import start, wait_for


def test_a_trip_sets_stop_flags_runs_callbacks_and_raises_at_the_end() -> None:
    flag, late, called = np.zeros(1, np.int64), np.zeros(3, np.int64), []
    with pytest.raises(KeyboardInterrupt), interrupt.interruptible():
        with interrupt.stopping(flag), interrupt.on_trip(lambda: called.append(1)):
            interrupt.trip()
            assert flag[0] == 1 and called == [1] and interrupt.interrupted()
        with interrupt.stopping(late):  # a loop started after Ctrl-C stops at once
            assert late[0] == 1
            # code that does not check: the KeyboardInterrupt comes as the block ends
    assert not interrupt.interrupted()  # the next call starts afresh
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_check_raises_once_in_the_main_thread() -> None:
    """One Ctrl-C, one KeyboardInterrupt: the clean-up after it (closing the query on every
    node) is not interrupted again."""
    with interrupt.interruptible():
        interrupt.trip()
        with pytest.raises(KeyboardInterrupt):
            interrupt.check()
        interrupt.check()  # raised already: clean-up code runs on
    interrupt.check()  # reset


def test_no_keyboard_interrupt_inside_a_function_compiled_code_called() -> None:
    """A handler raising inside numba's callback (it unpickles constants while boxing a
    kernel's results) left a NULL in the returned tuple and crashed the interpreter: the raise
    waits for the next check instead."""
    callback = os.path.join(sys.prefix, "numba", "core", "serialize.py")
    body = "signal.raise_signal(signal.SIGINT)\nfor _ in range(10_000):\n    pass\nreached = True"
    names: dict[str, object] = {"signal": signal}
    with pytest.raises(KeyboardInterrupt), interrupt.interruptible():
        exec(compile(body, callback, "exec"), names)  # the handler ran in that frame
        assert names["reached"] is True
        assert interrupt._STATE.tripped.wait(10)  # the watcher saw the signal
        interrupt.check()


def test_a_second_ctrl_c_exits_at_once_under_the_command_line() -> None:
    script = textwrap.dedent(
        """
        import sys, time
        from dfs_cer import interrupt
        with interrupt.interruptible(exit_on_second=True):
            try:
                print("running", file=sys.stderr, flush=True)
                time.sleep(60)
            except KeyboardInterrupt:
                print("cleaning up", file=sys.stderr, flush=True)
                time.sleep(60)  # a clean-up that hangs
        """
    )
    proc = start([sys.executable, "-c", script])
    seen = wait_for(proc, "running")
    proc.send_signal(signal.SIGINT)
    code, err = send_sigint(proc, "cleaning up", seen=seen)
    assert code == interrupt.EXIT_CODE == 130, err
    assert err.rstrip().endswith("interrupted"), err
