"""One retry and backoff policy for every OpenAI-compatible HTTP call the project makes: the
labelling teacher (``label/http_client.py``), the ``openai`` backend (``infer/openai_engine.py``)
and the ``server`` backend (``infer/server_client.py``).

What is retried: connection errors, timeouts, and the statuses a server uses for "not now" (408,
409, 425, 429, 500, 502, 503, 504). Anything else (400, 401, 404, 413, ...) is the caller's mistake
and is never retried. How long to wait: the server's ``Retry-After`` in seconds when it sends one,
else ``backoff_base_s * 2**attempt`` with jitter (between half and all of it, so many rows that
failed together do not come back together), never more than ``backoff_max_s``.

Transport-agnostic on purpose (aiohttp, requests and the openai client each raise their own
errors): a client asks :meth:`RetryPolicy.retryable` and :meth:`RetryPolicy.delay`, and sleeps the
way its own loop sleeps.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3  # retries after the first attempt
    backoff_base_s: float = 0.5  # first wait; doubles each retry
    backoff_max_s: float = 30.0  # no wait is longer, Retry-After included
    jitter: bool = True  # wait between half and all of the backoff

    @property
    def attempts(self) -> int:
        return max(0, self.max_retries) + 1

    @staticmethod
    def retryable(status: int | None) -> bool:
        """``status`` None means the request got no answer (connection error, timeout): retry."""
        return status is None or status in RETRYABLE_STATUS

    def delay(self, attempt: int, retry_after: Any = None) -> float:
        """Seconds to wait before retry number ``attempt + 1`` (``attempt`` counts from 0)."""
        told = retry_after_seconds(retry_after)
        if told is not None:
            return min(self.backoff_max_s, told)
        wait = self.backoff_base_s * (2 ** attempt)
        if self.jitter:
            wait *= 0.5 + random.random() / 2
        return min(self.backoff_max_s, wait)


def retry_after_seconds(value: Any) -> float | None:
    """A ``Retry-After`` header in seconds; None when absent or an HTTP date (then our own backoff)."""
    if value is None or value == "":
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        return None


class Circuit:
    """Stops calling a server that does not answer: after ``threshold`` calls in a row got no answer
    at all (connection refused, timeout, after their own retries), every call fails at once for
    ``cooldown_s``; then one call may try again. A down server costs a bulk job seconds, not a full
    retry cycle per item. Any HTTP answer, error statuses included, closes it. Thread-safe."""

    def __init__(self, threshold: int = 3, cooldown_s: float = 30.0):
        import threading

        self.threshold = max(1, threshold)
        self.cooldown_s = cooldown_s
        self._lock = threading.Lock()
        self._failures = 0
        self._opened_at: float | None = None
        self.refused = 0  # calls failed at once while open (the count a test or a report can read)

    def allow(self) -> bool:
        import time

        with self._lock:
            if self._opened_at is None:
                return True
            if time.monotonic() - self._opened_at >= self.cooldown_s:
                self._opened_at = time.monotonic()  # one probe per cooldown; its outcome decides
                return True
            self.refused += 1
            return False

    def answered(self) -> None:
        with self._lock:
            self._failures, self._opened_at = 0, None

    def no_answer(self) -> None:
        import time

        with self._lock:
            self._failures += 1
            if self._failures >= self.threshold and self._opened_at is None:
                self._opened_at = time.monotonic()

    @property
    def is_open(self) -> bool:
        return self._opened_at is not None
