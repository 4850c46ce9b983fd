"""The steps every squeez front end shares: the input gates, keeping the full output, calling the backend.

``squeez`` (the pipe, prune.py), ``squeez run`` (run.py) and the MCP tools call these, so a gate or
a fail-open rule is decided in one place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from squeez_ray.cli import settings as settings_mod
from squeez_ray.cli.show import open_store
from squeez_ray.cli.store import StoreError
from squeez_ray.infer.base import PruneRequest, PruneResult
from squeez_ray.infer.registry import build_pruner
from squeez_ray.spans import count_lines, normalize_spans, render, split_lines

# Never nothing on a positive: when the model keeps no line of an output that is not clearly beside
# the query, the agent gets this bounded sample (with the omitted-lines markers) instead of nothing.
FALLBACK = "fallback: head and tail"
SAMPLE_LINES = 10  # per side, as `head` / `tail` show
SAMPLE_CHARS = 4_000  # per side: lines are never cut, so a side stops before a line that would pass this
# Words that say nothing about what an output holds (question words, the hooks' generic query).
_STOP = frozenset("""about after also been before being could does each every find from have important
into line lines only other output print shown show should some than that their them then there these
they this those what when where which while with would your""".split())


@dataclass(frozen=True)
class Gate:
    """Why an input passes through unpruned; ``quiet``: not worth a note on stderr."""

    kind: str  # "over_limit", "empty", "binary", "short"
    reason: str
    quiet: bool = False


def input_gate(data: bytes, settings: settings_mod.Settings, *, over_limit: bool = False) -> Gate | None:
    """The pass-through rules, in order; None when the input should be pruned."""
    if over_limit:
        return Gate("over_limit", f"input is over max_input_mb={settings.max_input_mb:g}: passed through unpruned")
    if not data:
        return Gate("empty", "empty input: nothing to prune")
    if b"\0" in data:
        return Gate("binary", "binary input (it holds NUL bytes): passed through unpruned")
    n_lines = data.count(b"\n") + 1
    if n_lines < settings.min_lines:
        return Gate("short", f"{n_lines} lines, below min_lines={settings.min_lines}: passed through unpruned",
                    quiet=True)
    return None


def keep_full_output(settings: settings_mod.Settings, data: bytes) -> tuple[str | None, str | None]:
    """(store id, note): the id is None when the output could not be kept (the note says why)."""
    if not settings.store_outputs:
        return None, None
    try:
        kept = open_store(settings).put(data)
    except (StoreError, OSError) as error:
        return None, f"store: {error}"
    return kept.id, (f"store: {kept.note}" if kept.note else None)


def call_backend(settings: settings_mod.Settings, query: str, text: str) -> tuple[PruneResult | None, str | None, Any, float]:
    """(result, failure, pruner, load seconds): exactly one of result / failure is set.

    The fail-open boundary: any backend error becomes a failure message, never an exception. The
    caller closes ``pruner`` (it may be None) once it no longer needs it.
    """
    import time

    from squeez_ray.cli.daemon_client import warm_prune
    from squeez_ray.infer.base import RenderOptions
    from squeez_ray.infer.budget import time_budget

    pruner = None
    load_s = 0.0
    try:
        render_options = RenderOptions(line_numbers=settings.line_numbers, markers=settings.markers)
        # The call's time budget counts from here, whoever prunes: the warm process gets what is left of it,
        # and so does this process when the warm one did not answer.
        with time_budget(getattr(settings, "budget_s", None)) as budget:
            result = warm_prune(settings, query, text, budget_s=budget and budget.left())  # None: prune here
            if result is None:
                started = time.perf_counter()
                pruner = build_pruner(settings.backend, settings_mod.backend_options(settings))
                load_s = time.perf_counter() - started
                result = pruner.prune_batch([PruneRequest(query, text, settings.tool_type)],
                                            render_options=render_options, fail_open=False)[0]
        if not result.pruned:
            return None, f"backend {settings.backend} did not prune ({result.reason})", pruner, load_s
        # Spans over another text would be a backend bug: fail open, never mis-cut.
        clean = normalize_spans(result.spans, len(split_lines(text)))
        result.spans, result.kept_lines = [list(span) for span in clean], count_lines(clean)
        return never_empty(result, query, text, render_options), None, pruner, load_s
    except Exception as error:  # noqa: BLE001 - the fail-open boundary: say what was swallowed
        return None, f"backend {settings.backend} failed ({type(error).__name__}: {error})", pruner, load_s


def query_words(query: str) -> set[str]:
    """The query's content words as loose stems (``failing`` -> ``fail``), lower case."""
    words = (w for w in re.findall(r"\w+", query.lower()) if len(w) >= 4 and w not in _STOP)
    return {w[:max(4, len(w) - 3)] for w in words}


def named_things(question: str) -> set[str]:
    """What a question names, as an agent would type it: quoted text, identifiers (``load_config``,
    ``HTTPAdapter``), paths and file names, numbers; plain words are not names."""
    names = {q.strip() for q in re.findall(r"'([^'\n]+)'|\"([^\"\n]+)\"|`([^`\n]+)`", question) for q in q if q.strip()}
    for token in re.findall(r"[\w./#:-]+", question):
        token = token.strip(".:-#")
        if len(token) >= 2 and ("_" in token or "/" in token or any(c.isdigit() for c in token)
                                or any(c.isupper() for c in token[1:]) or re.fullmatch(r"\w+\.[A-Za-z]\w*", token)):
            names.add(token)
    return names


def beside_query(query: str, text: str) -> bool:
    """Clearly beside the query: it names things (named_things) and the output holds none of them, nor
    any stem of its other content words (query_words), case-insensitive.

    One-sided on purpose: a question in plain words ("Run the tests", "List files in the root") names
    nothing, so no output is beside it; the hooks' query without a description ("the important lines
    of the output of: CMD") is judged on its words before the command.
    """
    question = query.split("output of:", 1)[0]
    names = named_things(question)
    if not names:
        return False
    lowered = text.lower()
    if any(name.lower() in lowered for name in names):
        return False
    return not any(word in lowered for word in query_words(question))


def head_and_tail(lines: list[str]) -> list[list[int]]:
    """Spans of a bounded sample: up to SAMPLE_LINES lines and SAMPLE_CHARS characters from each end."""
    n = len(lines) - (1 if lines and lines[-1] == "" else 0)  # the piece after a final newline is no line
    side = min(SAMPLE_LINES, max(1, n // 4))  # a short output: a quarter from each end

    def fitting(numbers: range) -> list[int]:
        taken, chars = [], 0
        for number in numbers[:side]:
            chars += len(lines[number - 1]) + 1
            if chars > SAMPLE_CHARS:
                break
            taken.append(number)
        return taken

    kept = fitting(range(1, n + 1)) + fitting(range(n, 0, -1))
    return [list(span) for span in normalize_spans([[k, k] for k in kept], n)]


def never_empty(result: PruneResult, query: str, text: str, render_options: Any) -> PruneResult:
    """A result that kept nothing, on an output not clearly beside the query, becomes a head-and-tail
    sample, and its ``reason`` says so (FALLBACK); anything else comes back unchanged."""
    if result.kept_lines or beside_query(query, text):
        return result
    lines = split_lines(text)
    spans = head_and_tail(lines)
    if not spans:
        return result
    result.spans, result.kept_lines = spans, count_lines(spans)
    result.text = render(lines, spans, line_numbers=render_options.line_numbers, markers=render_options.markers)
    result.reason = f"{result.reason}; {FALLBACK}" if result.reason else FALLBACK
    return result


def is_fallback(result: PruneResult) -> bool:
    return FALLBACK in (result.reason or "")


def footer_notes(result: PruneResult) -> str:
    """What the footer adds after the backend's name: the time budget cut the scoring short (the rest of
    the output was not read by the model), the model kept nothing (the head-and-tail sample)."""
    from squeez_ray.infer.budget import OVER_BUDGET

    notes = ""
    if OVER_BUDGET in (result.reason or ""):
        notes += f", {OVER_BUDGET}: part of the output was not scored"
    if is_fallback(result):
        notes += f", {FALLBACK}: the model kept none"
    return notes
