"""A single huge line costs the encoder only the characters its kept tokens can come from (issue #28:
a 14 MB line took ~3 GB and ~2 minutes to tokenise for the 32 tokens a line keeps)."""

from __future__ import annotations

import json
import resource
from pathlib import Path

from squeez_ray.infer.encoder.tokens import LineTokenizer

MODEL = Path(__file__).resolve().parents[2] / "squeez_ray" / "models" / "default"


def _tokenizer() -> LineTokenizer:
    settings = json.loads((MODEL / "squeez_encoder.json").read_text())
    return LineTokenizer.from_file(MODEL / "tokenizer.json", settings["special_ids"])


class _Recording:
    """The real backend tokenizer, recording the longest text it was given."""

    def __init__(self, backend):
        self.backend, self.longest = backend, 0

    def encode_batch(self, texts, **kwargs):
        self.longest = max([self.longest, *map(len, texts)])
        return self.backend.encode_batch(texts, **kwargs)

    def __getattr__(self, name):
        return getattr(self.backend, name)


def test_a_huge_line_is_cut_before_tokenising_and_keeps_the_same_tokens():
    tokenizer = _tokenizer()
    words = "FAILED tests/test_api.py::test_timeout - AssertionError: expected 504, got 200 (x=1, y=[2])"
    line = " ".join([words] * 2_000)  # ~190 KB: small enough to tokenise uncut for the comparison
    uncut = tokenizer._backend.encode(line, add_special_tokens=False).ids[:32]
    recording = _Recording(tokenizer._backend)
    tokenizer._backend = recording
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    huge = tokenizer.encode([line * 10], 32)[0]  # ~1.9 MB
    print(f"\nbenchmark: a 1.9 MB line, max RSS grew by {(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024} MiB")
    assert recording.longest <= 32 * 128  # tokens.CHARS_PER_TOKEN characters per kept token
    assert tokenizer.encode([line], 32)[0] == huge == uncut


def test_ordinary_lines_and_queries_are_tokenised_unchanged():
    tokenizer = _tokenizer()
    texts = ["E   AssertionError: expected 504, got 200", "", "    def test_timeout(client):", "ü" * 50]
    expected = [e.ids[:64] for e in tokenizer._backend.encode_batch(texts, add_special_tokens=False)]
    assert tokenizer.encode(texts, 64) == expected
