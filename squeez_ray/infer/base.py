"""The pruner interface every backend implements, and the result every caller reads.

A backend only has to say which source lines to keep (``spans``); ``make_result`` turns that into
the one answer shape shared by the Python API, ``squeez --json``, the Serve endpoint and the bulk
jobs. Backends never return generated text: the text is always cut from the source.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from squeez_ray.spans import Span, count_lines, normalize_spans, render, split_lines

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PruneRequest:
    query: str
    tool_output: str
    tool_type: str | None = None  # a hint some backends use (e.g. the encoder's tool token)
    # Operating-point knobs for scoring backends (the encoder): a dev recall target and a kept-lines
    # budget for this request alone; None: the backend's own setting. Generative backends ignore them.
    recall_target: float | None = None
    max_kept_lines: int | None = None


@dataclass
class PruneResult:
    spans: list[list[int]]  # 1-based inclusive [start, end], sorted and merged
    kept_lines: int
    total_lines: int
    text: str  # the source's own lines (optionally numbered / with omission markers)
    pruned: bool  # False: fail-open pass-through, the text is the full output
    reason: str | None = None  # why it was not pruned, or a note (e.g. "chunked into 3")
    model: str | None = None
    latency_ms: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    unmatched_lines: int = 0  # generated lines that matched no source line (dropped)
    # How well a generative model kept to the answer contract (0 for other backends): its answers
    # (one per chunk), those without the answer tags or cut at the token limit, the non-blank lines
    # it wrote, and those that matched a source line only by the fuzzy pass (not verbatim).
    answers: int = 0
    unparsed_answers: int = 0
    answer_lines: int = 0
    fuzzy_lines: int = 0

    @property
    def compression(self) -> float:
        """Share of lines removed (1 - kept/total); METRICS.md's empty-prediction rule lives in metrics."""
        return 1.0 - self.kept_lines / self.total_lines if self.total_lines else 0.0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["compression"] = round(self.compression, 6)
        return out


@dataclass(frozen=True)
class RenderOptions:
    line_numbers: bool = False
    markers: bool = False


def make_result(tool_output: str, spans: Sequence[Sequence[int]], *, model: str | None = None,
                render_options: RenderOptions = RenderOptions(), **extra: Any) -> PruneResult:
    """Normalise ``spans`` against ``tool_output`` and cut the verbatim text."""
    lines = split_lines(tool_output)
    clean: list[Span] = normalize_spans(spans, len(lines))
    return PruneResult(
        spans=[[s, e] for s, e in clean], kept_lines=count_lines(clean), total_lines=len(lines),
        text=render(lines, clean, line_numbers=render_options.line_numbers, markers=render_options.markers),
        pruned=True, model=model, **extra)


def unpruned_result(tool_output: str, reason: str, *, model: str | None = None, **extra: Any) -> PruneResult:
    """Fail-open answer: the whole output, marked unpruned, with the reason."""
    n = len(split_lines(tool_output))
    return PruneResult(spans=[[1, n]], kept_lines=n, total_lines=n, text=tool_output, pruned=False,
                       reason=reason, model=model, **extra)


class Pruner:
    """Query + tool output in, line spans out. Subclasses implement ``_prune_batch``.

    ``prune_batch`` is the public entry point: it times the call and, when ``fail_open`` is set,
    turns a backend error into unpruned pass-through results (logged, never raised), which is what
    an agent's pipe needs. Bulk jobs set ``fail_open=False`` to count failures instead.
    """

    name: str = "pruner"
    # Outputs with fewer lines than this pass through: pruning them saves nothing.
    min_lines: int = 0

    def _prune_batch(self, requests: Sequence[PruneRequest], render_options: RenderOptions) -> list[PruneResult]:
        raise NotImplementedError

    def prune_batch(self, requests: Sequence[PruneRequest], *, render_options: RenderOptions = RenderOptions(),
                    fail_open: bool = True) -> list[PruneResult]:
        results, todo = self.gate_short(requests)
        if todo:
            started = time.perf_counter()
            try:
                done = self._prune_batch([requests[i] for i in todo], render_options)
            except Exception as error:  # the fail-open boundary: log what was swallowed
                if not fail_open:
                    raise
                log.warning("pruner %s failed, passing %d outputs through unpruned: %s", self.name, len(todo), error)
                done = [unpruned_result(requests[i].tool_output, f"backend error: {type(error).__name__}: {error}",
                                        model=self.name) for i in todo]
            per_item_ms = (time.perf_counter() - started) * 1000 / len(todo)
            for i, result in zip(todo, done):
                if not result.latency_ms:
                    result.latency_ms = per_item_ms
                results[i] = result
        return results  # type: ignore[return-value]

    def gate_short(self, requests: Sequence[PruneRequest]) -> tuple[list[PruneResult | None], list[int]]:
        """The ``min_lines`` gate of every path (``prune_batch``, Serve's model replicas): the unpruned
        answer of each output too short to prune (None for the others), and the indices left to prune."""
        results: list[PruneResult | None] = [None] * len(requests)
        todo: list[int] = []
        for i, request in enumerate(requests):
            if self.min_lines and len(split_lines(request.tool_output)) < self.min_lines:
                results[i] = unpruned_result(request.tool_output, f"below min_lines={self.min_lines}", model=self.name)
            else:
                todo.append(i)
        return results, todo

    def prune(self, query: str, tool_output: str, *, tool_type: str | None = None,
              render_options: RenderOptions = RenderOptions(), fail_open: bool = True) -> PruneResult:
        return self.prune_batch([PruneRequest(query, tool_output, tool_type)], render_options=render_options,
                                fail_open=fail_open)[0]

    def close(self) -> None:
        """Release engines / connections. Safe to call twice."""
