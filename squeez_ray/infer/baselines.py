"""Model-free pruners of METRICS.md section 4: BM25, First-N, Last-N, Random, and keep-all.

Each keeps ``max(1, round(keep_ratio * n_lines))`` lines (10% by default), so the baselines compress
about as much as gold labels do; they never return an empty answer, so they score 0 on negatives.
``none`` (keep every line, ``pruned=True``) is a pass-through the re-prune job uses to check that
writing results back changes nothing.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from array import array
from collections import Counter
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


# bm25s's default English stop words (bm25s.stopwords.STOPWORDS_EN), which its tokenizer drops.
_STOPWORDS = frozenset("a an and are as at be but by for if in into is it no not of on or such that the their then "
                       "there these they this to was will with".split())
_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # bm25s's (and scikit-learn's) default token pattern


def _tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


def bm25_line_scores(query: str, lines: Sequence[str], k1: float = 1.5, b: float = 0.75) -> list[float]:
    """Each line's Okapi BM25 score against the query, computed as bm25s 0.3 computes it (method "lucene":
    idf ``ln(1 + (N - df + 0.5) / (df + 0.5))`` and each (line, term) score stored as float32, summed per
    query token, a repeated query token counted again, in float32), so the ranking is bm25s's to the bit,
    in pure Python: bm25s pulls numpy and scipy into the ``squeez --backend bm25`` start (0.3-0.7 s)."""
    docs = [_tokens(line) for line in lines]
    n_docs = len(docs)
    asked = [t for t in _tokens(query)]
    wanted = set(asked)
    df: dict[str, int] = {}
    for doc in docs:
        for term in wanted.intersection(doc):
            df[term] = df.get(term, 0) + 1
    scores = array("f", bytes(4 * n_docs))  # float32 accumulators, as bm25s's score array
    if not df:  # no query word in any line (or no line has a word): nothing to rank
        return list(scores)
    avg_len = sum(map(len, docs)) / n_docs
    idf = {t: array("f", [math.log(1 + (n_docs - d + 0.5) / (d + 0.5))])[0] for t, d in df.items()}
    entry = array("f", [0.0])
    postings: dict[str, list[tuple[int, float]]] = {t: [] for t in df}
    for i, doc in enumerate(docs):
        counts = Counter(t for t in doc if t in df)
        if not counts:
            continue
        norm = k1 * ((1 - b) + b * len(doc) / avg_len)
        for term, tf in counts.items():
            entry[0] = idf[term] * (tf / (norm + tf))  # float64, stored as float32 (bm25s's index)
            postings[term].append((i, entry[0]))
    for term in asked:
        for i, value in postings.get(term, ()):
            scores[i] += value  # float32 + float32, rounded to float32 (numpy's add.at on a float32 array)
    return list(scores)


class BM25Lines(LineSelectionBaseline):
    """Each line is a document scored against the query with Okapi BM25 (``bm25_line_scores``: bm25s's
    variant, k1=1.5, b=0.75, its default English tokenizer and stop words); the top lines are kept and
    shown in source order. Equal scores go to the earlier line so results are deterministic."""

    name = "bm25"

    def __init__(self, keep_ratio: float = 0.10, k1: float = 1.5, b: float = 0.75):
        super().__init__(keep_ratio)
        self.k1, self.b = k1, b

    def line_scores(self, query: str, lines: list[str]) -> list[float]:
        return bm25_line_scores(query, lines, self.k1, self.b)

    def choose(self, request: PruneRequest, lines: list[str], k: int) -> list[int]:
        scores = self.line_scores(request.query, lines)
        order = sorted(range(len(scores)), key=lambda i: -scores[i])[:k]  # stable: ties to the earlier line
        return [i + 1 for i in order]


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
