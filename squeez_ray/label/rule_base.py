"""What a rule sees of one observation, and its deterministic choices (shared by the rule modules)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from squeez_ray.spans import Span

# A rule's answer: (query, spans), or None when the output lacks what the rule looks for.
Found = tuple[str, list[Span]] | None

@dataclass(frozen=True)
class Obs:
    """What a rule sees: the output's lines, the argv it came from, the task text, a stable seed."""
    lines: list[str]
    argv: list[str]
    task: str
    key: str

    def pick(self, candidates: Sequence[Any], names: Sequence[str] | None = None) -> Any:
        """A candidate the task mentions if any, else a deterministic hash choice."""
        if names is not None and self.task:
            mentioned = [c for c, n in zip(candidates, names) if n and n in self.task]
            if mentioned:
                candidates = mentioned
        digest = int(hashlib.sha256(self.key.encode()).hexdigest()[:12], 16)
        return candidates[digest % len(candidates)]

    def template(self, options: Sequence[str], **values: str) -> str:
        digest = int(hashlib.sha256(("q" + self.key).encode()).hexdigest()[:8], 16)
        return options[digest % len(options)].format(**values)

    def argument(self, flag_free_index: int = -1) -> str:
        """A positional argument of the command (flags dropped), e.g. the path of ``cat -n -- path``."""
        plain = [a for a in self.argv[1:] if not a.startswith("-")]
        return plain[flag_free_index] if plain else ""

