"""Every relative link in the README and in docs/ opens: the file exists, and an anchor names one of its headings.

The README's Performance section points into ``docs/performance.md`` by anchor, so a heading renamed there would
leave a link that opens at the top of the page; this test keeps them in step.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from tests.test_notebook_links import LINK, SCHEME

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


@functools.cache
def prose(page: Path) -> str:
    """A page's text without its code blocks (a ``# comment`` there is no heading, a ``](x)`` no link)."""
    return FENCE.sub("", page.read_text(encoding="utf-8"))


@functools.cache
def anchors(page: Path) -> frozenset[str]:
    """The anchors GitHub makes of a page's headings: lower case, punctuation dropped, each space a hyphen."""
    titles = HEADING.findall(prose(page))
    return frozenset(re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-") for title in titles)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_and_anchors_exist(page: Path) -> None:
    broken = []
    for url in LINK.findall(prose(page)):
        if SCHEME.match(url):
            continue
        path, _, anchor = url.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists() or (anchor and target.suffix == ".md" and anchor not in anchors(target)):
            broken.append(url)
    assert not broken, f"{page.name}: links that do not open where they point: {broken}"


def test_the_anchors_are_made_as_github_makes_them() -> None:
    """The rule above, on headings the pages have: ``### conda / mamba`` drops the slash and keeps both spaces."""
    assert "conda--mamba" in anchors(ROOT / "README.md")
    assert {"the-server-stack", "what-limits-each-store"} <= anchors(ROOT / "docs" / "performance.md")
