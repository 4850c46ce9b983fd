"""Progress a person can watch on a terminal, and silence everywhere else.

Every long job (training, evaluation, collection, labelling, re-prune) reports through
:class:`Progress`: one line on stderr, redrawn in place at most every ``min_interval_s``, with
done/total, rate, time left and the job's own figures (loss, tokens/s, ...). It draws only when
stderr is a terminal: logs, CI and ``ray job submit`` output get nothing from it (the jobs' logs,
manifests and summaries say what happened). ``SQUEEZ_PROGRESS=1`` forces it on, ``=0`` off.

    with Progress("label", total=len(todo)) as progress:
        for chunk in chunks:
            ...
            progress.update(len(chunk), dropped=n_dropped)
"""

from __future__ import annotations

import os
import sys
import time
from typing import IO, Any


def progress_enabled(stream: IO[str] | None = None) -> bool:
    """True where a person is watching: ``SQUEEZ_PROGRESS`` if set, else whether stderr is a terminal."""
    forced = os.environ.get("SQUEEZ_PROGRESS", "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


class Progress:
    def __init__(self, label: str, total: int | None = None, *, unit: str = "", stream: IO[str] | None = None,
                 enabled: bool | None = None, min_interval_s: float = 0.25):
        self.label, self.total, self.unit = label, total, unit
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = progress_enabled(self.stream) if enabled is None else enabled
        self.min_interval_s = min_interval_s
        self.done = 0
        self.fields: dict[str, Any] = {}
        self.started = time.perf_counter()
        self._drawn_at = 0.0
        self._width = 0

    def __enter__(self) -> "Progress":
        self._draw(force=True)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def update(self, n: int = 1, **fields: Any) -> None:
        """``n`` more items done; ``fields`` (loss=..., tokens_per_s=...) replace the shown figures."""
        self.done += n
        self.fields.update(fields)
        self._draw()

    def close(self) -> None:
        if self.enabled and self._width:
            self._draw(force=True)
            self.stream.write("\n")
            self.stream.flush()
            self._width = 0

    def line(self) -> str:
        """The text drawn (also what a test reads)."""
        elapsed = time.perf_counter() - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        unit = f" {self.unit}" if self.unit else ""
        if self.total:
            left = (self.total - self.done) / rate if rate > 0 else None
            eta = f", {_duration(left)} left" if left is not None and self.done < self.total else ""
            head = f"{self.label}: {self.done}/{self.total}{unit} ({100 * self.done / self.total:.0f}%)"
        else:
            head, eta = f"{self.label}: {self.done}{unit}", ""
        figures = "".join(f", {k} {_figure(v)}" for k, v in self.fields.items())
        return f"{head}, {rate:.1f}/s{eta}, {_duration(elapsed)}{figures}"

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self._drawn_at < self.min_interval_s:
            return
        self._drawn_at = now
        text = self.line()
        pad = max(0, self._width - len(text))  # wipe the end of a longer previous line
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self._width = len(text)


def _figure(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
