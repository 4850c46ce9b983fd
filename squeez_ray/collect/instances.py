"""What the text of SWE-bench-format task instances points at (reading and checking them:
``squeez_ray.schema.instances``).

Pure functions over the instance fields; nothing here runs a tool. The planner uses the touched
files/functions of ``patch`` and ``test_patch`` and the identifiers, paths and URLs named in
``problem_statement``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class PatchedFile:
    path: str  # path before the change (after it for new files)
    is_new: bool = False
    is_deleted: bool = False
    hunks: list[tuple[int, int]] = field(default_factory=list)  # (first line, line count) in the old file
    functions: list[str] = field(default_factory=list)  # def/class names the hunks sit in or change


_DIFF_HEADER = re.compile(r"^diff --git a/(\S+) b/(\S+)")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@ ?(.*)$")
_DEF = re.compile(r"\b(?:async\s+def|def|class)\s+([A-Za-z_]\w*)")


def parse_patch(patch: str) -> list[PatchedFile]:
    """The files a unified git diff touches, with old-file hunk ranges and enclosing/changed functions."""
    files: list[PatchedFile] = []
    current: PatchedFile | None = None
    # The enclosing function of a change is the last def/class seen before its first changed line:
    # git's hunk header names the one before the hunk's context, often the previous function.
    enclosing: str | None = None
    changed_yet = False
    for line in patch.splitlines():
        header = _DIFF_HEADER.match(line)
        if header:
            current = PatchedFile(path=header.group(1))
            files.append(current)
            continue
        if current is None:
            continue
        if line.startswith("new file mode"):
            current.is_new = True
        elif line.startswith("deleted file mode"):
            current.is_deleted = True
        elif line.startswith("@@"):
            hunk = _HUNK.match(line)
            if hunk:
                current.hunks.append((int(hunk.group(1)), int(hunk.group(2) or 1)))
                names = _DEF.findall(hunk.group(3))
                enclosing, changed_yet = (names[-1] if names else None), False
        elif line[:1] in "+-" and not line.startswith(("+++", "---")):
            if not changed_yet and enclosing:
                _add_defs(current.functions, f"def {enclosing}")
            changed_yet = True
            _add_defs(current.functions, line[1:])
        elif line[:1] == " " and not changed_yet:
            names = _DEF.findall(line)
            if names:
                enclosing = names[-1]
    return files


def _add_defs(names: list[str], text: str) -> None:
    for name in _DEF.findall(text):
        if name not in names:
            names.append(name)


# Words that look like identifiers in issue text but would make pointless greps.
_STOP = frozenset("""self None True False return import from class def print error Error Exception
traceback Traceback python Python version install github http https example expected actual
issue problem should would could this that with when then value values""".split())
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
_CODE_SPAN = re.compile(r"`([^`\n]{2,80})`")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_FILE_EXTENSIONS = frozenset("py pyi cfg toml ini txt rst md json yaml yml lock html js ts c h".split())
_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.(?:py|pyi|cfg|toml|ini|txt|rst|md|json|ya?ml))\b")
_URL = re.compile(r"https?://[^\s<>\"'`)\]]+")


def issue_identifiers(text: str, limit: int = 20) -> list[str]:
    """Code-like names the issue mentions, in order: `backticked` ones first, then snake_case,
    CamelCase and dotted names from the prose."""
    found: list[str] = []

    def add(name: str) -> None:
        name = name.strip(".")
        if (3 <= len(name) <= 80 and _IDENT.match(name) and re.search("[A-Za-z]", name) and name not in _STOP
                and name.rsplit(".", 1)[-1] not in _FILE_EXTENSIONS and name not in found):
            found.append(name)

    text = _URL.sub(" ", text)  # host names and URL paths are not identifiers

    for span in _CODE_SPAN.findall(text):
        for word in _WORD.findall(span):
            add(word)
    for word in _WORD.findall(text):
        if "_" in word.strip("_") or "." in word or re.search(r"[a-z][A-Z]", word):
            add(word)
    return found[:limit]


def issue_paths(text: str) -> list[str]:
    """File-like tokens the issue mentions (unchecked: the planner keeps only those in the repository)."""
    return list(dict.fromkeys(_PATH.findall(text)))


def issue_urls(text: str) -> list[str]:
    return list(dict.fromkeys(u.rstrip(".,;:") for u in _URL.findall(text)))
