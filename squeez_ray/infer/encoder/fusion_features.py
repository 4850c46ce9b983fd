"""Per-line features that fuse the encoder's score with lexical and block evidence (numpy only).

The encoder (a small sentence model reading 512-token windows) does not weight exact identifiers and
cannot tell which of twelve look-alike failures the query names. These features give a learned
combiner (``encoder_fusion``) what it lacks:

- encoder: the line's logit, its rank in the output, its distance to the output's best line;
- lexical: the query's terms in the line (identifier-aware: ``parse_config`` / ``ParseConfig`` /
  ``src/parse.py`` count whole and as their parts), BM25 of the line against the query with IDF from
  the output's own lines, and exact hits of the query's symbol-like tokens (``test_foo``, ``E501``,
  ``utils.py``) found verbatim;
- block (``encoder_blocks``): BM25 of the line's block, whether it is the output's best-matching
  block, the block's best encoder logit, and the neighbouring lines' logits.

The feature order is ``FEATURES``; a combiner records it, so a model trained on other features fails
to load instead of mis-scoring.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from squeez_ray.infer.encoder.blocks import block_ids

FEATURES_VERSION = 1
FEATURES = (
    "enc_logit", "enc_rank", "enc_gap_to_max", "log_lines",
    "overlap", "bm25_rel", "bm25_log", "exact_hits", "any_exact",
    "block_bm25_rel", "block_is_best", "block_exact", "block_enc_max", "block_enc_gap",
    "neighbour_enc_max", "blank", "line_len",
)
LEXICAL = ("overlap", "bm25_rel", "bm25_log", "exact_hits", "any_exact")
BLOCK = ("block_bm25_rel", "block_is_best", "block_exact", "block_enc_max", "block_enc_gap", "neighbour_enc_max")

QUERY_CHARS = 1000
_WORD = re.compile(r"[A-Za-z0-9_]+")
_IDENTIFIER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/\-]*[A-Za-z0-9_]|[A-Za-z0-9_]")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
STOPWORDS = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "by", "does", "do", "did", "for", "from", "has", "have", "how", "i", "in", "is", "it", "its", "of", "on", "or", "the", "this", "that", "to", "was", "were", "what", "when", "where", "which", "who", "why", "with", "will", "would", "can", "could", "should", "there", "their", "them", "these", "those", "what's", "all", "any", "my", "me", "we", "our", "you", "your", "show", "find", "get", "line", "lines", "output", "file", "files"])


def subwords(text: str) -> list[str]:
    """Lower-case word parts: ``parse_config`` -> parse, config; ``ParseConfig`` -> parse, config."""
    out = []
    for word in _WORD.findall(text):
        for part in word.split("_"):
            out.extend(p.lower() for p in _CAMEL.findall(part))
    return out


def terms(text: str) -> list[str]:
    """Identifier-aware terms: the word parts plus each whole identifier (lower case) with a part."""
    parts = subwords(text)
    wholes = [w.lower() for w in _WORD.findall(text) if ("_" in w or _has_inner_capital(w))]
    return parts + wholes


def _has_inner_capital(word: str) -> bool:
    return any(c.isupper() for c in word[1:]) and any(c.islower() for c in word)


def symbols(query: str) -> list[str]:
    """The query's tokens that look like a symbol, code or file (``test_foo``, ``E501``, ``a/b.py``,
    ``ParseError``, ``foo()``): matched verbatim, case-sensitively, since a near miss is another symbol."""
    found: dict[str, None] = {}  # ordered and O(1) to test: a long query must not cost its length squared
    for token in _IDENTIFIER.findall(query):
        token = token.strip(".:-/")
        if len(token) < 3:
            continue
        symbol_like = ("_" in token or "." in token or "/" in token or "::" in token or _has_inner_capital(token)
                       or (any(c.isdigit() for c in token) and any(c.isalpha() for c in token)))
        if symbol_like:
            found.setdefault(token)
    return list(found)


def bm25(docs: Sequence[Counter], query: Sequence[str], k1: float = 1.5, b: float = 0.75) -> np.ndarray:
    """BM25 of each document (a term Counter) against the query terms, IDF from these documents."""
    n = len(docs)
    if not n or not query:
        return np.zeros(n)
    lengths = np.array([sum(d.values()) for d in docs], dtype=np.float64)
    mean_length = max(lengths.mean(), 1e-9)
    scores = np.zeros(n)
    for term in set(query):
        tf = np.array([d.get(term, 0) for d in docs], dtype=np.float64)
        df = int((tf > 0).sum())
        if not df:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        scores += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths / mean_length))
    return scores


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def line_terms_of(lines: Sequence[str]) -> list[Counter]:
    """Each line's ``terms`` as a Counter: computed once per output, shared by the shortlist and the fusion."""
    return [Counter(terms(line)) for line in lines]


def line_features(query: str, lines: Sequence[str], probs: np.ndarray,
                  line_terms: Sequence[Counter] | None = None, scored: np.ndarray | None = None) -> np.ndarray:
    """(lines x len(FEATURES)) features of one output, from its lines and the encoder's probabilities
    (``line_terms``: ``line_terms_of(lines)`` when the caller already has them; ``scored``: the lines the
    encoder read when a shortlist left others out, so a line's rank is among the lines that have a score,
    as it was for every output the combiner was fitted on)."""
    n = len(lines)
    logit = _logit(probs)
    if n == 0:
        return np.zeros((0, len(FEATURES)))
    # Every feature costs (query terms x output); a query is a short need (the prompt contract cuts it at
    # 1,000 characters too, and every query the combiner was fitted on is shorter), so a pasted megabyte
    # must not make it cost minutes.
    query = query[:QUERY_CHARS]
    query_terms = [t for t in dict.fromkeys(terms(query)) if t not in STOPWORDS]
    line_terms = line_terms if line_terms is not None else line_terms_of(lines)
    overlap = np.array([sum(t in c for t in query_terms) for c in line_terms], dtype=np.float64)
    overlap /= max(len(query_terms), 1)
    line_bm25 = bm25(line_terms, query_terms)
    query_symbols = symbols(query)
    exact = np.array([sum(s in line for s in query_symbols) for line in lines], dtype=np.float64)

    blocks = block_ids(lines)
    n_blocks = int(blocks[-1]) + 1
    block_terms = [Counter() for _ in range(n_blocks)]
    for b, c in zip(blocks, line_terms):
        block_terms[b].update(c)
    block_score = bm25(block_terms, query_terms) if n_blocks > 1 else np.zeros(1)
    block_exact = np.zeros(n_blocks)
    np.maximum.at(block_exact, blocks, exact > 0)
    block_enc = np.full(n_blocks, -np.inf)
    np.maximum.at(block_enc, blocks, logit)
    best_block = block_score.max() if n_blocks else 0.0

    # share of the output's lines scoring strictly higher (ties share a rank)
    ranked = logit if scored is None else logit[scored]
    rank = (len(ranked) - np.searchsorted(np.sort(ranked), logit, side="right")) / max(len(ranked), 1)
    padded = np.pad(logit, 1, constant_values=-14.0)
    neighbours = np.maximum(padded[:-2], padded[2:])
    top = logit.max()
    columns = {
        "enc_logit": logit, "enc_rank": rank, "enc_gap_to_max": logit - top,
        "log_lines": np.full(n, math.log(n + 1)),
        "overlap": overlap, "bm25_rel": line_bm25 / max(line_bm25.max(), 1e-9), "bm25_log": np.log1p(line_bm25),
        "exact_hits": np.minimum(exact, 3), "any_exact": (exact > 0).astype(np.float64),
        "block_bm25_rel": block_score[blocks] / max(best_block, 1e-9),
        "block_is_best": ((block_score[blocks] >= best_block) & (best_block > 0) & (n_blocks > 1)).astype(np.float64),
        "block_exact": block_exact[blocks], "block_enc_max": block_enc[blocks], "block_enc_gap": block_enc[blocks] - top,
        "neighbour_enc_max": neighbours, "blank": np.array([not line.strip() for line in lines], dtype=np.float64),
        "line_len": np.log1p(np.array([len(line) for line in lines], dtype=np.float64)),
    }
    return np.stack([columns[name] for name in FEATURES], axis=1)
