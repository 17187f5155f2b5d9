"""Each notebook and its percent script (jupytext.toml pairs notebooks/NN_name.ipynb with notebooks/py/NN_name.py)
say the same, so a review can read the script's diff and trust it is the notebook's."""

from __future__ import annotations

from pathlib import Path

import jupytext
import pytest
from jupytext.config import load_jupytext_configuration_file

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SYNC = "jupytext --sync notebooks/*.ipynb"


def paired_script(notebook: Path) -> Path:
    return notebook.parent / "py" / f"{notebook.stem}.py"


def test_every_notebook_is_paired_in_jupytext_toml() -> None:
    config = load_jupytext_configuration_file(str(ROOT / "jupytext.toml"))
    assert "notebooks/py///py:percent" in str(config.formats), "jupytext.toml must pair notebooks/ with notebooks/py/"
    scripts = {path.stem for path in (ROOT / "notebooks" / "py").glob("*.py")}
    notebooks = {path.stem for path in NOTEBOOKS}
    assert scripts == notebooks, (
        f"notebooks without a script: {sorted(notebooks - scripts)}; scripts without a notebook: "
        f"{sorted(scripts - notebooks)}. Run `{SYNC}` (and delete the script of a removed notebook)."
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_the_script_says_what_the_notebook_says(notebook: Path) -> None:
    config = load_jupytext_configuration_file(str(ROOT / "jupytext.toml"))
    expected = jupytext.writes(jupytext.read(notebook), fmt="py:percent", config=config)
    script = paired_script(notebook)
    assert script.exists(), f"{script.relative_to(ROOT)} is missing: run `{SYNC}`"
    assert script.read_text(encoding="utf-8") == expected, (
        f"{notebook.name} and {script.relative_to(ROOT)} differ: run `{SYNC}` "
        "(it updates the older of each pair from the newer) and commit both"
    )
