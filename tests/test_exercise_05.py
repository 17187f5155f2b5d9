"""Notebook 5's "On your own" check passes with the reference solution and fails, in plain words, without it.

The same way as the article's notebooks are checked: the notebook runs in a real kernel up to its check cell (tagged
``exercise-check``), with the exercise cell as committed (it loads ``notebooks/solutions/ex05_count_in_store.py``):
the check must pass. Then a wrong answer takes the exercise cell's place in the same kernel, and the check must fail
with an ``AssertionError`` that says what is wrong.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOK = "05_swapping_the_store.ipynb"
CHECK_TAG = "exercise-check"
WRONG = """
from chatlab.stores import open_store

async def count_in_store(store_url, key):  # wrong: a new, empty in-memory store, not the notebook's file
    store = open_store("memory://")
    try:
        return len(await store.get(key))
    finally:
        await store.close()
"""
WORDS = "count_in_store found 0 messages, but the SQLite file holds 10"


def error_of(cell: nbformat.NotebookNode) -> nbformat.NotebookNode | None:
    return next((output for output in cell.get("outputs", []) if output.output_type == "error"), None)


def test_the_check_passes_with_the_reference_and_fails_with_a_wrong_answer() -> None:
    notebook = nbformat.read(NOTEBOOKS / NOTEBOOK, as_version=4)
    checks = [i for i, cell in enumerate(notebook.cells) if CHECK_TAG in cell.metadata.get("tags", [])]
    assert len(checks) == 1, f"{NOTEBOOK}: one cell tagged {CHECK_TAG!r} expected"
    check = notebook.cells[checks[0]]
    exercise = notebook.cells[checks[0] - 1]
    assert exercise.cell_type == "code" and "solutions." in exercise.source, "no solution in the exercise cell"

    notebook.cells = [
        *notebook.cells[: checks[0] + 1],  # up to the check, with the reference solution
        new_code_cell(textwrap.dedent(WRONG).strip()),
        new_code_cell(check.source),
    ]
    where = {"metadata": {"path": str(NOTEBOOKS)}}  # the kernel starts in notebooks/, as JupyterLab starts it
    client = NotebookClient(notebook, timeout=600, kernel_name="python3", allow_errors=True, resources=where)
    client.execute()

    failed = [(i, error_of(cell)) for i, cell in enumerate(notebook.cells[:-2]) if error_of(cell) is not None]
    assert not failed, f"cells failed before the wrong answer: {failed}"
    error = error_of(notebook.cells[-1])
    assert error is not None, "the check passed with a wrong answer"
    assert error.ename == "AssertionError", f"{error.ename}: {error.evalue}"
    assert WORDS in error.evalue, f"the check's message does not say {WORDS!r}: {error.evalue}"
