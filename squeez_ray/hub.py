"""Model references -> local directories: a checkpoint folder as is, or a Hugging Face id ``Org/name``
(optionally ``Org/name@revision``) through the local HF cache, downloading when the hub is reachable.

Every place that takes a model (``squeez --model``, the Serve config's ``model``, ``squeez eval``,
the re-prune job, the training ``base``) calls ``resolve_model``, so a hub id means the same
everywhere and an unreachable hub fails the same way: one line naming the cache folder and
``HF_HUB_OFFLINE``. The cache is looked up first, so a cached model never touches the network.
Environment is read at call time (``HF_HUB_CACHE``, ``HF_HOME``, ``HF_HUB_OFFLINE``), not at import,
so a job that sets them before its first model load is obeyed. Aliases of base models that registry
packages ship (``gemma-3-270m``, ``squeez_ray.base_models``) resolve to their cached directory.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

# Owner and name as the hub allows them; a path that exists always wins over this reading.
_HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(?:@(?P<revision>[\w./-]+))?$")
# Weights in other formats than safetensors are not needed by transformers / vLLM here.
_IGNORE = ["*.bin", "*.pt", "*.pth", "*.msgpack", "*.h5", "*.ckpt", "*.gguf", "*.onnx", "original/*"]
_TRUE = {"1", "true", "yes", "on"}


class ModelNotFoundError(FileNotFoundError):
    """A model reference that names no local folder and cannot be had from the hub (one line)."""


def is_hub_id(ref: str) -> bool:
    return bool(_HUB_ID.match(ref)) and not Path(ref).expanduser().exists() and not _local_parent(ref)


def _local_parent(ref: str) -> bool:
    """``runs/typo`` where ``runs/`` is a folder here: a mistyped path, not a hub id to fetch."""
    return Path(ref.split("/", 1)[0]).is_dir()


def hub_cache_dir() -> Path:
    """The hub cache as huggingface_hub computes it, from the environment as it is now."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(name):
            return Path(os.environ[name]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


def resolve_model(ref: str, *, what: str = "model") -> str:
    """A local directory for ``ref``; ``ModelNotFoundError`` (one line) when there is none to be had."""
    path = Path(ref).expanduser()
    if path.is_dir():
        return str(path)
    from squeez_ray.base_models import is_packaged, materialize

    if is_packaged(ref):  # a base model a registry package ships (gemma-3-270m): converted once, cached
        return str(materialize(ref))
    match = _HUB_ID.match(ref)
    if path.exists() or match is None or ref.startswith((".", "/", "~")) or _local_parent(ref):
        raise ModelNotFoundError(f"{what} {ref!r}: no such checkpoint directory (and not a hub id like Org/name)")
    repo, revision = match.group("repo"), match.group("revision")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (GatedRepoError, LocalEntryNotFoundError, RepositoryNotFoundError,
                                        RevisionNotFoundError)

    cache = hub_cache_dir()
    try:  # the cache first: a cached model never needs the network, even when it is reachable
        return snapshot_download(repo, revision=revision, cache_dir=cache, local_files_only=True)
    except LocalEntryNotFoundError:
        pass
    if hub_offline():
        raise ModelNotFoundError(
            f"{what} {ref!r} is not in the Hugging Face cache {cache} and HF_HUB_OFFLINE=1 forbids downloading it: "
            f"download it where the hub is reachable (hf download {repo}) or point HF_HUB_CACHE at a "
            f"cache that holds it") from None
    try:
        return snapshot_download(repo, revision=revision, cache_dir=cache, ignore_patterns=_IGNORE)
    except GatedRepoError:
        raise ModelNotFoundError(f"{what} {ref!r} is gated on the Hugging Face hub: accept its terms and set "
                                 f"HF_TOKEN (cache {cache})") from None
    except RepositoryNotFoundError:
        raise ModelNotFoundError(f"{what} {ref!r}: no such repository on the Hugging Face hub "
                                 f"(or it is private: set HF_TOKEN)") from None
    except RevisionNotFoundError:
        raise ModelNotFoundError(f"{what} {ref!r}: the hub has no revision {revision!r} of {repo}") from None
    except (LocalEntryNotFoundError, OSError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ModelNotFoundError(
            f"{what} {ref!r} is not in the Hugging Face cache {cache} and the hub is unreachable ({reason}); "
            f"download it where the hub is reachable, or set HF_HUB_OFFLINE=1 and point HF_HUB_CACHE at a "
            f"cache that holds it") from None
