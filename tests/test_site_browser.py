"""The rendered course (site/): built as CI builds it, then opened in a real headless Chromium."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from tests.browser import chromium, wait_for

__all__ = ["chromium"]  # the fixture, imported to be found

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def title(notebook: Path) -> str:
    """The notebook's first heading, which the site uses as the page's title."""
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    raise AssertionError(f"{notebook.name} has no '# ' heading: the site needs one for its title")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built with the command of .ci/run (warnings are errors), into a folder of its own."""
    output = tmp_path_factory.mktemp("site") / "html"
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "site", str(output)]
    built = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    assert built.returncode == 0, (
        f"the site does not build (`python -m sphinx -W --keep-going -b html site site/_build/html`):\n{built.stderr}"
    )
    return output


def test_the_index_lists_every_notebook(site: Path, chromium: webdriver.Chrome) -> None:
    chromium.get((site / "index.html").as_uri())
    course = "div.body div.toctree-wrapper a[href^='notebooks/']"  # the course's table of contents
    wait_for(chromium, lambda driver: driver.find_elements(By.CSS_SELECTOR, course), "the course")
    links = {
        link.get_attribute("href").rsplit("/", 1)[-1]: link.text
        for link in chromium.find_elements(By.CSS_SELECTOR, course)
    }
    for notebook in NOTEBOOKS:
        page = f"{notebook.stem}.html"
        assert page in links, f"the index does not link {notebook.name}; it links {sorted(links)}"
        assert links[page] == title(notebook), f"the index names {notebook.name} {links[page]!r}"
    assert chromium.find_elements(By.CSS_SELECTOR, "a[href='api.html']"), "the index does not link the API reference"


def test_a_notebook_page_shows_its_committed_outputs_and_the_next_one(site: Path, chromium: webdriver.Chrome) -> None:
    first, second = NOTEBOOKS[0], NOTEBOOKS[1]
    chromium.get((site / "notebooks" / f"{first.stem}.html").as_uri())
    heading = wait_for(chromium, lambda driver: driver.find_elements(By.CSS_SELECTOR, "div.body h1"), "a heading")
    assert heading[0].text.rstrip("#¶ ").strip() == title(first)
    outputs = chromium.find_elements(By.CSS_SELECTOR, "div.cell_output")
    assert outputs and any(output.text.strip() for output in outputs), "the page shows no committed output"
    following = chromium.find_elements(By.CSS_SELECTOR, f"a[href$='{second.stem}.html']")
    assert following, f"the page of {first.name} does not lead on to {second.name}"
    following[0].click()
    wait_for(chromium, lambda driver: driver.current_url.endswith(f"{second.stem}.html"), f"the page of {second.name}")


def test_the_api_reference_documents_the_provider(site: Path, chromium: webdriver.Chrome) -> None:
    chromium.get((site / "api.html").as_uri())
    wait_for(chromium, lambda driver: driver.find_elements(By.CSS_SELECTOR, "dl.py.class"), "documented classes")
    names = {element.get_attribute("id") for element in chromium.find_elements(By.CSS_SELECTOR, "dt.sig[id]")}
    assert any(name.endswith("RemoteChatHistoryProvider") for name in names), sorted(names)[:20]
