"""The docs' links lead somewhere: every relative link in docs/ and the README names a file that exists (and
a heading or anchor in it), and every `NAME.md, "Section"` citation in the docs, the code, the job configs
and the shipped model card names a section that NAME.md still has (a section that moved, as the encoder's
history did to encoder-history.md, breaks it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]
CITING = [*PAGES, *sorted((REPO / "squeez_ray").rglob("*.py")), *sorted((REPO / "jobs").rglob("*.py")),
          *sorted((REPO / "jobs" / "configs").glob("*.yaml")), REPO / "squeez_ray/models/default/model_card.json"]
LINK = re.compile(r"\]\(([^)\s]+)\)")
# `docs/ENCODER.md, "Operating point"`, `[ENCODER.md](ENCODER.md), "Using it"`, `ENCODER.md, 'Encoder v3-L4d'`
CITATION = re.compile(r"\b([\w-]+\.md)\]?(?:\([^)\s]*\))?,\s*([\"'])([^\"'\n]+)\2")


def headings(page: Path) -> list[str]:
    return [h.strip() for h in re.findall(r"^#{1,6} (.+)$", page.read_text(), re.MULTILINE)]


def anchors(page: Path) -> set[str]:
    """GitHub's heading slugs, plus explicit `<a name=...>` anchors."""
    slugs = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings(page)}
    return slugs | set(re.findall(r"<a (?:name|id)=\"([^\"]+)\"", page.read_text()))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_lead_to_a_file_and_a_heading(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in anchors(dest)):
            broken.append(target)
    assert not broken, f"{page.relative_to(REPO)}: {broken}"


def test_section_citations_name_a_section_the_page_has():
    broken = []
    for source in CITING:
        for name, _, section in CITATION.findall(source.read_text()):
            page = next((p for p in (REPO / "docs" / name, REPO / name) if p.exists()), None)
            if page is None:  # a team doc outside the repository (../shared/docs): not checked here
                continue
            if not any(h.startswith(section) for h in headings(page)):
                broken.append(f"{source.relative_to(REPO)}: {name}, {section!r}")
    assert not broken, broken


def test_readme_is_a_front_door_that_links_only_to_files_that_exist():
    """Issue 40: the README says what squeez-ray is, how to try it, the two commands, the test tiers, the layout
    and where to read on; results and history live in docs/RESULTS.md and docs/encoder-history.md. Past 150
    lines it is turning into an archive again."""
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 150, f"README.md has {len(text.splitlines())} lines: move the detail into docs/"
    targets = [t.partition("#")[0] for t in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]
    assert {"docs/RESULTS.md", "docs/encoder-history.md"} <= set(targets)
    missing = [t for t in targets if t and not (REPO / t).is_file()]
    assert not missing, missing
