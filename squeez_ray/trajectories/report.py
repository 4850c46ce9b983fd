"""The re-prune report: per-format totals from the per-unit done-markers (so a resumed run reports
every file, including those finished before the restart), as report.json, report.md and a table."""

from __future__ import annotations

from typing import Any

_COUNTS = ("files", "observations", "pruned", "passed_through", "failed", "lines_before", "lines_after",
           "tokens_before", "tokens_after", "bytes_before", "bytes_after")


def summarize(units: list[dict[str, Any]], token_note: str) -> dict[str, Any]:
    """Per-format and total counts; ``token_note`` says what a token is (a tokenizer, or characters / 4)."""
    by_format: dict[str, dict[str, Any]] = {}
    failed_files, failed_observations, copied = [], [], []
    for unit in sorted(units, key=lambda u: u["unit"]):
        if unit["status"] == "copied":
            copied.append(unit["unit"])
            continue
        if unit["status"] == "failed":
            failed_files.append({"unit": unit["unit"], "format": unit.get("format"), "error": unit.get("error")})
        key = unit.get("format") or "unrecognised"
        row = by_format.setdefault(key, {name: 0 for name in _COUNTS} | {"reasons": {}})
        row["files"] += 1
        for name in _COUNTS[1:]:
            row[name] += unit.get(name, 0)
        for reason, n in (unit.get("reasons") or {}).items():
            row["reasons"][reason] = row["reasons"].get(reason, 0) + n
        failed_observations += [{"unit": unit["unit"], **f} for f in unit.get("failures") or []]
    total = {name: sum(row[name] for row in by_format.values()) for name in _COUNTS}
    return {"by_format": by_format, "total": total, "failed_files": failed_files,
            "failed_observations": failed_observations, "copied_other_files": copied, "token_note": token_note}


def table(summary: dict[str, Any]) -> str:
    """A Markdown table, one row per format plus the total."""
    head = ["format", "files", "obs", "pruned", "passed", "failed", "lines before", "lines after", "tokens before",
            "tokens after", "line reduction"]
    rows = [head, ["---"] * len(head)]
    for name, row in [*sorted(summary["by_format"].items()), ("total", summary["total"])]:
        reduction = 1 - row["lines_after"] / row["lines_before"] if row["lines_before"] else 0.0
        rows.append([name, row["files"], row["observations"], row["pruned"], row["passed_through"], row["failed"],
                     row["lines_before"], row["lines_after"], row["tokens_before"], row["tokens_after"],
                     f"{reduction:.1%}"])
    return "\n".join("| " + " | ".join(str(c) for c in r) + " |" for r in rows)


def markdown(summary: dict[str, Any], config: dict[str, Any]) -> str:
    settings = (f"backend `{config.get('backend')}`, query source `{config.get('query_source')}`, "
                f"min lines {config.get('min_lines')}, markers {config.get('markers')}")
    note = (f"Note: tokens are {summary['token_note']}. Lines count every observation seen (passed-through ones count the same "
            "before and after).")
    lines = ["# Re-prune report", "", settings, "", table(summary), "", note, ""]
    if summary["failed_files"]:
        lines += ["## Files that could not be read (copied unchanged)", ""]
        lines += [f"- `{f['unit']}`: {f['error']}" for f in summary["failed_files"]] + [""]
    if summary["failed_observations"]:
        lines += ["## Observations still failing in the backend (left unpruned; a rerun retries them)", ""]
        lines += [f"- `{f['unit']}` {f['where']}: {f['error']}" for f in summary["failed_observations"][:200]] + [""]
    if summary.get("skipped"):
        lines += ["## Skipped paths", ""] + [f"- `{item['path']}`: {item['why']}" for item in summary["skipped"]] + [""]
    if summary.get("links_copied"):
        lines += [f"{len(summary['links_copied'])} symbolic link(s) copied as links (never followed): "
                  + ", ".join(f"`{link}`" for link in summary["links_copied"][:20]), ""]
    if summary["copied_other_files"]:
        lines += [f"{len(summary['copied_other_files'])} other file(s) are not stored runs and were copied as they are.",
                  ""]
    return "\n".join(lines)
