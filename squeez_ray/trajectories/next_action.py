"""An offline measure of a pruner's effect on an agent: what the agent used from each tool output.

For each observation of a stored run, the *evidence* is what the agent typed in its next
``NEXT_ACTIONS`` calls that occurs in the output: paths (``src/a.py``), test names
(``test_foo``, ``tests/t.py::test_foo``), identifiers (names with ``_``, an inner capital or a
digit, such as ``keep_attrs`` or ``HTTPAdapter``; plain words are left out: they are everywhere) and
line numbers (``sed -n 120,140p``, ``view_range [120, 140]``, ``a.py:120``) where the output shows
that number as a line number. Items the observation's own call already held are not evidence:
the agent knew them before it read the output. Each item is located on the output's lines; a pruner
"kept" it when its answer holds at least one of those lines. The share kept, over all items, is the
measure: 1.0 for pass-through by definition (the agent reads every line).

Only the standard library: the caller prunes (any backend) and hands the spans in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from squeez_ray.trajectories.base import Observation

NEXT_ACTIONS = 3
MIN_LINE_NUMBER = 10  # smaller numbers are too common in any output to say the agent took them from it
# Candidate words of an action: runs of path / identifier characters.
_TOKEN = re.compile(r"[\w./:-]+")
_NUMBER = re.compile(r"(?<![\w.])(\d{2,6})(?=p\b|[^\w.]|$)")  # also sed's "120,140p"
_PATH = re.compile(r"^(?:\.{0,2}/)?(?:[\w.-]+/)*[\w-]+\.[A-Za-z][A-Za-z0-9]{0,7}$|^(?:[\w.-]+/)+[\w.-]+$")
_IDENT = re.compile(r"^[A-Za-z_]\w{3,}$")


@dataclass
class Evidence:
    """One observation's evidence: item -> the 1-based output lines that hold it."""

    observation: Observation
    items: dict[str, list[int]]


def action_items(text: str) -> set[str]:
    """Paths, test names, identifiers and numbers an action typed (before matching the output)."""
    items: set[str] = set()
    for raw in _TOKEN.findall(text or ""):
        for token in raw.split("::"):  # pytest node ids: path::Class::test
            token = token.strip(".:-/")
            if not token:
                continue
            if _PATH.match(token) and not token.replace(".", "").isdigit():
                items.add(token)
                continue
            for part in re.split(r"[.:/-]", token):  # dotted names: each part on its own
                if _IDENT.match(part) and _code_like(part):
                    items.add(part)
    items.update(f"#{n}" for n in _NUMBER.findall(text or "") if int(n) >= MIN_LINE_NUMBER)
    return items


def _code_like(word: str) -> bool:
    return "_" in word or any(c.isdigit() for c in word) or any(c.isupper() for c in word[1:])


def _line_number_shape(number: str) -> re.Pattern[str]:
    """The number where an output shows it as a line number: ``  120\\t``, ``120:``, ``a.py:120``, ``line 120``."""
    return re.compile(rf"(?:^\s*{number}(?:[\t:│|]|\s{{2}}|\s*$)|:{number}(?::|\b)|\bline {number}\b)")


def locate(item: str, lines: Sequence[str]) -> list[int]:
    """The 1-based lines of ``lines`` that hold ``item`` (a ``#N`` item: N shown as a line number)."""
    if item.startswith("#"):
        shape = _line_number_shape(item[1:])
        return [i for i, line in enumerate(lines, 1) if shape.search(line)]
    word = re.compile(rf"(?<![\w]){re.escape(item)}(?![\w])")
    return [i for i, line in enumerate(lines, 1) if item in line and word.search(line)]


def evidence(text: str, later_actions: Iterable[str | None], own_call: str | None = None) -> dict[str, list[int]]:
    """Items of the later actions that occur in ``text`` (and not in ``own_call``), with their lines."""
    known = action_items(own_call or "")
    used: set[str] = set()
    for action in later_actions:
        used |= action_items(action or "")
    lines = text.split("\n")
    found = {}
    for item in sorted(used - known):
        where = locate(item, lines)
        if where:
            found[item] = where
    return found


def collect(observations: Sequence[Observation], next_actions: int = NEXT_ACTIONS) -> list[Evidence]:
    """The evidence of every observation of one run that has some (calls are ``tool args`` text)."""
    calls = [" ".join(p for p in (obs.tool, obs.args) if p) for obs in observations]
    out = []
    for i, obs in enumerate(observations):
        found = evidence(obs.text or "", calls[i + 1:i + 1 + next_actions], calls[i])
        if found:
            out.append(Evidence(obs, found))
    return out


def kept_items(items: dict[str, list[int]], spans: Sequence[Sequence[int]]) -> int:
    """How many items have at least one of their lines inside ``spans`` (1-based, inclusive)."""
    kept = {n for start, end in spans for n in range(int(start), int(end) + 1)}
    return sum(1 for lines in items.values() if any(n in kept for n in lines))
