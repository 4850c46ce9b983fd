"""SWE-bench-format task instances: the rows collection starts from, read and checked.

A data contract like observations and examples, so it lives with them: collection plans from these
rows and the labelling job takes each instance's ``problem_statement`` as the background task.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from squeez_ray.schema.contracts import DataError

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
