"""Score every line of many outputs in one pass, and turn scores into kept lines.

Windows from all requests are sorted by length and batched under a token budget, so padding stays
small and a batch of short outputs costs about what its tokens cost.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from squeez_ray.infer.cancel import raise_if_cancelled
from squeez_ray.infer.encoder.tokens import line_tokenizer
from squeez_ray.infer.encoder.windows import Window, WindowSpec, build_windows, pad_windows_np

# forward(input_ids, attention_mask, token_type_ids, line_of_token, n_lines) -> (B, >= n_lines) keep-probabilities;
# the arrays are int64 numpy. The torch and the ONNX runtimes each supply one; all else is shared.
Forward = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int], np.ndarray]


def windows_for(tokenizer: Any, query: str, tool_output: str, spec: WindowSpec) -> tuple[int, list[Window]]:
    """(number of lines, windows) of one output; ``tokenizer`` is a LineTokenizer or a transformers fast one."""
    tokens = line_tokenizer(tokenizer)
    query_ids, line_ids = encode_output(tokens, query, tool_output.split("\n"), spec)
    return len(line_ids), build_windows(query_ids, line_ids, spec, tokens.cls_id, tokens.sep_id)


def encode_output(tokenizer: Any, query: str, lines: Sequence[str], spec: WindowSpec
                  ) -> tuple[list[int], list[list[int]]]:
    """(query ids, per-line ids) as the windows cut them: once per output, shared by the shortlist's token
    budget and the windows."""
    tokens = line_tokenizer(tokenizer)
    return tokens.encode([query], spec.max_query_tokens)[0], tokens.encode(list(lines), spec.max_tokens_per_line)


# A line the shortlist left out is not scored; it gets this probability (scored lines rarely go lower), so
# the fusion and the decoders see it as the encoder's least likely line.
UNSCORED = 1e-4


def score_windows(forward: Forward, tokenizer: Any, spec: WindowSpec, pairs: Sequence[tuple[str, str]], *,
                  tokens_per_batch: int = 8192, missed: list[np.ndarray] | None = None) -> list[np.ndarray]:
    """Per pair (query, tool_output): an array with one keep-probability per output line, the best
    over the windows that hold the line (every line scored, unless the time budget cut it: ``missed``
    as in score_encoded)."""
    tokens = line_tokenizer(tokenizer)
    encoded = []
    for query, output in pairs:
        raise_if_cancelled()
        query_ids, line_ids = encode_output(tokens, query, output.split("\n"), spec)
        encoded.append((query_ids, line_ids, None))
    return score_encoded(forward, tokens, spec, encoded, tokens_per_batch=tokens_per_batch, missed=missed)


def score_encoded(forward: Forward, tokenizer: Any, spec: WindowSpec,
                  encoded: Sequence[tuple[Sequence[int], Sequence[Sequence[int]], np.ndarray | None]], *,
                  tokens_per_batch: int = 8192, missed: list[np.ndarray] | None = None) -> list[np.ndarray]:
    """Score encoded outputs ``(query ids, line ids, subset)``: with ``subset`` (sorted 0-based line
    indices) only those lines are packed into windows, in order, and the others get ``UNSCORED``; None
    scores every line. Windows of all outputs are sorted by length and batched under ``tokens_per_batch``
    (rows x longest row), so padding stays small. Raises ``Cancelled`` between passes once the caller's
    cancel check says so (squeez_ray.infer.cancel). Past the call's time budget (squeez_ray.infer.budget) it
    stops between batches: the lines not yet scored keep ``UNSCORED``; ``missed``, a list, receives one
    boolean array per output: the lines it was asked to score and did not (all False unless cut short)."""
    from squeez_ray.infer.budget import out_of_time

    tokens = line_tokenizer(tokenizer)
    scores: list[np.ndarray] = []
    todo = [np.zeros(len(line_ids), dtype=bool) for _, line_ids, _ in encoded]  # lines asked, not yet scored
    positions: list[np.ndarray] = []  # per run of lines: window line index -> output line index
    jobs: list[tuple[int, int, Window]] = []  # (output, run of lines, window)
    for i, (query_ids, line_ids, subset) in enumerate(encoded):
        n_lines = len(line_ids)
        if subset is None:
            scores.append(np.zeros(n_lines, dtype=np.float32))
            runs = [np.arange(n_lines)]
        else:
            scores.append(np.full(n_lines, UNSCORED, dtype=np.float32))
            # one run of windows per stretch of consecutive lines: a window never joins two distant blocks,
            # whose lines the encoder (trained on contiguous windows) would read as one another's context
            subset = np.asarray(subset, dtype=np.int64)
            runs = np.split(subset, np.flatnonzero(np.diff(subset) > 1) + 1) if len(subset) else []
        for run in runs:
            todo[i][run] = True
            positions.append(run)
            windows = build_windows(query_ids, [line_ids[k] for k in run], spec, tokens.cls_id, tokens.sep_id)
            jobs.extend((i, len(positions) - 1, w) for w in windows if w.n_lines)
    jobs.sort(key=lambda job: len(job[2].input_ids))
    start = 0
    while start < len(jobs):
        raise_if_cancelled()  # a Serve caller that timed out stops its replica here, between passes
        if out_of_time():  # answer from what was scored rather than run into the caller's timeout
            break
        end = start + 1
        while end < len(jobs) and (end - start + 1) * len(jobs[end][2].input_ids) <= tokens_per_batch:
            end += 1
        batch = jobs[start:end]
        windows = [w for _, _, w in batch]
        arrays = pad_windows_np([w.input_ids for w in windows], [w.token_type_ids for w in windows],
                                [w.line_of_token for w in windows], tokens.pad_id)
        probs = forward(*arrays, max(w.n_lines for w in windows))
        for row, (i, run, w) in enumerate(batch):
            where = positions[run][w.first_line:w.first_line + w.n_lines]
            scores[i][where] = np.maximum(scores[i][where], probs[row, :w.n_lines])
            todo[i][where] = False
        start = end
    if start < len(jobs):  # cut short: a line no window scored is the encoder's least likely line
        for i, left in enumerate(todo):
            scores[i][left] = UNSCORED
    if missed is not None:
        missed.extend(todo)
    return scores


def torch_forward(model: Any, dtype: str | None = None) -> Forward:
    """The torch runtime's forward: the model on its device; bf16 autocast for ``dtype`` bfloat16, none
    for float32, and for None / "auto" where the device has fast bf16 kernels (squeez_ray.infer.precision)."""
    import torch

    from squeez_ray.infer.precision import autocast_bf16

    device = next(model.parameters()).device
    use_autocast = autocast_bf16(dtype, device.type)

    def forward(ids, mask, types, owner, n_lines):
        with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_autocast):
            tensors = (torch.from_numpy(a).to(device) for a in (ids, mask, types, owner))
            return torch.sigmoid(model(*tensors, n_lines).float()).cpu().numpy()

    return forward


def score_lines(model: Any, tokenizer: Any, spec: WindowSpec, pairs: Sequence[tuple[str, str]], *,
                tokens_per_batch: int = 8192, dtype: str | None = None) -> list[np.ndarray]:
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
