"""Each notebook and its MyST Markdown text (jupytext.toml pairs notebooks/NN_name.ipynb with notebooks/md/NN_name.md)
say the same, so a review can read the text's diff and trust it is the notebook's."""

from __future__ import annotations

from pathlib import Path

import jupytext
import pytest
from jupytext.config import load_jupytext_configuration_file

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SYNC = "jupytext --sync notebooks/*.ipynb"


def paired_text(notebook: Path) -> Path:
    return notebook.parent / "md" / f"{notebook.stem}.md"


def test_every_notebook_is_paired_in_jupytext_toml() -> None:
    config = load_jupytext_configuration_file(str(ROOT / "jupytext.toml"))
    assert "notebooks/md///md:myst" in str(config.formats), "jupytext.toml must pair notebooks/ with notebooks/md/"
    texts = {path.stem for path in (ROOT / "notebooks" / "md").glob("*.md")}
    notebooks = {path.stem for path in NOTEBOOKS}
    assert texts == notebooks, (
        f"notebooks without a text: {sorted(notebooks - texts)}; texts without a notebook: "
        f"{sorted(texts - notebooks)}. Run `{SYNC}` (and delete the text of a removed notebook)."
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_the_text_says_what_the_notebook_says(notebook: Path) -> None:
    config = load_jupytext_configuration_file(str(ROOT / "jupytext.toml"))
    expected = jupytext.writes(jupytext.read(notebook), fmt="md:myst", config=config)
    text = paired_text(notebook)
    assert text.exists(), f"{text.relative_to(ROOT)} is missing: run `{SYNC}`"
    assert text.read_text(encoding="utf-8") == expected, (
        f"{notebook.name} and {text.relative_to(ROOT)} differ: run `{SYNC}` "
        "(it updates the older of each pair from the newer) and commit both"
    )
