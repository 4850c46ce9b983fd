"""A bounded async client for OpenAI-compatible chat endpoints (the HTTP teacher's transport).

Bounded three ways, because a labelling run is thousands of calls against a paid or shared
endpoint: at most ``max_concurrency`` requests in flight, retries by the project's one policy
(``squeez_ray.http_retry``: exponential backoff with jitter, or the server's ``Retry-After``, on 429,
5xx and connection errors only), and a request budget that every attempt draws from (a retry costs
what a first try costs). A call never raises for transport
problems: it returns a :class:`ChatOutcome` whose ``error`` names what went wrong, so the caller
can count the row instead of failing the job.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any, Protocol

from squeez_ray.http_retry import RetryPolicy
from squeez_ray.label.prompts import reply_schema

log = logging.getLogger(__name__)

BUDGET_EXHAUSTED = "budget_exhausted"
HTTP_ERROR = "http_error"  # a non-retryable status (400, 401, 404, ...)
RETRIES_EXHAUSTED = "retries_exhausted"  # 429 / 5xx / connection errors on every attempt
BAD_RESPONSE = "bad_response"  # 200 but not a chat completion body
# 200 with a well-formed completion but no answer: the content is null or empty. Not transport problems:
# the same request would get the same reply, so they are recorded as drops and not retried on a rerun.
REPLY_TRUNCATED = "reply_truncated"  # finish_reason "length" before any answer (max_tokens spent, often on reasoning)
EMPTY_REPLY = "empty_reply"  # the model finished without an answer


class Budget(Protocol):
    async def take(self) -> bool:
        """Reserve one request; False when the budget is spent."""


class LocalBudget:
    """A budget for one process (tests, a single actor). ``None`` means unlimited."""

    def __init__(self, total: int | None):
        self.left = total

    async def take(self) -> bool:
        if self.left is None:
            return True
        if self.left <= 0:
            return False
        self.left -= 1
        return True


@dataclass
class ChatSettings:
    url: str  # base URL, e.g. http://127.0.0.1:8000/v1 (``/chat/completions`` is appended)
    model: str = "openai/gpt-oss-120b"
    api_key: str | None = None
    max_concurrency: int = 8
    max_retries: int = 4
    backoff_base_s: float = 1.0
    backoff_max_s: float = 30.0
    timeout_s: float = 120.0
    temperature: float = 0.0
    max_tokens: int = 1024
    json_mode: bool = False  # send response_format=json_object (not every server supports it)
    json_schema: bool = False  # send each stage's JSON schema as response_format (vLLM, SGLang, OpenAI)
    extra_body: dict[str, Any] | None = None  # passed through, e.g. {"reasoning_effort": "low"}

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(self.max_retries, self.backoff_base_s, self.backoff_max_s)

    @property
    def endpoint(self) -> str:
        base = self.url.rstrip("/")
        return base if base.endswith("/chat/completions") else f"{base}/chat/completions"


@dataclass
class ChatOutcome:
    reply: str | None
    error: str | None = None  # one of the constants above, or None on success
    detail: str = ""
    attempts: int = 0


def _reply(body: Any, max_tokens: int) -> ChatOutcome:
    """The answer of a chat completion body. Reasoning models (gpt-oss, DeepSeek R1, Qwen3 thinking) put their
    reasoning in ``reasoning_content`` / ``reasoning`` and the answer in ``content``, which is null when
    ``max_tokens`` ran out while reasoning: that is a reply too short for its budget, not a transport error."""
    try:
        choice = body["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        return ChatOutcome(None, BAD_RESPONSE, json.dumps(body)[:200] if body is not None else "")
    if not isinstance(message, dict):
        return ChatOutcome(None, BAD_RESPONSE, json.dumps(body)[:200])
    content = message.get("content")
    if isinstance(content, str) and content.strip():
        return ChatOutcome(content)
    reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
    spent = f" after {len(reasoning)} characters of reasoning" if isinstance(reasoning, str) and reasoning else ""
    if choice.get("finish_reason") == "length":
        return ChatOutcome(None, REPLY_TRUNCATED, f"no answer within max_tokens={max_tokens}{spent}: raise "
                           "teacher.http.max_tokens or lower the reasoning effort (extra_body)")
    return ChatOutcome(None, EMPTY_REPLY, f"content is empty (finish_reason={choice.get('finish_reason')!r}){spent}")


class ChatClient:
    """Use inside one event loop: ``async with ChatClient(settings, budget) as client: await client.chat(msgs)``."""

    def __init__(self, settings: ChatSettings, budget: Budget | None = None):
        self.settings = settings
        self.budget = budget or LocalBudget(None)
        self._semaphore = asyncio.Semaphore(max(1, settings.max_concurrency))
        self._session = None

    async def __aenter__(self) -> "ChatClient":
        import aiohttp

        headers = {"Content-Type": "application/json"}
        if self.settings.api_key:
            headers["Authorization"] = f"Bearer {self.settings.api_key}"
        self._session = aiohttp.ClientSession(headers=headers,
                                              timeout=aiohttp.ClientTimeout(total=self.settings.timeout_s))
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _payload(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        s = self.settings
        payload: dict[str, Any] = {"model": s.model, "messages": messages, "temperature": s.temperature,
                                   "max_tokens": s.max_tokens}
        schema = reply_schema(messages) if s.json_schema else None
        if schema is not None:
            payload["response_format"] = {"type": "json_schema",
                                          "json_schema": {"name": "teacher_reply", "schema": schema, "strict": True}}
        elif s.json_mode:
            payload["response_format"] = {"type": "json_object"}
        payload.update(s.extra_body or {})
        return payload

    async def chat(self, messages: list[dict[str, str]]) -> ChatOutcome:
        import aiohttp

        assert self._session is not None, "use ChatClient as an async context manager"
        payload = json.dumps(self._payload(messages))
        last = ""
        attempts = 0
        retry = self.settings.retry
        async with self._semaphore:
            for attempt in range(retry.attempts):
                if not await self.budget.take():
                    return ChatOutcome(None, BUDGET_EXHAUSTED, "request budget spent", attempts)
                attempts += 1
                retry_after = None
                try:
                    async with self._session.post(self.settings.endpoint, data=payload) as response:
                        text = await response.text()
                        if response.status == 200:
                            try:
                                outcome = _reply(json.loads(text), self.settings.max_tokens)
                            except ValueError:
                                outcome = ChatOutcome(None, BAD_RESPONSE, text[:200])
                            outcome.attempts = attempts
                            return outcome
                        last = f"HTTP {response.status}: {text[:200]}"
                        if not retry.retryable(response.status):
                            return ChatOutcome(None, HTTP_ERROR, last, attempts)
                        retry_after = response.headers.get("Retry-After")
                except (aiohttp.ClientError, asyncio.TimeoutError) as error:
                    last = f"{type(error).__name__}: {error}"
                if attempt + 1 < retry.attempts:
                    log.debug("teacher request failed (%s); retry %d", last, attempt + 1)
                    await asyncio.sleep(retry.delay(attempt, retry_after))
        return ChatOutcome(None, RETRIES_EXHAUSTED, last, attempts)
