"""The steps every squeez front end shares: the input gates, keeping the full output, calling the backend.

``squeez`` (the pipe, prune.py), ``squeez run`` (run.py) and the MCP tools call these, so a gate or
a fail-open rule is decided in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from squeez_ray.cli import settings as settings_mod
from squeez_ray.cli.show import open_store
from squeez_ray.cli.store import StoreError
from squeez_ray.infer.base import PruneRequest, PruneResult
from squeez_ray.infer.registry import build_pruner
from squeez_ray.spans import count_lines, normalize_spans, split_lines


@dataclass(frozen=True)
class Gate:
    """Why an input passes through unpruned; ``quiet``: not worth a note on stderr."""

    kind: str  # "over_limit", "empty", "binary", "short"
    reason: str
    quiet: bool = False


def input_gate(data: bytes, settings: Any, *, over_limit: bool = False) -> Gate | None:
    """The pass-through rules, in order; None when the input should be pruned."""
    if over_limit:
        return Gate("over_limit", f"input is over max_input_mb={settings.max_input_mb:g}: passed through unpruned")
    if not data:
        return Gate("empty", "empty input: nothing to prune")
    if b"\0" in data:
        return Gate("binary", "binary input (it holds NUL bytes): passed through unpruned")
    n_lines = data.count(b"\n") + 1
    if n_lines < settings.min_lines:
        return Gate("short", f"{n_lines} lines, below min_lines={settings.min_lines}: passed through unpruned",
                    quiet=True)
    return None


def keep_full_output(settings: Any, data: bytes) -> tuple[str | None, str | None]:
    """(store id, note): the id is None when the output could not be kept (the note says why)."""
    if not settings.store_outputs:
        return None, None
    try:
        kept = open_store(settings).put(data)
    except (StoreError, OSError) as error:
        return None, f"store: {error}"
    return kept.id, (f"store: {kept.note}" if kept.note else None)


def call_backend(settings: Any, query: str, text: str) -> tuple[PruneResult | None, str | None, Any, float]:
    """(result, failure, pruner, load seconds): exactly one of result / failure is set.

    The fail-open boundary: any backend error becomes a failure message, never an exception. The
    caller closes ``pruner`` (it may be None) once it no longer needs it.
    """
    import time

    from squeez_ray.infer.base import RenderOptions

    pruner = None
    load_s = 0.0
    try:
        started = time.perf_counter()
        pruner = build_pruner(settings.backend, settings_mod.backend_options(settings))
        load_s = time.perf_counter() - started
        render_options = RenderOptions(line_numbers=settings.line_numbers, markers=settings.markers)
        result = pruner.prune_batch([PruneRequest(query, text, settings.tool_type)],
                                    render_options=render_options, fail_open=False)[0]
        if not result.pruned:
            return None, f"backend {settings.backend} did not prune ({result.reason})", pruner, load_s
        # Spans over another text would be a backend bug: fail open, never mis-cut.
        clean = normalize_spans(result.spans, len(split_lines(text)))
        result.spans, result.kept_lines = [list(span) for span in clean], count_lines(clean)
        return result, None, pruner, load_s
    except Exception as error:  # noqa: BLE001 - the fail-open boundary: say what was swallowed
        return None, f"backend {settings.backend} failed ({type(error).__name__}: {error})", pruner, load_s
