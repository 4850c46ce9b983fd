"""The one tokenization path of both encoder runtimes (torch and ONNX): a ``tokenizers.Tokenizer``.

A Hugging Face fast tokenizer is a thin wrapper over a ``tokenizers.Tokenizer`` (its
``backend_tokenizer``), and ``tokenizer.json`` is that object serialised. Both runtimes go through
:class:`LineTokenizer`, so the torch pruner (and training) and the ONNX pruner cut the same tokens
from the same text; the ONNX runtime loads ``tokenizer.json`` with ``tokenizers`` alone, without
transformers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

# Characters of a text read per token kept. The tokenizer truncates only after encoding the whole
# text: a 14 MB single-line output took ~3 GB and ~2 minutes for its first 32 tokens. A WordPiece
# token spans at most ~100 characters (a longer word is one [UNK]) plus the spaces before it, so
# cutting at 128 per token keeps the same tokens on any line not made mostly of long space runs.
CHARS_PER_TOKEN = 128


class LineTokenizer:
    """Text -> token ids without special tokens, truncated per text; plus the ids that build windows."""

    def __init__(self, backend: Any, cls_id: int, sep_id: int, pad_id: int):
        # A private copy: truncation is set per call, and the caller's tokenizer must not change.
        from tokenizers import Tokenizer

        self._backend = Tokenizer.from_str(backend.to_str())
        self._backend.no_padding()
        self._backend.no_truncation()
        self._max: int | None = None
        self.cls_id, self.sep_id, self.pad_id = cls_id, sep_id, pad_id

    @classmethod
    def from_file(cls, path: str | Path, special_ids: dict[str, int]) -> "LineTokenizer":
        """From ``tokenizer.json`` and the ids recorded at export (``cls``, ``sep``, ``pad``)."""
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_file(str(path)), special_ids["cls"], special_ids["sep"], special_ids.get("pad", 0))

    def encode(self, texts: Sequence[str], max_tokens: int) -> list[list[int]]:
        if not texts:
            return []
        if self._max != max_tokens:
            self._backend.enable_truncation(max_tokens)
            self._max = max_tokens
        cut = max_tokens * CHARS_PER_TOKEN
        texts = [text[:cut] for text in texts]
        return [e.ids for e in self._backend.encode_batch(texts, add_special_tokens=False)]

    def special_ids(self) -> dict[str, int]:
        return {"cls": self.cls_id, "sep": self.sep_id, "pad": self.pad_id}


def line_tokenizer(tokenizer: Any) -> LineTokenizer:
    """A LineTokenizer as is, or one made (once, cached on it) from a transformers fast tokenizer."""
    if isinstance(tokenizer, LineTokenizer):
        return tokenizer
    cached = getattr(tokenizer, "_squeez_line_tokenizer", None)
    if cached is not None:
        return cached
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ValueError("the encoder needs a fast (Rust `tokenizers`) tokenizer with a tokenizer.json")
    cls_id = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    sep_id = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    if cls_id is None or sep_id is None:
        raise ValueError("the encoder's tokenizer needs a CLS/BOS and a SEP/EOS token to mark lines")
    made = LineTokenizer(backend, cls_id, sep_id, tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)
    try:
        tokenizer._squeez_line_tokenizer = made
    except AttributeError:  # a tokenizer that refuses attributes: build it per call
        pass
    return made
