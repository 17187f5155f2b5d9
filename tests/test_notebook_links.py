"""Every relative link in a notebook opens in JupyterLab started as the README says.

JupyterLab resolves a relative link in a notebook's markdown against the notebook's folder inside the
server's root folder, and never above that root (``PathExt.resolve(PathExt.dirname(path), url)`` in
``@jupyterlab/rendermime``). So ``../docs/x.md`` from ``notebooks/`` opens only when the server's root is
the repository, which is how the README starts it.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
LINK = re.compile(r"\]\(([^)\s]+)\)")
#: a link with a scheme (https:, mailto:): not a file of the repository
SCHEME = re.compile(r"[a-z][a-z0-9+.-]*:")


def jupyterlab_target(notebook: Path, url: str, root: Path) -> Path:
    """The file JupyterLab opens for a relative ``url`` in ``notebook`` when its server's root is ``root``."""
    folder = notebook.parent.relative_to(root).as_posix()
    resolved = posixpath.normpath(posixpath.join("/", folder, url))  # clamped at the root, as PathExt.resolve
    return root / resolved.lstrip("/")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_relative_links_open_with_the_repository_as_jupyterlabs_root(notebook: Path) -> None:
    broken = []
    for cell in nbformat.read(notebook, as_version=4).cells:
        if cell.cell_type != "markdown":
            continue
        for url in LINK.findall(cell.source):
            if SCHEME.match(url) or url.startswith("#"):
                continue  # https://..., mailto:, an anchor in the notebook
            if not jupyterlab_target(notebook, url.split("#")[0], ROOT).exists():
                broken.append(url)
    assert not broken, f"{notebook.name}: links that JupyterLab cannot open: {broken}"


def test_a_link_to_docs_does_not_open_with_notebooks_as_the_root() -> None:
    """Why the README starts JupyterLab in the repository: with notebooks/ as its root, ../docs is out of reach."""
    notebook = ROOT / "notebooks" / "06_protections.ipynb"
    assert jupyterlab_target(notebook, "../docs/protections.md", ROOT).exists()
    assert not jupyterlab_target(notebook, "../docs/protections.md", ROOT / "notebooks").exists()


def test_the_readme_starts_jupyterlab_in_the_repository() -> None:
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"^\S*jupyter lab\b.*$", readme, re.M)
    assert commands, "the README says how to start JupyterLab"
    for command in commands:
        assert "notebooks" not in command.split("#")[0], f"{command!r}: JupyterLab's root must be the repository"
