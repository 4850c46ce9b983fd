"""``squeez report --next-action DIR...``: how much of what the agent used next each pruner kept.

The measure is trajectories/next_action.py's: for every tool output of the stored runs long enough
to be pruned (``min_lines``), the paths, test names, identifiers and line numbers the agent typed in
its next three calls that occur in the output; a pruner keeps an item when its answer holds one of
the item's lines. Rows: the configured backend (default: the shipped encoder) as the agent would
read it (the head-and-tail fallback included), BM25 at its defaults, and pass-through (1.0 by
definition: every line is read). The query is the hook's: the call's description, else the agent's
reasoning before it, else the call itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from squeez_ray.cli.settings import Settings

PASS_THROUGH = "pass-through"


@dataclasses.dataclass
class Score:
    pruner: str
    outputs: int = 0  # outputs with evidence, long enough to prune
    items: int = 0
    kept: int = 0
    lines: int = 0
    lines_kept: int = 0
    unpruned: int = 0  # outputs the backend passed through (its own fail-open): counted as kept whole
    fallbacks: int = 0

    @property
    def share(self) -> float:
        return self.kept / self.items if self.items else 0.0


def measure(runs: Iterable[list[Any]], settings: Settings, backends: list[str], query_of: Callable[[Any], str],
            limit: int | None = None) -> list[Score]:
    """Scores of each backend and pass-through over the evidence in ``runs`` (each run's observations)."""
    from squeez_ray.trajectories.next_action import collect

    cases = []  # (query, text, items)
    for observations in runs:
        for found in collect(observations):
            text = found.observation.text or ""
            if text.count("\n") + 1 < settings.min_lines:
                continue  # passed through whole by every front end: no pruner's choice
            cases.append((query_of(found.observation), text, found.items))
    cases = cases[:limit] if limit is not None else cases
    scores = [_score(name, settings, cases) for name in backends]
    whole = Score(PASS_THROUGH, outputs=len(cases))
    for _, text, items in cases:
        n = len(text.split("\n"))
        whole.items, whole.kept = whole.items + len(items), whole.kept + len(items)
        whole.lines, whole.lines_kept = whole.lines + n, whole.lines_kept + n
    return [*scores, whole]


def _score(name: str, settings: Settings, cases: list[tuple[str, str, dict[str, list[int]]]]) -> Score:
    from squeez_ray.cli import settings as settings_mod
    from squeez_ray.cli.pruning import is_fallback, never_empty
    from squeez_ray.infer.base import PruneRequest, RenderOptions
    from squeez_ray.infer.registry import build_pruner
    from squeez_ray.trajectories.next_action import kept_items

    options = dataclasses.replace(settings, backend=name)
    pruner = build_pruner(name, settings_mod.backend_options(options))
    score = Score(name, outputs=len(cases))
    try:
        results = pruner.prune_batch([PruneRequest(q, text, settings.tool_type) for q, text, _ in cases],
                                     render_options=RenderOptions(), fail_open=True)
    finally:
        pruner.close()
    for (query, text, items), result in zip(cases, results, strict=True):
        n = len(text.split("\n"))
        if result.pruned:
            result = never_empty(result, query, text, RenderOptions())
            spans = result.spans
        else:
            spans, score.unpruned = [[1, n]], score.unpruned + 1
        score.fallbacks += int(is_fallback(result))
        score.items += len(items)
        score.kept += kept_items(items, spans)
        score.lines += n
        score.lines_kept += sum(min(end, n) - start + 1 for start, end in spans)
    return score


def render(scores: list[Score], files: dict[str, int]) -> str:
    lines = ["| pruner | outputs | evidence items | items kept | share kept | lines kept |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for s in scores:
        kept_lines = f"{100 * s.lines_kept / s.lines:.0f}%" if s.lines else "-"
        name = f"{s.pruner} (1.0 by definition)" if s.pruner == PASS_THROUGH else s.pruner
        lines.append(f"| {name} | {s.outputs} | {s.items} | {s.kept} | {s.share:.2f} | {kept_lines} |")
    read = ", ".join(f"{name} {count}" for name, count in sorted(files.items()))
    notes = [f"{s.pruner}: {s.fallbacks} head-and-tail fallbacks, {s.unpruned} passed through"
             for s in scores if s.pruner != PASS_THROUGH]
    lines += ["", f"Runs read: {read or 'none'}. Evidence: paths, test names, identifiers and line numbers the "
              f"agent typed in its next 3 calls that occur in the output. {'; '.join(notes)}."]
    return "\n".join(lines)
