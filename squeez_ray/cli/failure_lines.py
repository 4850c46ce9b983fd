"""The safety net of ``squeez run``: when a command fails, the lines that show the failure reach the agent.

A pruning model can drop the one line that matters. The wrapper, not the model, therefore adds
back a few lines whenever the command **failed** (exit code != 0); a command that succeeded gets
no extra lines, so a grep for "error" is not inflated. The rule was fixed before it was measured
(tests/bench/bench_failure_net.py prints recall and compression with and without it):

1. the last non-blank line: the summary (``=== 2 failed, 40 passed ===``, ``FAILED (errors=1)``,
   ``make: *** [all] Error 2``) or whatever ended the run;
2. of the lines with a *failure shape* (below), the ``MAX_FAILURE_LINES`` nearest the end: runners
   print their failure summary last, and a traceback's final line is the exception.

Failure shapes: an exception line (``ValueError: ...``, ``java.lang.IllegalStateException``,
``tests/a.py:12: AssertionError``), a
pytest assertion line (``E   assert 3 == 2``), ``error:`` / ``error[E0308]:`` / ``fatal:`` /
``FAILED`` / ``FAIL`` / ``ERROR`` / ``panicked at`` / ``npm ERR!`` / ``make: ***``, a summary count
(``3 failed``, ``1 error``), and the shell's own (``command not found``, ``No such file or
directory``, ``Permission denied``, ``Segmentation fault``, ``Killed``). The cap keeps an output
full of error-looking lines from undoing the compression.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

MAX_FAILURE_LINES = 10

_SHAPES = (
    r"^\s*(?:[\w$]+\.)*[A-Z]\w*(?:Error|Exception|Failure|Interrupt|Exit)\b(?::|\s*$)",  # final exception line
    r"^Exception in thread ",
    r"^\S+:\d+: (?:[\w$]+\.)*[A-Z]\w*(?:Error|Exception)\b",  # pytest's crash location: a.py:12: AssertionError
    r"^\s*E\s{2,}\S",  # pytest's assertion detail
    r"(?i:\b(?:error|fatal)(?:\[[\w-]+\])?:)",  # error: / error[E0308]: / fatal: / Error:
    r"\b(?:FAILED|FAIL|ERROR|FATAL|PANIC)\b",
    r"\bpanicked at\b",
    r"^npm ERR!",
    r"\bmake(?:\[\d+\])?: \*\*\*",
    r"(?i:\b\d+\s+(?:failed|failures?|errors?)\b)",
    r"(?i:\bbuild failed\b)",
    r"command not found|No such file or directory|Permission denied|Segmentation fault|core dumped|^Killed\b",
)
_FAILURE = re.compile("|".join(f"(?:{shape})" for shape in _SHAPES))


def is_failure_line(line: str) -> bool:
    return bool(_FAILURE.search(line))


def failure_line_numbers(lines: Sequence[str], exit_code: int | None) -> list[int]:
    """1-based numbers of the lines the safety net keeps; none unless the command failed."""
    if exit_code is None or exit_code == 0:
        return []
    keep: list[int] = []
    last = next((i for i in range(len(lines), 0, -1) if lines[i - 1].strip()), None)
    if last is not None:
        keep.append(last)
    found = 0
    for i in range(len(lines), 0, -1):
        if found >= MAX_FAILURE_LINES:
            break
        if is_failure_line(lines[i - 1]):
            found += 1
            if i != last:
                keep.append(i)
    return sorted(keep)
