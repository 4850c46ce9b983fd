"""Render pool outputs as a batch a labeller reads: a header per output, then every line numbered.

The numbers are the 1-based line numbers of ``tool_output.split("\\n")``, the span contract, so a
labeller's ``[start, end]`` is a gold span as written. Nothing in the output is cut or wrapped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from squeez_ray.spans import split_lines

RULE = "#" * 100

LABEL_FILE_HELP = """\
Write one JSON object per line (JSONL) per example, e.g.
  {"output_id": "pypi:six:0123456789", "query": "where is the metaclass helper defined",
   "gold": [[12, 14]], "difficulty": "easy", "pass": "A", "labeller": "YOUR-NAME"}
gold: sorted, non-overlapping, non-touching [start, end] line spans (1-based, inclusive); [] for a
negative (difficulty "negative"). difficulty: easy | medium | semantic | negative.
Validate with: python jobs/hand_label.py check LABELS.jsonl --pool POOL"""


def render_output(row: Mapping[str, Any], index: int, total: int, queries: Sequence[str] = (),
                  query_label: str = "QUERY TO ANSWER") -> str:
    """One output, numbered. ``queries``: a blind second labelling answers these (their gold is not
    shown); with ``query_label="ALREADY ASKED"`` they are the queries a new example must not repeat."""
    lines = split_lines(row["tool_output"])
    width = len(str(len(lines)))
    header = [
        RULE,
        f"OUTPUT {index} of {total}   output_id: {row['output_id']}",
        f"family: {row['family']}   source: {row['source']}   exit code: {row.get('exit_code')}   lines: {len(lines)}",
        f"command: {row['command']}",
        *(f"{query_label}: {query}" for query in queries),
        "-" * 100,
    ]
    body = [f"{n:>{width}} | {line}" for n, line in enumerate(lines, start=1)]
    return "\n".join(header + body + [f"END OF {row['output_id']}", ""])


SECOND_HELP = """\
SECOND QUERIES: each output lists the query it was ALREADY ASKED. Write one new example with a different
information need (or a near-miss negative), "pass": "A"; never repeat or rephrase the listed query."""

BLIND_HELP = """\
BLIND SECOND LABELLING: each output lists the QUERY TO ANSWER (written by the first labeller, whose gold
you do not see). Keep the query text exactly as given, pick the gold yourself, and write "pass": "B".
The answer may be absent: then gold [] and difficulty "negative"."""


def render_batch(rows: Sequence[Mapping[str, Any]], *, title: str = "",
                 queries: Mapping[str, Sequence[str]] | None = None, second: bool = False) -> str:
    """A batch; with ``queries`` (output_id -> queries) a blind-labelling batch, or with ``second``
    a batch asking for a second, different example of outputs labelled once."""
    helps = LABEL_FILE_HELP + ("\n" + (SECOND_HELP if second else BLIND_HELP) if queries else "")
    label = "ALREADY ASKED" if second else "QUERY TO ANSWER"
    head = [f"# {title}" if title else "# labelling batch", f"# {len(rows)} outputs", "#",
            *(f"# {line}" for line in helps.splitlines()), ""]
    return "\n".join(head + [render_output(row, i, len(rows), (queries or {}).get(row["output_id"], ()), label)
                             for i, row in enumerate(rows, start=1)])
