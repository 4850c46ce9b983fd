"""SWE-bench-format task instances: reading and checking them, and what their text points at.

Pure functions over the instance fields; nothing here runs a tool. The planner uses the touched
files/functions of ``patch`` and ``test_patch`` and the identifiers, paths and URLs named in
``problem_statement``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from squeez_ray.schema import DataError

REQUIRED_FIELDS = ("instance_id", "repo", "base_commit")
TEXT_FIELDS = ("problem_statement", "patch", "test_patch")
_REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_COMMIT_RE = re.compile(r"^[0-9a-f]{7,40}$")


def read_instances(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a JSONL / JSON / Parquet instances file, checked; DataError names file, row and field."""
    path = Path(path)
    if not path.is_file():
        raise DataError("does not exist or is not a file", path=path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
    elif path.suffix == ".json":
        rows = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(rows, list):
            raise DataError("a .json instances file must hold a list of objects", path=path)
    else:
        rows = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise DataError(f"line {number} is not valid JSON: {error}", path=path) from None
    checked, seen = [], {}
    for index, raw in enumerate(rows):
        row = check_instance(raw, path=path, row=index)
        if row["instance_id"] in seen:
            raise DataError(f"duplicate instance_id (first at row {seen[row['instance_id']]})", path=path, row=index,
                            field="instance_id", instance_id=row["instance_id"])
        seen[row["instance_id"]] = index
        checked.append(row)
    return checked


def check_instance(raw: Any, *, path: str | Path | None = None, row: int | None = None) -> dict[str, Any]:
    """The fields collection uses, checked and normalised (FAIL_TO_PASS as a list of strings)."""
    if not isinstance(raw, dict):
        raise DataError(f"expected an object, got {type(raw).__name__}", path=path, row=row)
    iid = raw.get("instance_id")

    def fail(name: str, message: str) -> DataError:
        return DataError(message, path=path, row=row, field=name, instance_id=iid if isinstance(iid, str) else None)

    for name in REQUIRED_FIELDS:
        if not isinstance(raw.get(name), str) or not raw[name].strip():
            raise fail(name, "is missing or not a non-empty string (required)")
    if not _REPO_RE.match(raw["repo"]) or ".." in raw["repo"]:
        raise fail("repo", f"{raw['repo']!r} is not 'owner/name'")
    if not _COMMIT_RE.match(raw["base_commit"]):
        raise fail("base_commit", f"{raw['base_commit']!r} is not a hex commit id (7 to 40 lowercase hex digits)")
    out = {name: raw[name] for name in REQUIRED_FIELDS}
    for name in TEXT_FIELDS:
        value = raw.get(name)
        if value is not None and not isinstance(value, str):
            raise fail(name, f"expected text, got {type(value).__name__}")
        out[name] = value or ""
    out["FAIL_TO_PASS"] = _test_list(raw.get("FAIL_TO_PASS"), fail)
    return out


def _test_list(value: Any, fail) -> list[str]:
    # SWE-bench stores FAIL_TO_PASS as a JSON string holding a list; some exports keep the list.
    if value is None or value == "":
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise fail("FAIL_TO_PASS", "is text but not a JSON list of test ids") from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise fail("FAIL_TO_PASS", "expected a list of test ids (strings)")
    return value


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
