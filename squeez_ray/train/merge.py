"""Merge a trained LoRA adapter into its base: a standalone checkpoint vLLM serves as is.

The training checkpoint says what it was trained on (``squeez_train.json``: base model, prompt
format, system prompt, config, data counts), so merging needs only the checkpoint. The output folder
holds the merged weights, the tokenizer with its chat template, a generation config that stops at the
end-of-turn text the model was trained to emit, and ``manifest.json``; it appears whole or not at all.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

from squeez_ray.io_utils import atomic_dir, git_revision, write_json_atomic
from squeez_ray.errors import JobError
from squeez_ray.train.loop import METADATA_FILE

log = logging.getLogger(__name__)


class MergeError(JobError, ValueError):  # JobError: the job runner reports it as one line, exit 2
    """A checkpoint or output folder that cannot be merged into / written, named."""


def _step(folder: Path) -> int:
    return int(re.sub(r"\D", "", folder.name) or 0)


def find_checkpoint(path: str | Path, which: str = "latest") -> Path:
    """``path`` itself when it is a training checkpoint; for a run folder, its ``latest`` or ``best`` checkpoint.

    ``best``: the highest (or lowest, per the run's ``run.checkpoint_score_order``) value of the run's
    ``run.checkpoint_score`` (eval_f1 by default) that the checkpoints record in squeez_train.json.
    """
    folder = Path(path)
    if (folder / METADATA_FILE).is_file():
        return folder
    if not folder.is_dir():
        raise MergeError(f"{folder} does not exist")
    candidates = sorted((c for c in folder.glob("checkpoint_*") if (c / METADATA_FILE).is_file()), key=_step)
    if not candidates:
        raise MergeError(f"{folder} is neither a training checkpoint (no {METADATA_FILE}) nor a run folder holding one")
    if which == "latest":
        return candidates[-1]
    if which != "best":
        raise MergeError(f"--checkpoint {which!r}: use latest, best or a checkpoint folder")
    metas = {c: json.loads((c / METADATA_FILE).read_text()) for c in candidates}
    run = (metas[candidates[-1]].get("config") or {}).get("run") or {}
    key = run.get("checkpoint_score") or "eval_f1"
    sign = -1 if run.get("checkpoint_score_order") == "min" else 1
    scored = [(sign * float(m["metrics"][key]), _step(c), c) for c, m in metas.items()
              if isinstance((m.get("metrics") or {}).get(key), (int, float))]
    if not scored:
        raise MergeError(f"no checkpoint in {folder} records {key} (eval.enabled was off, or an older run): "
                         "pass --checkpoint latest or a checkpoint folder")
    return max(scored)[2]  # ties: the later step


def pick_checkpoint(path: str | Path, which: str | None) -> tuple[Path, str]:
    """What jobs/merge.py merges, and why: ``which`` is latest | best | a folder; None: best when the
    run's checkpoints record their score, else latest."""
    if which not in (None, "latest", "best"):
        return find_checkpoint(which), "the named checkpoint"
    if which is None:
        try:
            return find_checkpoint(path, "best"), "best by its recorded score"
        except MergeError as error:
            if "records" not in str(error):
                raise
            return find_checkpoint(path, "latest"), "latest (no checkpoint records a score)"
    return find_checkpoint(path, which), which


def merge_adapter(checkpoint: str | Path, out_dir: str | Path, *, overwrite: bool = False,
                  base_override: str | None = None, which: str | None = None) -> dict[str, Any]:
    """Write the merged model to ``out_dir``; returns its manifest. ``which``: see pick_checkpoint."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, GenerationConfig

    from squeez_ray.prompt import END_OF_TURN, check_prompt_format
    from squeez_ray.train.model import load_tokenizer

    source, chosen = pick_checkpoint(checkpoint, which)
    log.info("merging %s (%s)", source, chosen)
    meta = json.loads((source / METADATA_FILE).read_text())
    # Merging an adapter trained on a retired layout would hand serving a checkpoint it must refuse.
    check_prompt_format(meta.get("prompt_format"), str(source / METADATA_FILE))
    out = Path(out_dir)
    if out.exists() and not overwrite:
        raise MergeError(f"{out} exists; pass --overwrite to replace it")
    base = base_override or meta["base_model_path"]
    if not base or ("/" in base and base.startswith((".", "/")) and not Path(base).is_dir()):
        raise MergeError(f"{source / METADATA_FILE}: base_model_path {base!r} is not there; pass --base")
    from squeez_ray.hub import ModelNotFoundError, resolve_model

    try:  # a hub id through the HF cache (one-line error offline)
        base = resolve_model(base, what="base model")
    except ModelNotFoundError as error:
        raise MergeError(f"{error}; or pass --base DIR") from None
    dtype = getattr(torch, meta.get("config", {}).get("model", {}).get("dtype", "float32"))
    started = time.time()
    model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype)
    merged = PeftModel.from_pretrained(model, str(source)).merge_and_unload()
    merged.config.use_cache = True
    tokenizer = load_tokenizer(base)

    with atomic_dir(out) as staging:  # the usual permissions; a failed merge leaves the old folder as it was
        merged.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging, save_jinja_files=False)  # chat template inside tokenizer_config.json
        generation = _generation_config(base, tokenizer, END_OF_TURN, GenerationConfig)
        generation.save_pretrained(staging)
        manifest = {
            "kind": "squeez-merged", "base_model": meta.get("base_model"), "base_model_path": base,
            "adapter": str(source), "adapter_chosen": chosen, "adapter_metrics": meta.get("metrics"),
            "global_step": meta.get("global_step"),
            "prompt_format": meta["prompt_format"], "model_family": meta.get("model_family"),
            "system_prompt": meta["system_prompt"],
            "training_config": meta.get("config"), "data": meta.get("data"), "lora": meta.get("lora"),
            "training_git_revision": meta.get("git_revision"), "git_revision": git_revision(),
            "merged_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "merge_s": round(time.time() - started, 1),
        }
        write_json_atomic(staging / "manifest.json", manifest)
    return manifest


def _generation_config(base: str, tokenizer: Any, end_text: str, cls: Any) -> Any:
    """The base's generation config, greedy, stopping at the trained end-of-turn token too."""
    try:
        config = cls.from_pretrained(base)
    except OSError:  # bases without generation_config.json
        config = cls()
    eos = config.eos_token_id
    eos_ids = list(eos) if isinstance(eos, (list, tuple)) else ([eos] if eos is not None else [])
    end_ids = tokenizer(end_text, add_special_tokens=False)["input_ids"] if end_text else []
    if len(end_ids) == 1 and end_ids[0] not in eos_ids:
        eos_ids.append(end_ids[0])
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in eos_ids:
        eos_ids.append(tokenizer.eos_token_id)
    config.eos_token_id = eos_ids
    config.pad_token_id = tokenizer.pad_token_id
    config.do_sample = False
    for sampling_only in ("temperature", "top_p", "top_k"):  # greedy: silence validation warnings
        setattr(config, sampling_only, None)
    return config


def verify_with_vllm(model_dir: str | Path, *, max_model_len: int = 2048, max_tokens: int = 32) -> str:
    """Load the merged checkpoint in vLLM and generate once through the prompt contract; returns the reply.

    Needs a ``__main__`` guard in the calling script (vLLM starts worker processes).
    """
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from transformers import AutoConfig
    from vllm import LLM, SamplingParams

    from squeez_ray.model_family import family_of

    family = family_of(model_dir)
    manifest = json.loads((Path(model_dir) / "manifest.json").read_text())
    context = getattr(AutoConfig.from_pretrained(model_dir), "max_position_embeddings", max_model_len)
    llm = LLM(model=str(model_dir), max_model_len=min(context, max_model_len), dtype="auto", enforce_eager=True)
    try:
        prompt = family.render_prompt("which test failed", "test_a PASSED\ntest_b FAILED\nAssertionError: 1 != 2",
                               manifest["system_prompt"])
        params = SamplingParams(max_tokens=max_tokens, temperature=0.0, stop=list(family.stop) or None)
        output = llm.generate([prompt], params, use_tqdm=False,
                              tokenization_kwargs={"add_special_tokens": False})[0]
        return output.outputs[0].text
    finally:
        del llm
