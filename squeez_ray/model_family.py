"""Model families: what around the prompt contract depends on the base model's tokenizer.

The prompt bytes are the released ChatML layout for every family (``squeez_ray.prompt``); a family
only adds what its tokenizer needs around them:

- Qwen (the released checkpoint's family, and the default): nothing. ``<|im_start|>`` / ``<|im_end|>``
  are single special tokens and ``<|im_end|>`` is an end-of-sequence id of the merged checkpoint, so
  generation stops without stop strings. The released bytes stay byte-exact.
- Gemma 3: ``<bos>`` first (its tokenizer never adds it, and without it the model repeats itself);
  the ChatML markers are plain text there (several tokens each), so generation stops on the *text*
  ``<|im_end|>`` (and ``<|im_start|>``, where a base model would start the next turn).

Training appends ``end_of_turn`` to every answer; inference sends ``stop`` with every request. LoRA's
``all-linear`` covers both families' attention and MLP projections (q/k/v/o, gate/up/down).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from squeez_ray.prompt import DEFAULT_SYSTEM_PROMPT, IM_END, IM_START, render_prompt


@dataclass(frozen=True)
class ModelFamily:
    name: str
    prefix: str  # text before the prompt (the tokenizer does not add it)
    end_of_turn: str  # appended to each training answer: what the model learns to stop with
    stop: tuple[str, ...]  # stop strings sent with each generation request (empty: the eos ids suffice)
    lora_targets: str = "all-linear"

    def render_prompt(self, query: str, tool_output: str, system_prompt: str = DEFAULT_SYSTEM_PROMPT) -> str:
        return self.prefix + render_prompt(query, tool_output, system_prompt)


QWEN = ModelFamily("qwen", "", IM_END, ())
GEMMA = ModelFamily("gemma", "<bos>", IM_END, (IM_END, IM_START))
FAMILIES = {f.name: f for f in (QWEN, GEMMA)}


def family_of_config(config: dict) -> ModelFamily:
    """By ``model_type`` (top level or ``text_config``): gemma* is Gemma, anything else ChatML as Qwen."""
    model_type = str(config.get("model_type") or (config.get("text_config") or {}).get("model_type") or "")
    return GEMMA if model_type.startswith("gemma") else QWEN


def family_of(model_dir: str | Path | None) -> ModelFamily:
    """The family of a checkpoint directory (its config.json); QWEN when there is none to read."""
    path = Path(model_dir) / "config.json" if model_dir else None
    if path is None or not path.is_file():
        return QWEN
    try:
        return family_of_config(json.loads(path.read_text()))
    except (OSError, ValueError):
        return QWEN
