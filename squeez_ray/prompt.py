"""The prompt contract of DESIGN.md, kept compatible with the released Squeez-2B checkpoint.

Chat = system prompt, then a user turn ``<query>q</query>\\n<tool_output>o</tool_output>``; the
assistant target is ``<relevant_lines>\\n...kept lines...\\n</relevant_lines>`` (an empty pair for
negatives). The system text is configuration: serving a released checkpoint unchanged means
setting the prompt it was trained with (``system_prompt`` in the config or checkpoint manifest).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Sequence

# Bump when the rendered layout changes; checkpoints record it so serving can refuse a mismatch.
PROMPT_FORMAT = "squeez-xml-v1"

DEFAULT_SYSTEM_PROMPT = (
    "You prune tool output for a coding agent. Given the agent's query and one raw tool output, "
    "return only the smallest blocks of lines the agent needs to read next, copied verbatim, inside "
    "<relevant_lines> tags, one source line per line. Never rewrite, summarise or invent lines. "
    "If nothing in the output answers the query, return an empty <relevant_lines></relevant_lines> pair."
)

OPEN, CLOSE = "<relevant_lines>", "</relevant_lines>"


def user_message(query: str, tool_output: str) -> str:
    return f"<query>{query}</query>\n<tool_output>{tool_output}</tool_output>"


def build_messages(query: str, tool_output: str, system_prompt: str = DEFAULT_SYSTEM_PROMPT) -> list[dict[str, str]]:
    return [{"role": "system", "content": system_prompt},
            {"role": "user", "content": user_message(query, tool_output)}]


def render_target(kept_lines: Sequence[str]) -> str:
    """The assistant answer for training: kept lines verbatim, or an empty pair for a negative."""
    if not kept_lines:
        return f"{OPEN}\n{CLOSE}"
    return OPEN + "\n" + "\n".join(kept_lines) + "\n" + CLOSE


def render_prompt(tokenizer: Any, query: str, tool_output: str, system_prompt: str = DEFAULT_SYSTEM_PROMPT) -> str:
    """The generation prompt as text, through the tokenizer's own chat template."""
    kwargs = {"tokenize": False, "add_generation_prompt": True}
    try:  # Qwen 3.x templates take enable_thinking; the pruner never wants a thinking block.
        return tokenizer.apply_chat_template(build_messages(query, tool_output, system_prompt),
                                             enable_thinking=False, **kwargs)
    except TypeError:
        return tokenizer.apply_chat_template(build_messages(query, tool_output, system_prompt), **kwargs)


@dataclass(frozen=True)
class ParsedTarget:
    lines: list[str]  # generated lines, in order, before mapping to the source
    format: str  # "xml" | "json" | "bare" (no tags: the whole reply is taken as lines)
    complete: bool  # False when the closing tag is missing (e.g. generation hit max_tokens)


_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)


def parse_target(reply: str) -> ParsedTarget:
    """Extract the kept lines from a model reply: XML tags, the legacy JSON target, or bare lines."""
    text = _THINK.sub("", reply).strip()
    start = text.find(OPEN)
    if start >= 0:
        body = text[start + len(OPEN):]
        end = body.find(CLOSE)
        complete = end >= 0
        body = body[:end] if complete else body
        return ParsedTarget(_body_lines(body), "xml", complete)
    legacy = _parse_legacy_json(text)
    if legacy is not None:
        return ParsedTarget(legacy, "json", True)
    return ParsedTarget(_body_lines(text), "bare", True)


def _body_lines(body: str) -> list[str]:
    # The template puts one newline after the opening tag and before the closing one.
    if body.startswith("\n"):
        body = body[1:]
    if body.endswith("\n"):
        body = body[:-1]
    if not body.strip():
        return []
    return body.split("\n")


def _parse_legacy_json(text: str) -> list[str] | None:
    candidate = text
    if candidate.startswith("```"):
        candidate = candidate.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(candidate)
    except (json.JSONDecodeError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("relevant_lines"), list):
        return None
    lines: list[str] = []
    for item in data["relevant_lines"]:
        if isinstance(item, str):
            lines.extend(item.split("\n"))
    return lines
