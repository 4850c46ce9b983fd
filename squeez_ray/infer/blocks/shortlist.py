"""The cheap tier of the block-first pruner: rank an output's evidence blocks without the encoder, and
pick the ones the encoder will read within a token budget.

The encoder is the cost of a call (a 1,000-line log is ~40k window tokens, ~6 s on 2 cores), and most of
an output's blocks have nothing to do with the query. A block's cheap score is lexical and structural:
BM25 of the block's identifier-aware terms against the query's (IDF from the output's own blocks), the
query's symbols (``test_foo``, ``E501``, ``a/b.py``) found verbatim, and a small weight for failure
words (an agent asking "why did it fail" shares no word with the resolver conflict that answers it).
Blocks are taken best first until their tokens fill the budget; an output that fits the budget whole is
scored whole, as before. Ties keep the output's order from the end, where runners print what failed.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from squeez_ray.infer.encoder.fusion_features import QUERY_CHARS, STOPWORDS, bm25, line_terms_of, symbols, terms

# line tokens the encoder reads per call before it stops widening the shortlist (~3 windows of 512)
DEFAULT_TOKEN_BUDGET = 1536
_FAILURE = re.compile(r"(?i)\b(error|errors|fail|failed|failure|exception|traceback|fatal|panic|denied|"
                      r"not found|no such|conflict|cannot|can't|unable|invalid)\b|^\s*E\s{2,}\S")
SYMBOL_WEIGHT = 2.0  # a query symbol found verbatim outweighs a few shared common words
FAILURE_WEIGHT = 0.5


def block_cheap_scores(query: str, lines: Sequence[str], spans: Sequence[tuple[int, int]],
                       line_terms: Sequence[Counter] | None = None) -> np.ndarray:
    """One lexical/structural score per block (higher: more likely to hold what the query asks);
    ``line_terms``: ``line_terms_of(lines)`` when the caller already has them (the fusion needs them too)."""
    query = query[:QUERY_CHARS]
    query_terms = [t for t in dict.fromkeys(terms(query)) if t not in STOPWORDS]
    query_symbols = symbols(query)
    line_terms = line_terms if line_terms is not None else line_terms_of(lines)
    docs, exact, failure = [], np.zeros(len(spans)), np.zeros(len(spans))
    for k, (start, end) in enumerate(spans):
        block = lines[start:end]
        counts: Counter = Counter()
        for c in line_terms[start:end]:
            counts.update(c)
        docs.append(counts)
        text = "\n".join(line[:2048] for line in block)
        exact[k] = sum(s in text for s in query_symbols)
        failure[k] = any(_FAILURE.search(line[:512]) for line in block)
    lexical = bm25(docs, query_terms)
    if lexical.max() > 0:
        lexical = lexical / lexical.max()
    return lexical + SYMBOL_WEIGHT * np.minimum(exact, 2) + FAILURE_WEIGHT * failure


def shortlist(query: str, lines: Sequence[str], spans: Sequence[tuple[int, int]], line_tokens: Sequence[int],
              budget: int = DEFAULT_TOKEN_BUDGET, line_terms: Sequence[Counter] | None = None) -> np.ndarray | None:
    """0-based indices (sorted) of the lines the encoder should score, or None for all of them (the
    output fits the budget). ``line_tokens``: each line's token count as the windows will cut it."""
    if sum(line_tokens) <= budget:
        return None
    cheap = block_cheap_scores(query, lines, spans, line_terms)
    # best cheap score first; among equals, later blocks first (failures and summaries come last)
    order = sorted(range(len(spans)), key=lambda k: (-cheap[k], -k))
    chosen, used = [], 0
    for k in order:
        start, end = spans[k]
        cost = sum(line_tokens[start:end]) + (end - start)  # + one marker token per line
        if used and used + cost > budget:
            continue
        chosen.append(k)
        used += cost
        if used >= budget:
            break
    return np.array(sorted(i for k in chosen for i in range(*spans[k])), dtype=np.int64)
