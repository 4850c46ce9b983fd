"""Importing released data at scale: bad rows are reported (file, row, field) and skipped, or stop the
import with ``strict=True``; the summary counts what was imported, skipped and left ambiguous.

``read_examples`` stops at the first bad row, which is right for our own files; the released
dataset is large and third-party, where one odd row should cost one row, said out loud.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from squeez_ray.schema.contracts import DataError
from squeez_ray.schema.files import rows_by_file
from squeez_ray.schema.formats import from_row

log = logging.getLogger(__name__)

MAX_LISTED_ERRORS = 50  # the summary lists this many bad rows in full; the count covers all of them


@dataclass
class ImportSummary:
    read: int = 0  # rows seen
    imported: int = 0
    skipped: int = 0  # bad rows (each one reported)
    ambiguous_rows: int = 0  # encoder rows with at least one line whose position is not certain
    ambiguous_lines: int = 0
    formats: dict[str, int] = field(default_factory=dict)  # file format -> rows imported
    errors: list[dict[str, Any]] = field(default_factory=list)  # the first MAX_LISTED_ERRORS bad rows

    def to_dict(self) -> dict[str, Any]:
        return {"read": self.read, "imported": self.imported, "skipped": self.skipped,
                "ambiguous_rows": self.ambiguous_rows, "ambiguous_lines": self.ambiguous_lines,
                "formats": dict(self.formats), "errors": list(self.errors)}


def import_examples(path: str | Path, format: str | None = None, *, strict: bool = False,
                    split: str | None = None) -> tuple[list[dict[str, Any]], ImportSummary]:
    """Canonical rows of every readable row in ``path`` (any format ``read_examples`` takes) and a summary.

    A file-level problem (missing, unreadable, unknown columns) is always an error: there is no row
    to skip. ``strict`` turns the first bad row into the raised DataError.
    """
    summary = ImportSummary()
    examples: list[dict[str, Any]] = []
    for file, fmt, source, rows in rows_by_file(path, format, split=split):
        for n, raw in rows:
            summary.read += 1
            try:
                example, ambiguous = _one(raw, fmt, file, n, source)
            except DataError as error:
                if strict:
                    raise
                _skip(summary, error, file, n)
                continue
            examples.append(example)
            summary.imported += 1
            summary.formats[fmt] = summary.formats.get(fmt, 0) + 1
            if ambiguous:
                summary.ambiguous_rows += 1
                summary.ambiguous_lines += ambiguous
    if summary.skipped:
        log.warning("%s: skipped %d of %d rows as bad (first: %s)", path, summary.skipped, summary.read,
                    summary.errors[0]["message"])
    return examples, summary


def _one(raw: Any, fmt: str, file: str, n: int, source: str | None) -> tuple[dict[str, Any], int]:
    if fmt == "encoder" and isinstance(raw, Mapping):
        from squeez_ray.schema.encoder_rows import from_encoder_row

        return from_encoder_row(raw, path=file, row=n)
    return from_row(raw, fmt, path=file, row=n, source=source), 0


def _skip(summary: ImportSummary, error: DataError, file: str, n: int) -> None:
    summary.skipped += 1
    if len(summary.errors) < MAX_LISTED_ERRORS:
        summary.errors.append({"file": str(error.path or file), "row": error.row or n, "field": error.field,
                               "message": str(error)})
