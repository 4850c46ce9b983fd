"""Score every line of many outputs in one pass, and turn scores into kept lines.

Windows from all requests are sorted by length and batched under a token budget, so padding stays
small and a batch of short outputs costs about what its tokens cost.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from squeez_ray.infer.cancel import raise_if_cancelled
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
    ``tokens_per_batch`` (rows x longest row), so padding stays small. Raises ``Cancelled`` between
    passes once the caller's cancel check says so (squeez_ray.infer.cancel)."""
    pad_id = line_tokenizer(tokenizer).pad_id
    scores: list[np.ndarray] = []
    jobs: list[tuple[int, Window]] = []
    for i, (query, output) in enumerate(pairs):
        raise_if_cancelled()
        n_lines, windows = windows_for(tokenizer, query, output, spec)
        scores.append(np.zeros(n_lines, dtype=np.float32))
        jobs.extend((i, w) for w in windows)
    jobs.sort(key=lambda job: len(job[1].input_ids))
    start = 0
    while start < len(jobs):
        raise_if_cancelled()  # a Serve caller that timed out stops its replica here, between passes
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
