"""Token counts for ``squeez report``: a real tokenizer where one is on this machine, else characters / 4.

``--tokens`` takes ``auto`` (the default), ``chars``, a tiktoken encoding name (``o200k_base``) or a
tokenizer file / folder (``tokenizer.json``, as Hugging Face models ship it). ``auto`` never reaches
the network: tiktoken's o200k_base (GPT-4o's) when its file is already cached, else the Gemma 3
tokenizer that ``scripts/setup.sh`` puts in squeez's model cache, else characters / 4. The table
names what it used.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CHARS = "characters / 4 (estimate), no tokenizer found"
_TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"


class TokenizerError(ValueError):
    """A ``--tokens`` value that names no usable tokenizer (one line)."""


@dataclass(frozen=True)
class Counter:
    name: str  # what the table says it counted with
    count: Callable[[str], int]


def chars_over_4(text: str) -> int:
    return (len(text) + 3) // 4


def resolve(choice: str | None) -> Counter:
    choice = choice or "auto"
    if choice == "chars":
        return Counter("characters / 4 (estimate)", chars_over_4)
    if choice != "auto":
        path = Path(choice).expanduser()
        if path.exists():
            return _from_file(path)
        if not _tiktoken_cached(choice):
            raise TokenizerError(f"--tokens {choice}: not a tokenizer file or folder, nor a tiktoken encoding "
                                 "cached on this machine (expected auto, chars, o200k_base, or a tokenizer.json path)")
        return _tiktoken(choice)
    if _tiktoken_cached("o200k_base"):
        return _tiktoken("o200k_base")
    gemma = _squeez_models() / "gemma-3-270m"
    if (gemma / "tokenizer.json").is_file():
        try:
            return _from_file(gemma)
        except TokenizerError:
            pass
    return Counter(CHARS, chars_over_4)


def _squeez_models() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "squeez" / "models"


def _tiktoken_cached(name: str) -> bool:
    """tiktoken's own cache rule (tiktoken/load.py): the file named by the SHA-1 of its URL."""
    try:
        import tiktoken  # noqa: F401
    except ImportError:
        return False
    cache = (os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
             or os.path.join(tempfile.gettempdir(), "data-gym-cache"))
    return (Path(cache) / hashlib.sha1(_TIKTOKEN_URL.format(name).encode()).hexdigest()).is_file()


def _tiktoken(name: str) -> Counter:
    import tiktoken

    try:
        encoding = tiktoken.get_encoding(name)
    except (ValueError, OSError) as error:
        raise TokenizerError(f"--tokens {name}: tiktoken cannot load it ({error})") from None
    return Counter(f"tiktoken {name}", lambda text: len(encoding.encode(text, disallowed_special=())))


def _from_file(path: Path) -> Counter:
    file = path / "tokenizer.json" if path.is_dir() else path
    try:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(file))
    except ImportError:
        raise TokenizerError(f"--tokens {path}: reading a tokenizer file needs the tokenizers package") from None
    except Exception as error:  # noqa: BLE001 - the library raises its own untyped errors for bad files
        raise TokenizerError(f"--tokens {path}: not a tokenizer file ({str(error)[:200]})") from None
    name = path.name if path.is_dir() else f"{path.parent.name}/{path.name}"
    return Counter(f"{name} tokenizer",
                   lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids))
