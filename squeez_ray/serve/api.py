"""Request and response bodies of the pruning API (DESIGN.md, "Serving API").

These pydantic models are the OpenAPI page (``/docs``, ``/openapi.json``): descriptions and
examples live here, once. Responses carry exactly ``PruneResult.to_dict()`` so an answer from the
service has the same fields as ``squeez --json`` and the Python API.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, field_validator

EXAMPLE_OUTPUT = ("============================= test session starts ==============================\n"
                  "collected 3 items\n\n"
                  "tests/test_io.py::test_read PASSED\n"
                  "tests/test_io.py::test_write FAILED\n"
                  "E       AssertionError: expected 3 lines, got 2\n"
                  "tests/test_io.py::test_close PASSED\n"
                  "========================= 1 failed, 2 passed in 0.12s =========================")


# A lone UTF-16 surrogate ("\ud800" in JSON: a client that cut a string mid-emoji) is valid JSON
# but not Unicode text, and no answer holding one can be encoded. Each becomes U+FFFD, one character
# for one, so line numbers and spans are those of what the client sent.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def replace_lone_surrogates(value: str) -> str:
    return _LONE_SURROGATE.sub("\ufffd", value)


class PruneOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    line_numbers: StrictBool = Field(False, description="Prefix each kept line with its 1-based source line number.")
    markers: StrictBool = Field(False, description="Show '... [N lines omitted]' where lines were cut.")


class _Item(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # The schema states what the validators below enforce (minLength / pattern), so that clients and
    # fuzzers see the contract; the validators keep their own, clearer messages.
    query: StrictStr = Field(..., description="What the agent needs from this output (a short focused question); "
                                              "not empty, not only whitespace.",
                             examples=["which test failed and why"],
                             json_schema_extra={"minLength": 1, "pattern": "\\S"})
    tool_output: StrictStr = Field(..., description="One raw tool output, as text (no NUL characters). Lines are "
                                                    "split on '\\n' only. Lone UTF-16 surrogates are answered as "
                                                    "U+FFFD.",
                                   examples=[EXAMPLE_OUTPUT], json_schema_extra={"pattern": "^[^\\u0000]*$"})
    tool_type: Optional[StrictStr] = Field(None, description="Optional hint: the tool that produced the output "
                                                             "(read_file, grep, pytest, git_log, ...).")
    recall_target: Optional[float] = Field(None, gt=0, le=1, allow_inf_nan=False,
                                           description="Encoder deployments: operate at this recall on the model's dev "
                                                       "curve (higher keeps more lines); default: the model's own.")
    max_kept_lines: Optional[int] = Field(None, ge=1, description="Encoder deployments: keep at most this many "
                                                                   "lines (the highest-scoring).")

    @field_validator("query", "tool_output", "tool_type")
    @classmethod
    def _unicode_text(cls, value: Optional[str]) -> Optional[str]:
        return replace_lone_surrogates(value) if value is not None else None

    @field_validator("query")
    @classmethod
    def _query_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query is empty: say what the agent needs from this output")
        return value

    @field_validator("tool_output")
    @classmethod
    def _tool_output_is_text(cls, value: str) -> str:
        # JSON can carry NUL as \u0000; an output holding one is binary, and no pruner reads it as lines.
        if "\x00" in value:
            raise ValueError("tool_output holds a NUL character: binary output is not text; send text or skip pruning")
        return value


class PruneBody(_Item):
    """One pruning request."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"query": "which test failed and why", "tool_output": EXAMPLE_OUTPUT}]})

    options: Optional[PruneOptions] = Field(None, description="How the kept lines are shown in 'text'.")


class BatchItem(_Item):
    """One item of a batch (same fields as a single request, without options)."""


class BatchBody(BaseModel):
    """Many pruning requests in one call; answers come back in the same order."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"items": [{"query": "which test failed and why", "tool_output": EXAMPLE_OUTPUT},
                   {"query": "the summary line", "tool_output": EXAMPLE_OUTPUT}]}]})

    items: list[BatchItem] = Field(..., min_length=1, description="The requests, at least one.")
    options: Optional[PruneOptions] = Field(None, description="Applied to every item.")


class PruneAnswer(BaseModel):
    """The kept lines of one tool output (the shape of ``squeez --json``)."""

    spans: list[list[int]] = Field(..., description="Kept lines as [start, end] pairs, 1-based, inclusive, "
                                                    "sorted and merged.", examples=[[[4, 5]]])
    text: str = Field(..., description="The kept source lines, verbatim (never generated text).")
    kept_lines: int = Field(..., description="Number of lines kept.")
    total_lines: int = Field(..., description="Number of lines in tool_output (split on '\\n').")
    compression: float = Field(..., description="1 - kept_lines / total_lines.")
    pruned: bool = Field(..., description="False: fail-open pass-through, 'text' is the whole output "
                                          "(see 'reason': timeout, backend error, below min_lines).")
    reason: Optional[str] = Field(None, description="Why the output was not pruned, or a note (e.g. chunking).")
    model: Optional[str] = Field(None, description="The pruner that answered.")
    latency_ms: float = Field(..., description="Time spent in the service on this request, in milliseconds.")
    input_tokens: int = Field(0, description="Prompt tokens (model backends).")
    output_tokens: int = Field(0, description="Generated tokens (model backends).")
    unmatched_lines: int = Field(0, description="Generated lines that matched no source line and were dropped.")
    answers: int = Field(0, description="Model answers behind this result (one per chunk; 0 for non-model backends).")
    unparsed_answers: int = Field(0, description="Answers without the answer tags opened and closed (cut at the "
                                                 "token limit, or bare text); their lines are still mapped.")
    answer_lines: int = Field(0, description="Non-blank lines the model wrote.")
    fuzzy_lines: int = Field(0, description="Written lines that matched a source line only approximately (the "
                                            "source's own line is returned).")


class BatchAnswer(BaseModel):
    results: list[PruneAnswer] = Field(..., description="One answer per item, in request order.")
    latency_ms: float = Field(..., description="Time spent in the service on the whole batch, in milliseconds.")


class ErrorDetail(BaseModel):
    code: int = Field(..., description="The HTTP status.")
    message: str = Field(..., description="What was wrong and how to fix it.")
    type: str = Field(..., description="invalid_request | too_large | unauthorized | timeout | overloaded | not_found "
                                       "| internal")


class ErrorAnswer(BaseModel):
    error: ErrorDetail


class Health(BaseModel):
    status: str = Field(..., examples=["ok"])
    backend: str = Field(..., description="vllm (model replicas) or the local backend's name.")
    model: Optional[str] = Field(None, description="The served model id (model backends).")
    batching: Optional[dict] = Field(None, description="Local backends: concurrent requests gathered per pruner "
                                                       "call in this replica (calls, batches, largest_batch, ...).")


NOT_FOUND = {404: {"model": ErrorAnswer, "description": "No model behind this service (a baseline backend): "
                                                       "the OpenAI-compatible routes have nothing to serve."}}

ERROR_RESPONSES = {
    401: {"model": ErrorAnswer, "description": "Missing or wrong bearer token (only when a token is configured)."},
    408: {"model": ErrorAnswer, "description": "The request body did not arrive within the body deadline "
                                               "(limits.body_timeout_s): send it at once."},
    413: {"model": ErrorAnswer, "description": "Body larger than the size limit, or too many batch items."},
    422: {"model": ErrorAnswer, "description": "Invalid JSON (or not UTF-8, or nested too deeply), missing or empty "
                                               "query, non-text tool_output."},
    503: {"model": ErrorAnswer, "description": "Queues full; retry after the Retry-After header's seconds."},
}


def openapi_with_limits(app: Any, max_batch_items: int, max_request_bytes: int) -> dict[str, Any]:
    """The app's OpenAPI document with this deployment's limits in it (they are configured per
    deployment, so the static models cannot carry them): ``maxItems`` on batch items, and the body
    size in the 413 description. Cached on the app, as FastAPI caches its own."""
    from fastapi.openapi.utils import get_openapi

    schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    batch = schema.get("components", {}).get("schemas", {}).get("BatchBody")
    if batch:
        batch["properties"]["items"]["maxItems"] = max_batch_items
    for path in schema.get("paths", {}).values():
        for operation in path.values():
            too_large = operation.get("responses", {}).get("413")
            if too_large:
                too_large["description"] = (f"Body larger than {max_request_bytes} bytes, or more than "
                                            f"{max_batch_items} batch items.")
    app.openapi_schema = schema
    return schema
