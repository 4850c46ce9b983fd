"""SIGINT, SIGTERM and SIGHUP while ``squeez`` holds a tool output: the output still reaches stdout.

A Python signal handler runs only when the main thread is back in the interpreter, and the main
thread may be blocked for a long time in a C call (an ONNX or vLLM forward pass, a read from a hung
producer). So the handlers installed here do nothing themselves: the interpreter's C-level handler
also writes the signal's number to a wake-up pipe (``signal.set_wakeup_fd``), and a watcher thread
reading that pipe answers at once (the caller's ``on_signal`` writes what was read and ends the
process with 128 + the signal's number).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator

HANDLED = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
_state: dict[str, object] = {}  # what a forked child must restore (see _after_fork_in_child)


def _ignore(signum: int, frame: object) -> None:
    """The watcher thread answers; the main thread carries on until the process ends."""


@contextlib.contextmanager
def watch(on_signal: Callable[[int], None]) -> Iterator[None]:
    """Call ``on_signal(signum)`` from a watcher thread on each handled signal, while inside."""
    if threading.current_thread() is not threading.main_thread():  # handlers need the main thread
        yield
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    previous_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    # A signal someone chose to ignore (nohup, `cmd &` in a script) stays ignored.
    previous = {s: signal.getsignal(s) for s in HANDLED if signal.getsignal(s) is not signal.SIG_IGN}
    for signum in previous:
        signal.signal(signum, _ignore)
    _state.update(handlers=previous, wakeup_fd=previous_fd)
    watcher = threading.Thread(target=_watch, args=(read_end, on_signal), name="squeez-signals", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        _state.clear()
        signal.set_wakeup_fd(previous_fd)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        os.close(write_end)  # the watcher reads end-of-file and stops


def end_process(code: int) -> None:
    """From a thread other than the main one, which may be blocked in a C call that cannot be
    interrupted: end the process now. os._exit skips multiprocessing's clean-up, so engine worker
    processes (vLLM's engine core) are stopped here, so that none outlives the command."""
    import multiprocessing
    import sys

    with contextlib.suppress(Exception):
        sys.stderr.flush()
    for child in multiprocessing.active_children():
        with contextlib.suppress(Exception):
            child.terminate()
    os._exit(code)


def _watch(read_end: int, on_signal: Callable[[int], None]) -> None:
    with open(read_end, "rb", buffering=0) as pipe:
        while True:
            byte = pipe.read(1)
            if not byte:
                return
            if byte[0] in HANDLED:
                on_signal(byte[0])


def _after_fork_in_child() -> None:
    """A forked child (an engine worker) must not feed our pipe nor ignore SIGTERM: undo it there."""
    if not _state:
        return
    with contextlib.suppress(ValueError, OSError):
        signal.set_wakeup_fd(_state["wakeup_fd"])  # type: ignore[arg-type]
        for signum, handler in _state["handlers"].items():  # type: ignore[union-attr]
            signal.signal(signum, handler)
    _state.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
