"""``import onnxruntime`` that survives a long command line (issue #28).

onnxruntime 1.30's bundled telemetry layer reads ``/proc/self/cmdline`` when the module is first
imported and matches it against a ``std::regex``; libstdc++'s regex matcher recurses about once per
character (~256 bytes of stack each), so a command line over ~32.5 KB (``squeez "<a long query>"``)
overflows the 8 MiB main-thread stack and the process dies with SIGSEGV before Python can answer.
The real command line is what counts: neither ``sys.argv`` nor the environment matter, and the
parse happens once, in the importing thread. So a long command line is imported in a thread whose
stack is sized for it (the memory is only reserved; pages are touched as the regex recurses).
"""

from __future__ import annotations

import sys
import threading
from types import ModuleType

# Below this, the main thread's stack is plenty (the crash starts near 32.5 KB).
SAFE_CMDLINE_BYTES = 16 << 10
# Stack per command-line byte: 4x the ~256 bytes measured, capped so the reservation always succeeds
# (the kernel caps a command line at a few MiB anyway).
STACK_PER_BYTE = 1 << 10
MIN_STACK, MAX_STACK = 64 << 20, 4 << 30


def cmdline_bytes() -> int:
    try:
        with open("/proc/self/cmdline", "rb") as handle:
            return len(handle.read())
    except OSError:  # not Linux, or no /proc: nothing to size by
        return 0


def import_onnxruntime() -> ModuleType:
    if "onnxruntime" in sys.modules:
        return sys.modules["onnxruntime"]
    length = cmdline_bytes()
    if length <= SAFE_CMDLINE_BYTES:
        import onnxruntime

        return onnxruntime
    stack = min(MAX_STACK, max(MIN_STACK, length * STACK_PER_BYTE))
    failure: list[BaseException] = []

    def load() -> None:
        try:
            import onnxruntime  # noqa: F401 - the import is the point
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread
            failure.append(error)

    previous = threading.stack_size(stack)
    try:
        loader = threading.Thread(target=load, name="onnxruntime-import")
        loader.start()
    finally:
        threading.stack_size(previous)
    loader.join()
    if failure:
        raise failure[0]
    import onnxruntime

    return onnxruntime
