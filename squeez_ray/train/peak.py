"""Peak resident memory of this process over a block of code (Linux): what CPU runs measure against the plan.

Writing 5 to /proc/self/clear_refs resets the kernel's high-water mark (VmHWM), so the peak of one
training step is read without the imports and weights that came before it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise OSError(f"{field} not in /proc/self/status")


def supported() -> bool:
    return Path("/proc/self/clear_refs").exists() and Path("/proc/self/status").exists()


@contextlib.contextmanager
def peak_rss_delta() -> Iterator[dict[str, int]]:
    """``with peak_rss_delta() as m: ...`` then ``m["bytes"]``: the peak RSS inside the block above RSS at entry."""
    import gc

    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")
    start = _status_kib("VmRSS")
    result = {"bytes": 0}
    try:
        yield result
    finally:
        result["bytes"] = max(0, _status_kib("VmHWM") - start) * 1024


def process_peak_bytes() -> int:
    """This process's peak memory so far: CUDA allocations on a GPU worker, else peak RSS (weights included)."""
    try:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            return int(torch.cuda.max_memory_allocated())
    except ImportError:
        pass
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
