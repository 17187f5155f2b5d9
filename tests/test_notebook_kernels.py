"""Every notebook driven through a real kernel the way people use JupyterLab, not only "Restart and Run All".

For each notebook in ``notebooks/``, in one kernel (this environment's ipykernel, ``CHATLAB_LLM=offline``): the
first half of its code cells, then all of them (a learner who ran half, went back and pressed Run All). No cell may
fail, and the kernel may not listen on more sockets afterwards than before the first cell: whatever a notebook
starts, its own cells stop, even when a start cell ran twice. A cell that pauses (it calls ``pause(``) must stop
promptly when the stop button is pressed during the pause.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.kernels import ROOT, Kernel, code_cells, listening, started_kernel

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
PAUSE_CALL = re.compile(r"\bpause\(")
INTERRUPT_AFTER = 0.5  # seconds into the pause cell
STOPPED_WITHIN = 2.0  # seconds after the interrupt: what a learner pressing stop may wait at most


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_half_then_run_all_leaves_nothing_listening(notebook: Path) -> None:
    cells = code_cells(notebook)
    with started_kernel(notebook) as kernel:
        pid = kernel.pid()
        before = listening(pid)

        kernel.run_cells(cells[: len(cells) // 2], notebook, "the first half")
        kernel.run_cells(cells, notebook, "Run All after the first half")

        left = listening(pid) - before
        assert not left, (
            f"{notebook.name} leaves {len(left)} socket(s) listening after half a run then Run All: {sorted(left)}. "
            "A start cell must return the server already running or stop the old one, and the last cells stop all."
        )

        for index, code in enumerate(cells):
            if PAUSE_CALL.search(code):
                assert_interrupt_stops(kernel, code, f"{notebook.name}, code cell {index}")


def assert_interrupt_stops(kernel: Kernel, code: str, where: str) -> None:
    """Run a pause cell, press stop 0.5 s in, and check the cell ends within 2 s of that."""
    _, took = kernel.run_interrupted(code, INTERRUPT_AFTER)
    assert took <= STOPPED_WITHIN, (
        f"{where}: the cell went on {took:.1f} s after the stop button (an interrupt); it must stop within "
        f"{STOPPED_WITHIN:.0f} s. Use chatlab.pause, in a cell without `await` (ipykernel does not interrupt "
        "an `await` cell until it ends)"
    )
