"""The course's common mistakes, made in a real kernel, each end in one plain sentence that says what happened and
which cell or command fixes it (a ``NotebookStepError``), never a traceback from inside chatlab or the framework."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import httpx
import pytest

from chatlab.service import start_service
from tests.kernels import ROOT, code_cells, started_kernel

NOTEBOOKS = ROOT / "notebooks"


def cell_with(notebook: Path, words: str) -> int:
    """The index of the first code cell that contains ``words``."""
    return next(index for index, code in enumerate(code_cells(notebook)) if words in code)


def a_closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def test_notebook_3_after_a_partial_notebook_2_says_to_run_all_of_it(tmp_path: Path) -> None:
    folder = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, folder, ignore=shutil.ignore_patterns("*.md", "__pycache__"))
    second = folder / "02_remote_chat_history_provider.ipynb"
    with started_kernel(second) as kernel:  # the learner runs notebook 2 up to part (2) and stops there
        kernel.run_cells(code_cells(second)[: cell_with(second, "# (2) before a run") + 1], second, "part of it")
    assert "after_run" not in (folder / "remote_provider.py").read_text(encoding="utf-8")

    third = folder / "03_running_the_agent.ipynb"
    cells = code_cells(third)
    importing = cell_with(third, "from remote_provider import RemoteChatHistoryProvider")
    with started_kernel(third) as kernel:
        kernel.run_cells(cells[:importing], third, "the cells before the provider's import")
        printed, reply = kernel.run(cells[importing])
    assert reply["status"] == "error" and reply["ename"] == "NotebookStepError", reply
    assert "lacks part (3) and (4)" in reply["evalue"] and "Run All there" in reply["evalue"], reply["evalue"]
    assert "Traceback" not in printed and "File " not in printed, printed


def test_a_stopped_service_named_by_the_variable_says_how_to_start_it() -> None:
    third = NOTEBOOKS / "03_running_the_agent.ipynb"
    with started_kernel(third, {"CHAT_HISTORY_SERVICE_URL": a_closed_port_url()}) as kernel:
        printed, reply = kernel.run(code_cells(third)[0])
    assert reply["status"] == "error" and reply["ename"] == "NotebookStepError", reply
    assert "No chat history service answers at" in reply["evalue"], reply["evalue"]
    assert "python -m chatlab serve" in reply["evalue"], reply["evalue"]
    assert "Traceback" not in printed, printed


def test_running_notebook_6s_first_cell_again_stops_the_last_run_quietly() -> None:
    sixth = NOTEBOOKS / "06_protections.ipynb"
    cells = code_cells(sixth)
    with started_kernel(sixth) as kernel:
        kernel.run_cells(cells[: cell_with(sixth, "print_response(await anonymous.get") + 1], sixth, "the first cells")
        printed, reply = kernel.run(cells[0])  # the clients of the first run are still connected
        assert reply["status"] == "ok", reply
        assert "Traceback" not in printed and "CancelledError" not in printed, printed
        kernel.run_cells(cells, sixth, "Run All")


def test_an_interrupted_measurement_in_notebook_7_says_to_run_it_again() -> None:
    seventh = NOTEBOOKS / "07_what_incremental_reads_buy.ipynb"
    cells = code_cells(seventh)
    measuring = cell_with(seventh, "for length in tqdm(LENGTHS")
    with started_kernel(seventh) as kernel:
        kernel.run_cells(cells[:measuring], seventh, "the cells before the measurement")
        interrupted, _ = kernel.run_interrupted(cells[measuring], after=3)  # into the half-minute measurement
        assert interrupted["status"] == "error", interrupted  # KeyboardInterrupt, or CancelledError in an await
        printed, reply = kernel.run(cells[measuring + 1])
        assert reply["status"] == "error" and reply["ename"] == "NotebookStepError", reply
        assert "The measurement was stopped after" in reply["evalue"], reply["evalue"]
        assert "again" in reply["evalue"] and "Traceback" not in printed, printed
        kernel.run_cells(cells, seventh, "Run All")  # the stop cell ends what the first run started


def test_notebook_4_counts_the_conversations_a_shared_service_already_holds() -> None:
    fourth = NOTEBOOKS / "04_second_run.ipynb"
    service = start_service(store="memory://", port=0, log_level="error")  # shared: started before the notebook
    try:
        message = {"role": "user", "contents": [{"$type": "text", "text": "hello"}]}
        for key in ("held0000000000000000000000000001", "held0000000000000000000000000002", "held-three"):
            httpx.post(f"{service.url}/chat-history/{key}", json={"messages": [message]}).raise_for_status()
        with started_kernel(fourth, {"CHAT_HISTORY_SERVICE_URL": service.url}) as kernel:
            printed, reply = kernel.run(code_cells(fourth)[0])
    finally:
        service.stop()
    assert reply["status"] == "ok", printed
    assert "The service holds 3 conversations from before" in printed, printed


@pytest.fixture(autouse=True)
def _no_service_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHAT_HISTORY_SERVICE_URL", raising=False)
