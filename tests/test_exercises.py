"""Each notebook's "On your own" check can pass and can fail: run with the reference solution (solutions/NN_name.py)
it passes; run with a plausible wrong answer (solutions/wrong/NN_name.py) it fails with an AssertionError that says
what is wrong; run with the notebook's own unfinished cell it tells the learner it is their turn, without failing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kernels import ROOT, code_cells, started_kernel

SOLUTIONS = sorted((ROOT / "solutions").glob("[0-9]*.py"))


def notebook_of(solution: Path) -> Path:
    notebook = ROOT / "notebooks" / f"{solution.stem}.ipynb"
    assert notebook.exists(), f"{solution.relative_to(ROOT)} solves no notebook: {notebook.name} does not exist"
    return notebook


@pytest.mark.parametrize("solution", SOLUTIONS, ids=[path.stem for path in SOLUTIONS])
def test_the_check_passes_with_the_solution_and_fails_with_a_wrong_answer(solution: Path) -> None:
    notebook = notebook_of(solution)
    cells = code_cells(notebook)
    check = max(index for index, code in enumerate(cells) if "assert" in code)  # the last cell that asserts
    wrong = ROOT / "solutions" / "wrong" / solution.name
    assert wrong.exists(), f"{wrong.relative_to(ROOT)} is missing: the check must be shown to fail too"

    with started_kernel(notebook) as kernel:
        kernel.run_cells(cells[:check], notebook, "up to the check")
        printed, reply = kernel.run(cells[check])
        assert reply["status"] == "ok", f"the check fails on the notebook as committed: {reply.get('evalue')}"
        assert "your turn" in printed.lower(), f"an unfinished exercise should be announced, not judged: {printed}"

        kernel.run_cells([solution.read_text(encoding="utf-8")], notebook, "the reference solution")
        printed, reply = kernel.run(cells[check])
        assert reply["status"] == "ok", f"the check fails with the reference solution: {reply.get('evalue')}"
        assert "your turn" not in printed.lower(), printed

        kernel.run_cells([wrong.read_text(encoding="utf-8")], notebook, "the wrong answer")
        printed, reply = kernel.run(cells[check])
        assert reply["status"] == "error", f"the check passes with the wrong answer {wrong.name}: {printed}"
        assert reply["ename"] == "AssertionError", f"the check fails with {reply['ename']}, not a plain assert"
        assert len(reply["evalue"].split()) >= 8, f"the check's message does not say what is wrong: {reply['evalue']!r}"
