"""The ``server`` backend: a Pruner that asks a squeez Serve endpoint (``POST /v1/prune/batch``).

    squeez --backend server --server-url http://127.0.0.1:8000 "which test failed"

Requests go out in batches of ``batch_size`` items, up to ``max_concurrency`` at once. A 503
(queues full), another "not now" status or a connection failure is retried up to ``max_retries``
times by the project's one policy (``squeez_ray.http_retry``: the server's Retry-After, capped, or
an exponential backoff); any other 4xx is the caller's mistake and is raised at once with the
server's message. After ``CIRCUIT_THRESHOLD`` requests in a row got no answer at all (the
server is down), the client stops trying for a while (``http_retry.Circuit``) and raises
:class:`ServerUnreachable` at once: a bulk job over thousands of outputs fails each in
microseconds instead of seconds of retries. The answers are the server's own (spans, verbatim text,
pruned flag): the service already failed open where it had to.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields
from typing import Any, Sequence

from squeez_ray.http_retry import Circuit, RetryPolicy
from squeez_ray.infer.base import PruneRequest, PruneResult, Pruner, RenderOptions
from squeez_ray.infer.registry import BackendOptions

MAX_RETRY_WAIT_S = 10.0  # a pipe waits on this client: no single wait longer
CIRCUIT_THRESHOLD = 3  # requests in a row without any answer (each after its retries) before giving up
CIRCUIT_COOLDOWN_S = 30.0  # then one request tries again
_RESULT_FIELDS = {f.name for f in fields(PruneResult)}


class ServerError(RuntimeError):
    """The server refused or failed a request; the message says which and why."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class ServerUnreachable(ServerError):
    """No answer from the server (connection refused, timeouts) and the circuit is open."""


class ServerPruner(Pruner):
    name = "server"

    def __init__(self, options: BackendOptions):
        if not options.server_url:
            raise ValueError("the server backend needs server_url (e.g. http://127.0.0.1:8000)")
        base = options.server_url.rstrip("/")
        # Accept the URL with or without the /v1 an OpenAI client would use.
        self.url = (base[:-3] if base.endswith("/v1") else base) + "/v1/prune/batch"
        self.options = options
        self.retry = RetryPolicy(max_retries=options.max_retries, backoff_base_s=0.25, backoff_max_s=MAX_RETRY_WAIT_S)
        self._local = threading.local()
        self.circuit = Circuit(CIRCUIT_THRESHOLD, CIRCUIT_COOLDOWN_S)
        self.requests_sent = 0  # HTTP attempts, retries included

    def _session(self) -> Any:
        import requests

        session = getattr(self._local, "session", None)
        if session is None:  # requests.Session is not safe to share between threads
            session = self._local.session = requests.Session()
            if self.options.api_key:
                session.headers["Authorization"] = f"Bearer {self.options.api_key}"
        return session

    def _prune_batch(self, requests: Sequence[PruneRequest], render_options: RenderOptions) -> list[PruneResult]:
        size = max(1, self.options.batch_size)
        batches = [list(requests[i:i + size]) for i in range(0, len(requests), size)]
        if len(batches) == 1:
            return self._post(batches[0], render_options)
        with ThreadPoolExecutor(max_workers=max(1, min(self.options.max_concurrency, len(batches)))) as pool:
            parts = list(pool.map(lambda batch: self._post(batch, render_options), batches))
        return [result for part in parts for result in part]

    def _post(self, batch: list[PruneRequest], render_options: RenderOptions) -> list[PruneResult]:
        import requests

        body = {"items": [{"query": r.query, "tool_output": r.tool_output, "tool_type": r.tool_type} for r in batch],
                "options": {"line_numbers": render_options.line_numbers, "markers": render_options.markers}}
        last: Exception | None = None
        for attempt in range(self.retry.attempts):
            if not self.circuit.allow():
                raise ServerUnreachable(f"{self.url} is unreachable: {self.circuit.threshold} requests in a row "
                                        f"got no answer; not trying again for {self.circuit.cooldown_s:g} s "
                                        "(is the server up?)")
            retry_after = None
            try:
                self.requests_sent += 1
                response = self._session().post(self.url, json=body, timeout=(5.0, self.options.timeout_s))
            except (requests.ConnectionError, requests.Timeout) as error:
                last = ServerError(f"{self.url}: {type(error).__name__}: {error}")
            else:
                self.circuit.answered()
                if response.status_code == 200:
                    return self._results(response, len(batch))
                message = _error_message(response)
                last = ServerError(f"{self.url} answered {response.status_code}: {message}", response.status_code)
                if not self.retry.retryable(response.status_code):
                    raise last
                retry_after = response.headers.get("Retry-After")
            if attempt + 1 < self.retry.attempts:
                time.sleep(self.retry.delay(attempt, retry_after))
        if last is not None and last.status is None:  # type: ignore[attr-defined]
            self.circuit.no_answer()
        raise last  # type: ignore[misc]

    def _results(self, response: Any, expected: int) -> list[PruneResult]:
        try:
            rows = response.json()["results"]
            results = [PruneResult(**{k: v for k, v in row.items() if k in _RESULT_FIELDS}) for row in rows]
        except (ValueError, KeyError, TypeError) as error:
            raise ServerError(f"{self.url} sent an answer that is not a squeez batch result: {error}") from None
        if len(results) != expected:
            raise ServerError(f"{self.url} answered {len(results)} results for {expected} items")
        return results


def _error_message(response: Any) -> str:
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:500]


def build_server(options: BackendOptions) -> Pruner:
    return ServerPruner(options)
