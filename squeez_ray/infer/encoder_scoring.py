"""Score every line of many outputs in one pass, and turn scores into kept lines.

Windows from all requests are sorted by length and batched under a token budget, so padding stays
small and a batch of short outputs costs about what its tokens cost.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from squeez_ray.infer.encoder_tokens import line_tokenizer
from squeez_ray.infer.encoder_windows import Window, WindowSpec, build_windows, pad_windows_np

# forward(input_ids, attention_mask, token_type_ids, line_of_token, n_lines) -> (B, >= n_lines) keep-probabilities;
# the arrays are int64 numpy. The torch and the ONNX runtimes each supply one; all else is shared.
Forward = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int], np.ndarray]


def windows_for(tokenizer: Any, query: str, tool_output: str, spec: WindowSpec) -> tuple[int, list[Window]]:
    """(number of lines, windows) of one output; ``tokenizer`` is a LineTokenizer or a transformers fast one."""
    tokens = line_tokenizer(tokenizer)
    lines = tool_output.split("\n")
    query_ids = tokens.encode([query], spec.max_query_tokens)[0]
    return len(lines), build_windows(query_ids, tokens.encode(lines, spec.max_tokens_per_line), spec,
                                     tokens.cls_id, tokens.sep_id)


def score_windows(forward: Forward, tokenizer: Any, spec: WindowSpec, pairs: Sequence[tuple[str, str]], *,
                  tokens_per_batch: int = 8192) -> list[np.ndarray]:
    """Per pair (query, tool_output): an array with one keep-probability per output line, the best
    over the windows that hold the line. Windows of all pairs are sorted by length and batched under
    ``tokens_per_batch`` (rows x longest row), so padding stays small."""
    pad_id = line_tokenizer(tokenizer).pad_id
    scores: list[np.ndarray] = []
    jobs: list[tuple[int, Window]] = []
    for i, (query, output) in enumerate(pairs):
        n_lines, windows = windows_for(tokenizer, query, output, spec)
        scores.append(np.zeros(n_lines, dtype=np.float32))
        jobs.extend((i, w) for w in windows)
    jobs.sort(key=lambda job: len(job[1].input_ids))
    start = 0
    while start < len(jobs):
        end = start + 1
        while end < len(jobs) and (end - start + 1) * len(jobs[end][1].input_ids) <= tokens_per_batch:
            end += 1
        batch = jobs[start:end]
        windows = [w for _, w in batch]
        arrays = pad_windows_np([w.input_ids for w in windows], [w.token_type_ids for w in windows],
                                [w.line_of_token for w in windows], pad_id)
        probs = forward(*arrays, max(w.n_lines for w in windows))
        for row, (i, w) in enumerate(batch):
            target = scores[i][w.first_line:w.first_line + w.n_lines]
            np.maximum(target, probs[row, :w.n_lines], out=target)
        start = end
    return scores


def torch_forward(model: Any, dtype: str | None = "bfloat16") -> Forward:
    """The torch runtime's forward: the model on its device, bf16 autocast unless ``dtype`` is float32."""
    import torch

    device = next(model.parameters()).device
    use_autocast = dtype in ("bfloat16", "bf16")

    def forward(ids, mask, types, owner, n_lines):
        with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_autocast):
            tensors = (torch.from_numpy(a).to(device) for a in (ids, mask, types, owner))
            return torch.sigmoid(model(*tensors, n_lines).float()).cpu().numpy()

    return forward


def score_lines(model: Any, tokenizer: Any, spec: WindowSpec, pairs: Sequence[tuple[str, str]], *,
                tokens_per_batch: int = 8192, dtype: str | None = "bfloat16") -> list[np.ndarray]:
    """score_windows with a torch model (training's calibration, the torch pruner, tests)."""
    return score_windows(torch_forward(model, dtype), tokenizer, spec, pairs, tokens_per_batch=tokens_per_batch)


def select_lines(scores: np.ndarray, threshold: float, bridge_gap: int) -> list[int]:
    """1-based kept lines: those scoring >= threshold, with gaps of <= bridge_gap lines filled in.

    Bridging keeps a block whole when a blank or low-scoring line sits inside it (a traceback with a
    blank line, a function with a comment), which is how an agent wants to read it.
    """
    kept = [int(i) + 1 for i in np.flatnonzero(scores >= threshold)]
    bridged: list[int] = []
    for n in kept:
        if bridged and 1 < n - bridged[-1] <= bridge_gap + 1:
            bridged.extend(range(bridged[-1] + 1, n))
        bridged.append(n)
    return bridged


def calibrate_threshold(scores: Sequence[np.ndarray], labels: Sequence[np.ndarray], target_recall: float) -> dict[str, float]:
    """The highest threshold whose line-level recall over all positive lines is >= ``target_recall``.

    Returns the threshold with the recall, precision and kept share it gives on these examples
    (before gap bridging, which only adds lines).
    """
    if not 0 < target_recall <= 1:
        raise ValueError(f"target_recall must be in (0, 1], got {target_recall}")
    flat_scores = np.concatenate([np.asarray(s, dtype=np.float64) for s in scores]) if scores else np.zeros(0)
    flat_labels = np.concatenate([np.asarray(y, dtype=bool) for y in labels]) if labels else np.zeros(0, bool)
    positives = np.sort(flat_scores[flat_labels])[::-1]
    if positives.size == 0:
        raise ValueError("cannot calibrate: the calibration set has no positive lines")
    k = int(np.ceil(target_recall * positives.size))  # need at least k positives at or above t
    threshold = float(positives[k - 1])
    kept = flat_scores >= threshold
    tp = int((kept & flat_labels).sum())
    return {"threshold": threshold, "target_recall": target_recall, "recall": tp / positives.size,
            "precision": tp / max(int(kept.sum()), 1), "kept_share": float(kept.mean()),
            "positive_lines": int(positives.size), "lines": int(flat_scores.size)}


def threshold_for_kept_share(scores: Sequence[np.ndarray], labels: Sequence[np.ndarray],
                             kept_share: float) -> dict[str, float]:
    """The threshold keeping about ``kept_share`` of all lines (a compression target), with the
    recall and precision it gives on these examples; the alternative to a recall target when the
    deployment's constraint is how much the agent reads."""
    if not 0 < kept_share <= 1:
        raise ValueError(f"kept_share must be in (0, 1], got {kept_share}")
    flat_scores = np.concatenate([np.asarray(s, dtype=np.float64) for s in scores])
    flat_labels = np.concatenate([np.asarray(y, dtype=bool) for y in labels])
    ranked = np.sort(flat_scores)[::-1]
    threshold = float(ranked[max(int(kept_share * ranked.size), 1) - 1])
    kept = flat_scores >= threshold
    tp = int((kept & flat_labels).sum())
    return {"threshold": threshold, "target_kept_share": kept_share, "recall": tp / max(int(flat_labels.sum()), 1),
            "precision": tp / max(int(kept.sum()), 1), "kept_share": float(kept.mean()),
            "positive_lines": int(flat_labels.sum()), "lines": int(flat_scores.size)}


def threshold_for_best_f1(scores: Sequence[np.ndarray], labels: Sequence[np.ndarray], bridge_gap: int,
                          max_kept_share: float = 0.1, candidates: int = 200) -> dict[str, float]:
    """The threshold with the best mean per-example line F1 (as the evaluation scores: both empty is
    1, one empty is 0), among those keeping on average at most ``max_kept_share`` of each output's
    lines. Unlike a pooled recall or kept-share target, this counts every example once (long outputs
    do not decide it) and rewards answering negatives with nothing."""
    from squeez_ray.evaluate.metrics import line_index_scores

    if not 0 < max_kept_share <= 1:
        raise ValueError(f"max_kept_share must be in (0, 1], got {max_kept_share}")
    flat = np.concatenate([np.asarray(x, dtype=np.float64) for x in scores])
    grid = np.unique(np.quantile(flat, np.linspace(0.5, 1.0, candidates)))
    gold = [set(np.flatnonzero(np.asarray(y) > 0) + 1) for y in labels]
    best: dict[str, float] | None = None
    for threshold in grid:
        f1s, shares = [], []
        for s, g in zip(scores, gold):
            kept = set(select_lines(np.asarray(s), float(threshold), bridge_gap))
            shares.append(len(kept) / max(len(s), 1))
            f1s.append(line_index_scores(kept, g)[2])
        point = {"threshold": float(threshold), "f1": float(np.mean(f1s)), "mean_kept_share": float(np.mean(shares)),
                 "negatives_empty": float(np.mean([not any(s >= threshold) for s, g in zip(scores, gold) if not g]))
                 if any(not g for g in gold) else float("nan")}
        if point["mean_kept_share"] <= max_kept_share and (best is None or point["f1"] > best["f1"]):
            best = point
    if best is None:
        raise ValueError(f"no threshold keeps at most {max_kept_share} of the lines")
    flat_labels = np.concatenate([np.asarray(y, dtype=bool) for y in labels])
    kept_flat = flat >= best["threshold"]
    tp = int((kept_flat & flat_labels).sum())
    return {**best, "objective": "f1", "max_kept_share": max_kept_share,
            "recall": tp / max(int(flat_labels.sum()), 1), "precision": tp / max(int(kept_flat.sum()), 1),
            "kept_share": float(kept_flat.mean()), "positive_lines": int(flat_labels.sum()), "lines": int(flat.size)}


CURVE_RECALLS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def calibration_curve(scores: Sequence[np.ndarray], labels: Sequence[np.ndarray],
                      recalls: Sequence[float] = CURVE_RECALLS) -> list[dict[str, float]]:
    """The dev trade-off at several recall targets (threshold, precision, kept share), stored in the
    checkpoint so a deployment can pick another operating point (``--threshold``) without rescoring."""
    return [{k: round(v, 4) if isinstance(v, float) else v for k, v in calibrate_threshold(scores, labels, r).items()
             if k in ("threshold", "target_recall", "recall", "precision", "kept_share")} for r in recalls]


def ranking_auc(scores: np.ndarray, labels: np.ndarray) -> float | None:
    """Probability that a random relevant line outscores a random irrelevant one (ties count half);
    None when one class is missing. Threshold-free, so it shows whether the model separates lines
    at all, apart from where the threshold sits."""
    labels = np.asarray(labels, dtype=bool)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if not n_pos or not n_neg:
        return None
    order = np.argsort(scores, kind="stable")
    ranks = np.empty(len(scores), dtype=np.float64)
    ranks[order] = np.arange(1, len(scores) + 1)
    sorted_scores = np.asarray(scores)[order]
    # average ranks over ties
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    for start, count in zip(first, counts):
        if count > 1:
            ranks[order[start:start + count]] = start + (count + 1) / 2
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def breakdown_by_group(scores: Sequence[np.ndarray], labels: Sequence[np.ndarray], groups: Sequence[str],
                       threshold: float) -> dict[str, dict[str, float | int | None]]:
    """Per group (tool type): examples, lines, relevant share, AUC, and the precision / recall /
    kept share the threshold gives. Stored with the calibration so a weak tool family shows on dev,
    without touching the evaluation cases."""
    out: dict[str, dict[str, float | int | None]] = {}
    for group in sorted(set(groups)):
        picked = [i for i, g in enumerate(groups) if g == group]
        s = np.concatenate([np.asarray(scores[i], dtype=np.float64) for i in picked])
        y = np.concatenate([np.asarray(labels[i], dtype=bool) for i in picked])
        kept = s >= threshold
        tp = int((kept & y).sum())
        auc = ranking_auc(s, y)
        out[group] = {"examples": len(picked), "lines": int(s.size), "relevant_share": round(float(y.mean()), 4),
                      "auc": None if auc is None else round(auc, 4),
                      "precision": round(tp / max(int(kept.sum()), 1), 4),
                      "recall": round(tp / max(int(y.sum()), 1), 4), "kept_share": round(float(kept.mean()), 4)}
    return out
