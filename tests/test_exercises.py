"""Each "On your own" check (notebooks 1-5, 8 and 9) passes with the reference solution and fails, in plain words,
without it.

A notebook runs in a real kernel up to its check cell, with the exercise cell as committed (it loads the reference
solution from ``notebooks/solutions``): the check must pass. Then a wrong answer takes the exercise cell's place in the
same kernel, and the check must fail with an ``AssertionError`` that says what is wrong.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
CHECK_TAG = "exercise-check"

# notebook -> (a wrong answer in the exercise cell's place, words the failing check must say)
WRONG_ANSWERS = {
    "01_chat_history_service.ipynb": (
        """
        one_message_path = "/chat-history/{conversationKey}/{index}"
        app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) != one_message_path]

        @app.get(one_message_path)  # wrong: the whole history, not one message
        def get_one_message(conversationKey: str, index: int):
            return store.get_messages(conversationKey)
        """,
        "should return the second message (the tool call)",
    ),
    "02_remote_chat_history_provider.ipynb": (
        """
        class SkipToolResultsProvider(remote_provider.RemoteChatHistoryProvider):  # wrong: keeps the tool call
            async def get_messages(self, session_id, *, state=None, **kwargs):
                messages = await super().get_messages(session_id, state=state, **kwargs)
                return [m for m in messages if str(m.role) != "tool"]
        """,
        "The load hook returned the roles ['user', 'assistant', 'assistant']",
    ),
    "03_running_the_agent.ipynb": (
        """
        def elapsed_seconds(messages):  # wrong: not computed
            return 0
        """,
        "elapsed_seconds gave 0 s, but session 1's two GetDateTime results are at least 10 s apart",
    ),
    "04_second_run.ipynb": (
        """
        import subprocess
        import sys

        def resume_in_new_process(service_url, key):  # wrong: a new process that resumes nothing
            return subprocess.run([sys.executable, "-c", "print('hello')"], capture_output=True, text=True).stdout
        """,
        "The new process did not resume the conversation",
    ),
    "05_swapping_the_store.ipynb": (
        """
        from chatlab.stores import open_store

        async def count_in_store(store_url, key):  # wrong: a new, empty in-memory store, not the notebook's file
            store = open_store("memory://")
            try:
                return len(await store.get(key))
            finally:
                await store.close()
        """,
        "count_in_store found 0 messages, but the SQLite file holds 10",
    ),
    "08_long_conversations.ipynb": (
        """
        def summary_view(messages):  # wrong: what follows the latest checkpoint, without the checkpoint itself
            marks = [i for i, m in enumerate(messages) if "chatlab.summaryThrough" in m.get("additionalProperties", {})]
            return messages[marks[-1] + 1 :] if marks else messages
        """,
        "summary_view gave 6 messages for 'long-conversation', but the service's summary view holds 7",
    ),
    "09_several_agents.ipynb": (
        """
        def my_own_turns(messages, agent):  # wrong: every message, the other agents' too
            return list(messages)
        """,
        "my_own_turns gave 3 messages for Planner on 'planner-and-worker', but its own turns are 2",
    ),
}


def error_of(cell: nbformat.NotebookNode) -> nbformat.NotebookNode | None:
    return next((output for output in cell.get("outputs", []) if output.output_type == "error"), None)


@pytest.mark.parametrize("name", sorted(WRONG_ANSWERS))
def test_the_check_passes_with_the_reference_and_fails_with_a_wrong_answer(name: str) -> None:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    checks = [i for i, cell in enumerate(notebook.cells) if CHECK_TAG in cell.metadata.get("tags", [])]
    assert len(checks) == 1, f"{name}: one cell tagged {CHECK_TAG!r} expected"
    check = notebook.cells[checks[0]]
    exercise = notebook.cells[checks[0] - 1]
    assert exercise.cell_type == "code" and "solutions." in exercise.source, f"{name}: no solution in the exercise cell"
    wrong, words = WRONG_ANSWERS[name]

    notebook.cells = [
        *notebook.cells[: checks[0] + 1],  # up to the check, with the reference solution
        new_code_cell(textwrap.dedent(wrong).strip()),
        new_code_cell(check.source),
    ]
    where = {"metadata": {"path": str(NOTEBOOKS)}}  # the kernel starts in notebooks/, as JupyterLab starts it
    client = NotebookClient(notebook, timeout=600, kernel_name="python3", allow_errors=True, resources=where)
    client.execute()

    failed = [(i, error_of(cell)) for i, cell in enumerate(notebook.cells[:-2]) if error_of(cell) is not None]
    assert not failed, f"{name}: cells failed before the wrong answer: {failed}"
    error = error_of(notebook.cells[-1])
    assert error is not None, f"{name}: the check passed with a wrong answer"
    assert error.ename == "AssertionError", f"{name}: {error.ename}: {error.evalue}"
    assert words in error.evalue, f"{name}: the check's message does not say {words!r}: {error.evalue}"
