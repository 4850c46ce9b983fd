"""The prompt contract of DESIGN.md: the exact bytes the released Squeez-2B checkpoint was trained on.

One renderer for everyone (inference engines, the Serve ingress, training, in-training evaluation,
merge checks, the Squeez-row exporter), hand-built ChatML and never a tokenizer's chat template:
Qwen 3.x templates add an empty ``<think>`` block the released checkpoint never saw, and the
released rows put a newline inside each tag::

    <|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n<query>\n{query}\n</query>\n
    <tool_output>\n{output}\n</tool_output><|im_end|>\n<|im_start|>assistant\n

(one string, split here for width). The query is cut to its first ``QUERY_MAX_CHARS`` characters, as
the released rows were. The answer is ``<relevant_lines>\n{kept lines}\n</relevant_lines>`` (an empty
pair for negatives) and training appends ``<|im_end|>``. ``../shared/compat`` holds golden bytes.

The system text is configuration: serving a released checkpoint unchanged means setting the prompt
it was trained with (``system_prompt`` in the config or checkpoint manifest).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Sequence

from squeez_ray.errors import JobError

# Bump when the rendered bytes change; checkpoints record it (squeez_train.json, manifest.json) and
# serving refuses a checkpoint recorded with another one (see ``check_prompt_format``).
PROMPT_FORMAT = "squeez-released-v2"
# The range-answer format for models squeez-ray trains (squeez_ray.prompt_ranges): numbered lines in,
# line ranges out. Same layout around them; a checkpoint records which of the two it was trained in.
RANGES_FORMAT = "squeez-ranges-v1"
# Layouts of earlier versions, for the refusal message: "squeez-xml-v1" rendered through the
# tokenizer's chat template with no newline inside the tags (and an empty think block on Qwen 3.x).
RETIRED_FORMATS = {"squeez-xml-v1": "chat-template layout without newlines inside the tags"}

QUERY_MAX_CHARS = 1000  # the released rows cut the query to this many characters

DEFAULT_SYSTEM_PROMPT = (
    "You prune tool output for a coding agent. Given the agent's query and one raw tool output, "
    "return only the smallest blocks of lines the agent needs to read next, copied verbatim, inside "
    "<relevant_lines> tags, one source line per line. Never rewrite, summarise or invent lines. "
    "If nothing in the output answers the query, return an empty <relevant_lines></relevant_lines> pair."
)

OPEN, CLOSE = "<relevant_lines>", "</relevant_lines>"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
END_OF_TURN = IM_END  # what training appends after the answer, and what generation stops at


class PromptFormatError(JobError, ValueError):  # JobError: a job reports it as one line, exit 2
    """A checkpoint recorded with a prompt layout this version does not render."""


def check_prompt_format(recorded: str | None, where: str) -> None:
    """Refuse, in one line, a checkpoint trained on another layout (None: nothing recorded, accepted)."""
    if recorded is None or recorded in (PROMPT_FORMAT, RANGES_FORMAT):
        return
    what = RETIRED_FORMATS.get(recorded, "unknown layout")
    raise PromptFormatError(
        f"{where}: trained with prompt_format {recorded!r} ({what}); this version renders {PROMPT_FORMAT!r} and {RANGES_FORMAT!r} "
        f"and would degrade it silently: retrain on this version, or serve it with the squeez-ray release that trained it")


def cut_query(query: str) -> str:
    return query[:QUERY_MAX_CHARS]


def user_message(query: str, tool_output: str) -> str:
    """The user turn's content: the query (cut to ``QUERY_MAX_CHARS``) and the tool output."""
    return f"<query>\n{cut_query(query)}\n</query>\n<tool_output>\n{tool_output}\n</tool_output>"


def render_prompt(query: str, tool_output: str, system_prompt: str = DEFAULT_SYSTEM_PROMPT) -> str:
    """The generation prompt, byte for byte as the released rows: ChatML, no thinking block."""
    return (f"{IM_START}system\n{system_prompt}{IM_END}\n{IM_START}user\n"
            f"{user_message(query, tool_output)}{IM_END}\n{IM_START}assistant\n")


def render_target(kept_lines: Sequence[str]) -> str:
    """The assistant answer: kept lines verbatim, or an empty pair for a negative (no end-of-turn)."""
    if not kept_lines:
        return f"{OPEN}\n{CLOSE}"
    return OPEN + "\n" + "\n".join(kept_lines) + "\n" + CLOSE


def render_training_text(query: str, tool_output: str, kept_lines: Sequence[str],
                         system_prompt: str = DEFAULT_SYSTEM_PROMPT) -> str:
    """Prompt, answer and end-of-turn: the whole sequence a training example is."""
    return render_prompt(query, tool_output, system_prompt) + render_target(kept_lines) + END_OF_TURN


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
