"""Sphinx configuration of the rendered course: the notebooks with their committed outputs, the guides in docs/,
the README, and the API reference from chatlab's docstrings.

Build it from the repository's root (warnings are errors, as in CI):

    python -m sphinx -W --keep-going -b html site site/_build/html

The notebooks are never executed here: the site shows the outputs committed with them (produced against the
offline tutorial model, the same outputs nbval checks). Sphinx reads only files under its source folder, so the
build copies README.md, notebooks/*.ipynb and docs/ in here first, keeping their relative paths: the links between
them work on the site as they do on GitHub.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

SITE = Path(__file__).resolve().parent
ROOT = SITE.parent
sys.path.insert(0, str(ROOT))  # autodoc imports this checkout's chatlab

# What the build copies in (each listed in .gitignore beside this file): the sources stay where they are.
shutil.copyfile(ROOT / "README.md", SITE / "README.md")
(SITE / "stress").mkdir(exist_ok=True)
shutil.copyfile(ROOT / "stress" / "README.md", SITE / "stress" / "README.md")
for folder, pattern in (("notebooks", "*.ipynb"), ("docs", "*")):
    target = SITE / folder
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir()
    for source in sorted((ROOT / folder).glob(pattern)):
        if source.is_file():
            shutil.copyfile(source, target / source.name)

import chatlab  # noqa: E402

project = "chatlab"
author = "chatlab developers"
copyright = "chatlab developers"
release = version = chatlab.__version__

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode"]
exclude_patterns = ["_build", "**/.ipynb_checkpoints", "conf.py"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}

# The committed outputs, as they are: no execution, so the site builds without a kernel or an LLM.
nb_execution_mode = "off"
nb_merge_streams = True
myst_heading_anchors = 4  # README's and docs' `#section` links
myst_enable_extensions = ["colon_fence"]

suppress_warnings = ["myst.header"]  # docs/ pages start at "##": GitHub shows them so
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}

html_theme = "alabaster"
html_title = "chatlab: the course"
html_theme_options = {
    "description": "Out-of-process chat history for Microsoft Agent Framework agents",
    "fixed_sidebar": True,
    "page_width": "1240px",  # the notebooks' code cells are up to 120 columns wide
}
html_sidebars = {"**": ["about.html", "navigation.html", "relations.html", "searchbox.html"]}
