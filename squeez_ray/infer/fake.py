"""A deterministic fake engine for tests of the layers above (CLI, Serve, bulk jobs).

It answers like a model would, through the real path: it reads the query and the tool output
back out of the rendered prompt, and replies in the XML target with the lines that contain
a query word (ends stripped, so the mapping's whitespace handling is exercised too). The
GenerativePruner then parses the reply and maps it to source lines exactly as for a real model.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from squeez_ray.infer.generative import ChunkJob, Engine, Generation, GenerativePruner
from squeez_ray.prompt import render_target

_QUERY = re.compile(r"<query>\n(.*?)\n</query>", re.DOTALL)
_OUTPUT = re.compile(r"<tool_output>\n(.*)\n</tool_output>", re.DOTALL)
_WORD = re.compile(r"[A-Za-z0-9_]{3,}")
# Words too common to say anything about relevance.
_STOP = {"the", "and", "for", "what", "which", "where", "why", "how", "does", "this", "that", "with", "from", "are", "was"}


def fake_reply(query: str, tool_output: str) -> str:
    words = {w.lower() for w in _WORD.findall(query)} - _STOP
    kept = [line.strip() for line in tool_output.split("\n")
            if line.strip() and any(w in line.lower() for w in words)]
    return render_target(kept)


class FakeEngine(Engine):
    """Characters/4 token counts, a configurable context, and the keyword reply above."""

    def __init__(self, max_context_tokens: int = 8192, model_name: str = "fake"):
        self.max_context_tokens = max_context_tokens
        self.model_name = model_name
        self.calls: list[int] = []  # batch sizes seen, for tests of batching

    def generate(self, jobs: Sequence[ChunkJob]) -> list[Generation]:
        self.calls.append(len(jobs))
        out = []
        for job in jobs:
            query, output = _QUERY.search(job.prompt), _OUTPUT.search(job.prompt)
            if query is None or output is None:
                raise ValueError("fake engine: the prompt does not follow the prompt contract")
            reply = fake_reply(query.group(1), output.group(1))
            prompt_tokens = self.count_tokens(job.prompt)
            # A real model obeys its token limit; so does the fake (the reply is then cut, unclosed).
            reply = reply[: job.max_new_tokens * 4]
            out.append(Generation(reply, prompt_tokens, self.count_tokens(reply)))
        return out


def build_fake(options: Any) -> GenerativePruner:
    engine = FakeEngine(max_context_tokens=options.max_context_tokens or 8192)
    return GenerativePruner(engine, options, model_dir=options.model)
