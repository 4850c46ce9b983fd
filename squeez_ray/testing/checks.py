"""Assertions and helpers shared by the tests of every pruning path (engines, CLI, Serve, bulk jobs)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
from pathlib import Path

from squeez_ray.spans import kept_text, normalize_spans, split_lines


def tree_digest(root: Path) -> str:
    """One hash of a folder's names and file bytes: equal before and after a job means the job left
    its inputs untouched."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(str(path.relative_to(root)).encode())
        if path.is_file() and not path.is_symlink():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def stop_process_group(process: subprocess.Popen, timeout: float) -> None:
    """Stop a server a test started with ``start_new_session=True``: SIGTERM to its whole group, then
    SIGKILL if it is not gone within ``timeout`` seconds (its children would outlive a plain kill). A server
    that already exited can have left its group running (a failed `ray start` leaves its GCS and agents):
    those are killed."""
    if process.poll() is not None:
        with contextlib.suppress(ProcessLookupError):  # nothing of the group is left
            os.killpg(process.pid, signal.SIGKILL)
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def assert_verbatim_result(result, tool_output: str) -> None:
    """A pruned result's spans are well formed and its text is exactly the source's kept lines.

    This is the verbatim guarantee: whatever a model generated, every returned line is a line of
    ``tool_output`` at the position the spans say.
    """
    lines = split_lines(tool_output)
    assert result.total_lines == len(lines), (result.total_lines, len(lines))
    spans = [tuple(s) for s in result.spans]
    assert spans == normalize_spans(spans, len(lines)), f"spans not sorted/merged/in range: {spans}"
    assert result.kept_lines == sum(e - s + 1 for s, e in spans)
    if result.pruned:
        assert result.text == kept_text(lines, spans)
        assert set(split_lines(result.text)) <= set(lines) or not result.text
    else:
        assert result.text == tool_output and spans == [(1, len(lines))]


def sample_requests() -> list:
    """A handful of small, varied tool outputs (tests, grep, build, empty, odd whitespace and unicode)."""
    from squeez_ray.infer.base import PruneRequest

    pytest_log = "\n".join([f"tests/test_m.py::test_{i} {'FAILED' if i == 7 else 'PASSED'}" for i in range(12)]
                           + ["E   AssertionError: assert 3 == 4", "1 failed, 11 passed in 0.40s"])
    grep = "\n".join(f"src/pkg/mod_{i}.py:{i * 3}:    def handler_{i}(self, request):" for i in range(10))
    build = "Compiling foo v0.1.0\nerror[E0308]: mismatched types\n  --> src/main.rs:4:5\n}\n}\nerror: aborting"
    return [PruneRequest("which test failed?", pytest_log), PruneRequest("where is handler_3 defined?", grep),
            PruneRequest("why does the build fail?", build), PruneRequest("anything?", ""),
            PruneRequest("unicode", "naïve ✓ line\n\ttabbed\r\nwindows line")]


def long_output(n_lines: int = 150) -> str:
    return "\n".join(f"[{i:04d}] worker-{i % 4} processed batch {i * 13} in {i % 97} ms" for i in range(n_lines))
