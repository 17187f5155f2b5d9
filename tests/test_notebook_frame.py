"""The notebooks after the article (5 on) have the article notebooks' frame and cells a learner can read
(tests/test_notebook_course.py holds notebooks 1-4 to the same)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = [path for path in sorted((ROOT / "notebooks").glob("*.ipynb")) if int(path.name[:2]) > 4]
MAX_LINES = 40


def cells(notebook: Path) -> list[tuple[str, str]]:
    return [(c["cell_type"], "".join(c["source"])) for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"]]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_it_opens_with_what_you_learn_and_need_and_closes_with_a_recap(notebook: Path) -> None:
    kind, opening = cells(notebook)[0]
    assert kind == "markdown" and opening.startswith("# "), f"{notebook.name} must open with its title"
    for heading in ("**What you'll learn**", "**What you'll need**"):
        assert heading in opening, f"{notebook.name}: the first cell has no {heading}"
    assert any(("## Recap" in text or "## まとめ" in text) for kind, text in cells(notebook) if kind == "markdown"), (
        f"{notebook.name}: no recap"
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_its_code_cells_are_short_lessons(notebook: Path) -> None:
    for index, (kind, text) in enumerate(cells(notebook)):
        if kind != "code":
            continue
        lines = len(text.splitlines())
        assert lines <= MAX_LINES, f"{notebook.name}, cell {index}: {lines} lines; split it (at most {MAX_LINES})"
        for harness in ("exec(", "nbformat"):
            assert harness not in text, f"{notebook.name}, cell {index}: {harness!r} belongs in tests/, not a lesson"
