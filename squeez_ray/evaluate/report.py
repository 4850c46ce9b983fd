"""Reports of an evaluation: the paper-style table, report.md, and the recall-vs-compression plot."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from squeez_ray.io_utils import atomic_path, write_text_atomic

# (header, summary key): the paper's columns (P and R are the strict ones), then the count.
PAPER_COLUMNS = (("P", "precision"), ("R", "recall"), ("strict F1", "strict_f1"), ("exact", "exact"),
                 ("F1", "f1"), ("compression", "compression"), ("neg. empty", "negatives_empty"), ("n", "n"))
EXTRA_COLUMNS = (("line P", "line_precision"), ("line R", "line_recall"), ("line F1", "line_f1"),
                 ("char compr.", "char_compression"), ("token compr.", "token_compression"),
                 ("span R@0.5", "span_recall"), ("ms/example", "latency_ms"), ("in tok", "input_tokens"),
                 ("out tok", "output_tokens"), ("unpruned", "n_unpruned"), ("parsed", "answers_parsed"),
                 ("verbatim", "lines_verbatim"), ("dropped", "lines_dropped"))


def _cell(value: Any, key: str) -> str:
    if value is None:
        return "-"
    if key in ("n", "n_unpruned", "input_tokens", "output_tokens"):
        return f"{value:.0f}"
    if key == "latency_ms":
        return f"{value:.1f}"
    return f"{value:.3f}"


def table(summaries: Mapping[str, Mapping[str, Any]], columns=PAPER_COLUMNS, first: str = "system") -> list[list[str]]:
    """Rows of cells: a header, then one row per entry of ``summaries`` (name -> summary)."""
    rows = [[first, *(header for header, _ in columns)]]
    for name, summary in summaries.items():
        rows.append([name, *(_cell(summary.get(key), key) for _, key in columns)])
    return rows


def markdown(rows: list[list[str]]) -> str:
    head, *body = rows
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)


def plain(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                     for r in rows)


def tools_of(systems: Mapping[str, Mapping[str, Any]]) -> list[str]:
    return sorted({tool for s in systems.values() for tool in s["by_tool"]})


def console_report(metrics: Mapping[str, Any]) -> str:
    """What ``squeez eval`` prints: the paper table overall and per tool family."""
    systems = metrics["systems"]
    parts = [f"overall ({metrics['n_examples']} examples; gold labels compress "
             f"{_cell(metrics.get('gold_compression'), 'compression')})",
             plain(table({n: s["overall"] for n, s in systems.items()}))]
    for tool in tools_of(systems):
        per_tool = {n: s["by_tool"][tool] for n, s in systems.items() if tool in s["by_tool"]}
        parts += ["", f"{tool}", plain(table(per_tool))]
    return "\n".join(parts)


def markdown_report(metrics: Mapping[str, Any], plot_name: str | None) -> str:
    systems = metrics["systems"]
    overall = {n: s["overall"] for n, s in systems.items()}
    out = [
        "# Pruning evaluation", "",
        f"Data: `{metrics['data']}`, {metrics['n_examples']} examples "
        f"({metrics['n_negatives']} negatives). Gold labels compress "
        f"{_cell(metrics.get('gold_compression'), 'compression')} (in lines).", "",
        "Metrics as defined in METRICS.md: P, R and strict F1 are set scores over normalised lines; F1 is "
        "the fuzzy, paper-headline F1; compression is in lines; \"neg. empty\" is the share of negatives "
        "(no gold lines) answered with nothing. All are macro means over examples.", "",
        "## Overall", "", markdown(table(overall)), "",
        "## Position-aware and cost metrics", "",
        f"Token counts: {metrics['token_counter']}.", "",
        markdown(table(overall, EXTRA_COLUMNS)), "",
    ]
    if plot_name:
        out += [f"![recall versus compression]({plot_name})", ""]
    out += ["## By tool family", ""]
    for tool in tools_of(systems):
        per_tool = {n: s["by_tool"][tool] for n, s in systems.items() if tool in s["by_tool"]}
        out += [f"### {tool}", "", markdown(table(per_tool)), ""]
    return "\n".join(out)


def plot_recall_vs_compression(metrics: Mapping[str, Any], path: Path) -> None:
    """One point per system (overall recall against line compression), plus the gold labels."""
    import matplotlib

    matplotlib.use("Agg")  # no display on servers and in CI
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.5))
    for name, system in metrics["systems"].items():
        o = system["overall"]
        ax.scatter(o["compression"], o["recall"], s=40)
        ax.annotate(name, (o["compression"], o["recall"]), textcoords="offset points", xytext=(5, 4), fontsize=8)
    if metrics.get("gold_compression") is not None:
        ax.scatter(metrics["gold_compression"], 1.0, marker="*", s=120, color="black")
        ax.annotate("gold", (metrics["gold_compression"], 1.0), textcoords="offset points", xytext=(5, -10),
                    fontsize=8)
    ax.set_xlabel("compression (share of lines removed)")
    ax.set_ylabel("recall (strict, per example, mean)")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    ax.set_title(f"Recall vs compression ({metrics['n_examples']} examples)")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)


def write_reports(metrics: Mapping[str, Any], out_dir: Path, plot_name: str = "recall_vs_compression.png") -> None:
    plot_recall_vs_compression(metrics, out_dir / plot_name)
    write_text_atomic(out_dir / "report.md", markdown_report(metrics, plot_name))
