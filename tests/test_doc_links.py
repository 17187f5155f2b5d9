"""Every relative link in the README and in docs/ opens: the file exists, and an anchor names one of its headings.

The README's Performance section points into ``docs/performance.md`` by anchor, so a heading renamed there would
leave a link that opens at the top of the page; this test keeps them in step.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def anchors(page: Path) -> set[str]:
    """The anchors GitHub makes of a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))  # a "# comment" in a code block is no heading
    return {re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-") for title in HEADING.findall(text)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_and_anchors_exist(page: Path) -> None:
    broken = []
    for url in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", url):
            continue  # https://..., mailto:
        path, _, anchor = url.partition("#")
        target = (page.parent / path).resolve() if path else page
        missing_anchor = bool(anchor) and target.suffix == ".md" and target.exists() and anchor not in anchors(target)
        if not target.exists() or missing_anchor:
            broken.append(url)
    assert not broken, f"{page.name}: links that do not open where they point: {broken}"


def test_the_anchors_are_made_as_github_makes_them() -> None:
    """The rule above, on headings the pages use: punctuation dropped, each space one hyphen."""
    page = ROOT / "docs" / "performance.md"
    assert {"the-server-stack", "method", "how-much-a-figure-moves", "earlier-full-runs"} <= anchors(page)
