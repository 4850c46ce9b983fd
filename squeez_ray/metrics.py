"""Pruning metrics exactly as METRICS.md sections 2 and 3 define them, as pure functions.

Scores are per example; ``summarize`` takes their macro mean. Section 2 (paper-compatible) works on
text: ``norm`` lines of the predicted and gold text. Section 3 adds position-aware line-index scores,
character / token compression, span recall at a tolerance, and cost.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from squeez_ray.spans import kept_text, line_numbers_of, split_lines

PRF = tuple[float, float, float]
FUZZY_THRESHOLD = 0.5
SPAN_TOLERANCE = 0.5
CHARS_PER_TOKEN = 4  # METRICS.md: without a tokenizer, tokens are characters / 4


def norm(text: str) -> list[str]:
    """Split on "\\n", strip each line, drop the lines that are empty after stripping."""
    return [s for s in (line.strip() for line in text.split("\n")) if s]


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def _empty_case(n_pred: int, n_gold: int) -> PRF | None:
    if not n_pred and not n_gold:
        return 1.0, 1.0, 1.0
    if not n_pred or not n_gold:
        return 0.0, 0.0, 0.0
    return None


def strict_scores(pred: Sequence[str], gold: Sequence[str]) -> PRF:
    """Set precision / recall / F1 over normalised lines (position ignored, duplicates collapse)."""
    p, g = set(pred), set(gold)
    empty = _empty_case(len(p), len(g))
    if empty:
        return empty
    tp = len(p & g)
    precision, recall = tp / len(p), tp / len(g)
    return precision, recall, _f1(precision, recall)


def exact_match(pred: Sequence[str], gold: Sequence[str]) -> float:
    return 1.0 if set(pred) == set(gold) else 0.0


def _bigrams(line: str) -> set[str]:
    return {line[i:i + 2] for i in range(len(line) - 1)}


def pair_score(a: str, b: str) -> float:
    """1 if equal; len(shorter)/len(longer) if one contains the other; else bigram-set Dice."""
    if a == b:
        return 1.0
    if a in b or b in a:
        return min(len(a), len(b)) / max(len(a), len(b))
    x, y = _bigrams(a), _bigrams(b)
    if not x or not y:
        return 0.0
    return 2 * len(x & y) / (len(x) + len(y))


def fuzzy_scores(pred: Sequence[str], gold: Sequence[str], threshold: float = FUZZY_THRESHOLD) -> PRF:
    """The paper's headline F1: greedy one-to-one matching of pairs scoring >= ``threshold``,
    best score first; equal scores keep (pred index, gold index) order. Duplicates are kept.

    Same result as scoring every pair with ``pair_score``, but cheaper: each distinct pair of
    strings is scored once, and pairs that provably score below the threshold are skipped
    (a substring scores its length ratio, Dice is at most 2*min/(|A|+|B|) of the bigram set sizes).
    """
    empty = _empty_case(len(pred), len(gold))
    if empty:
        return empty
    gold_at: dict[str, list[int]] = {}
    for j, line in enumerate(gold):
        gold_at.setdefault(line, []).append(j)
    pred_at: dict[str, list[int]] = {}
    for i, line in enumerate(pred):
        pred_at.setdefault(line, []).append(i)
    gold_info = [(line, len(line), _bigrams(line)) for line in gold_at]
    candidates: list[tuple[float, int, int]] = []
    for a, a_rows in pred_at.items():
        la, ba = len(a), None
        for b, lb, bb in gold_info:
            if a == b:
                score = 1.0
            else:
                short, long_ = (la, lb) if la <= lb else (lb, la)
                if 2 * short < long_:
                    # A substring would score < threshold; Dice needs set sizes within a factor of 3.
                    if ba is None:
                        ba = _bigrams(a)
                    na, nb = len(ba), len(bb)
                    if not na or not nb or 3 * min(na, nb) < max(na, nb) or (a in b or b in a):
                        continue
                    score = 2 * len(ba & bb) / (na + nb)
                elif a in b or b in a:
                    score = short / long_
                else:
                    if ba is None:
                        ba = _bigrams(a)
                    na, nb = len(ba), len(bb)
                    if not na or not nb:
                        continue
                    score = 2 * len(ba & bb) / (na + nb)
            if score >= threshold:
                candidates.extend((score, i, j) for i in a_rows for j in gold_at[b])
    candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
    used_pred: set[int] = set()
    used_gold: set[int] = set()
    for _, i, j in candidates:
        if i not in used_pred and j not in used_gold:
            used_pred.add(i)
            used_gold.add(j)
    tp = len(used_pred)
    precision, recall = tp / len(pred), tp / len(gold)
    return precision, recall, _f1(precision, recall)


def line_compression(pred_text: str, tool_output: str) -> float:
    """``1 - lines(pred) / lines(output)``; an empty prediction counts as one line."""
    return 1.0 - len(pred_text.split("\n")) / len(tool_output.split("\n"))


def line_index_scores(pred_lines: Iterable[int], gold_lines: Iterable[int]) -> PRF:
    """Precision / recall / F1 over kept vs gold line numbers (a repeated line counts where it is)."""
    p, g = set(pred_lines), set(gold_lines)
    empty = _empty_case(len(p), len(g))
    if empty:
        return empty
    tp = len(p & g)
    return tp / len(p), tp / len(g), _f1(tp / len(p), tp / len(g))


def span_recall(pred_lines: Iterable[int], gold_spans: Sequence[Sequence[int]],
                tolerance: float = SPAN_TOLERANCE) -> float | None:
    """Share of gold spans with at least ``tolerance`` of their lines kept; None without gold spans."""
    if not gold_spans:
        return None
    kept = set(pred_lines)
    found = 0
    for start, end in gold_spans:
        hits = sum(1 for n in range(start, end + 1) if n in kept)
        found += hits >= tolerance * (end - start + 1)
    return found / len(gold_spans)


def _ratio_kept(pred: float, total: float) -> float:
    return 1.0 - pred / total if total else 0.0


def score_example(tool_output: str, gold_spans: Sequence[Sequence[int]], pred_spans: Sequence[Sequence[int]],
                  count_tokens: Callable[[str], int] | None = None) -> dict[str, Any]:
    """Every per-example metric of METRICS.md sections 2 and 3 (cost fields are added by the caller).

    Spans are 1-based inclusive ``(start, end)`` pairs, already normalised.
    """
    lines = split_lines(tool_output)
    gold_text, pred_text = kept_text(lines, gold_spans), kept_text(lines, pred_spans)
    g, p = norm(gold_text), norm(pred_text)
    precision, recall, strict_f1 = strict_scores(p, g)
    fuzzy_p, fuzzy_r, fuzzy_f1 = fuzzy_scores(p, g)
    pred_numbers, gold_numbers = line_numbers_of(pred_spans), line_numbers_of(gold_spans)
    line_p, line_r, line_f1 = line_index_scores(pred_numbers, gold_numbers)
    tokens = count_tokens or (lambda text: len(text) / CHARS_PER_TOKEN)
    return {
        "precision": precision, "recall": recall, "strict_f1": strict_f1, "exact": exact_match(p, g),
        "fuzzy_precision": fuzzy_p, "fuzzy_recall": fuzzy_r, "f1": fuzzy_f1,
        "compression": line_compression(pred_text, tool_output),
        "gold_compression": line_compression(gold_text, tool_output),
        "line_precision": line_p, "line_recall": line_r, "line_f1": line_f1,
        "char_compression": _ratio_kept(len(pred_text), len(tool_output)),
        "token_compression": _ratio_kept(tokens(pred_text), tokens(tool_output)),
        "span_recall": span_recall(pred_numbers, gold_spans),
        # A prediction of blank lines only is empty text, as the strict scores see it.
        "is_negative": not gold_spans, "pred_empty": not p,
        "total_lines": len(lines), "kept_lines": len(pred_numbers), "gold_lines": len(gold_numbers),
    }


# Keys every summary has (the contract other tools read in metrics.json), then the extras.
REQUIRED_KEYS = ("precision", "recall", "strict_f1", "exact", "f1", "compression", "negatives_empty", "n")
MEAN_KEYS = ("precision", "recall", "strict_f1", "exact", "f1", "compression", "fuzzy_precision", "fuzzy_recall",
             "line_precision", "line_recall", "line_f1", "char_compression", "token_compression",
             "gold_compression", "span_recall", "latency_ms", "input_tokens", "output_tokens")


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Macro means over per-example rows. ``negatives_empty`` is over rows without gold (None if
    there are none); ``span_recall`` over rows with gold; ``n_unpruned`` counts fail-open rows."""
    out: dict[str, Any] = {}
    for key in MEAN_KEYS:
        values = [float(r[key]) for r in rows if r.get(key) is not None and not _is_nan(r[key])]
        out[key] = sum(values) / len(values) if values else None
    negatives = [r for r in rows if r["is_negative"]]
    out["negatives_empty"] = sum(bool(r["pred_empty"]) for r in negatives) / len(negatives) if negatives else None
    out["n"] = len(rows)
    out["n_negatives"] = len(negatives)
    out["n_unpruned"] = sum(1 for r in rows if r.get("pruned") is False)
    out.update(answer_rates(rows))
    return {**{k: out[k] for k in REQUIRED_KEYS}, **{k: v for k, v in out.items() if k not in REQUIRED_KEYS}}


def answer_rates(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """How well a generative model kept to the answer contract, pooled over all its answers (none
    for backends that write no answers): ``answers_parsed``, the share of answers with the answer
    tags opened and closed; ``lines_verbatim``, the share of the non-blank lines it wrote that equal
    a source line (up to whitespace); ``lines_dropped``, the share that matched no source line even
    by the fuzzy pass (hallucinated: counted here, never returned)."""
    answers = sum(int(r.get("answers") or 0) for r in rows)
    if not answers:
        return {}
    written = sum(int(r.get("answer_lines") or 0) for r in rows)
    fuzzy = sum(int(r.get("fuzzy_lines") or 0) for r in rows)
    dropped = sum(int(r.get("unmatched_lines") or 0) for r in rows)
    out = {"answers_parsed": 1.0 - sum(int(r.get("unparsed_answers") or 0) for r in rows) / answers}
    if written:
        out["lines_verbatim"] = (written - fuzzy - dropped) / written
        out["lines_dropped"] = dropped / written
    return out


def summarize_by_tool(rows: Sequence[Mapping[str, Any]], key: str = "tool_type") -> dict[str, dict[str, Any]]:
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(str(row.get(key) or "unknown"), []).append(row)
    return {name: summarize(group) for name, group in sorted(groups.items())}


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)
