"""Each "On your own" check judges the behaviour its task asks for: the reference solution and a second correct answer
written differently pass, typical wrong answers fail with the words that say what to change, and in a real kernel the
check still judges after Run All (which stops the notebook's clients and servers) and after an earlier wrong attempt.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_framework import Message
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from chatlab.stores import open_store
from chatlab.tutorial import exercises
from chatlab.tutorial.exercises import ExerciseNotDone
from chatlab.vocabulary import SUMMARY_THROUGH
from tests.kernels import code_cells, started_kernel

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
CHECK_TAG = "exercise-check"
pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def in_the_notebooks_folder(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Answers import ``remote_provider`` and ``solutions`` and start processes from notebooks/, as in JupyterLab."""
    monkeypatch.chdir(NOTEBOOKS)
    monkeypatch.syspath_prepend(str(NOTEBOOKS))
    yield


def notebook_namespace(notebook: str, *defines: str) -> dict[str, Any]:
    """The notebook's own code cells that define ``defines`` (its classes, as a learner ran them)."""
    namespace: dict[str, Any] = {}
    for code in code_cells(NOTEBOOKS / notebook):
        if any(f"class {name}" in code for name in defines) or "class AppendChatMessagesRequest" in code:
            exec(code, namespace)
    return namespace


def refused(check: Callable[[], Any], words: str) -> str:
    with pytest.raises(ExerciseNotDone) as failure:
        check()
    assert words in str(failure.value), f"the check's message does not say {words!r}: {failure.value}"
    return str(failure.value)


async def refused_async(check: Any, words: str) -> None:
    with pytest.raises(ExerciseNotDone) as failure:
        await check
    assert words in str(failure.value), f"the check's message does not say {words!r}: {failure.value}"


# --- notebook 1 ---------------------------------------------------------------------------------------------------


def get_one_message_by_api_route(app: FastAPI, store: Any) -> None:
    """A second correct answer: add_api_route, and a JSONResponse for the 404."""

    async def one(conversationKey: str, index: int) -> Any:
        messages = store.get_messages(conversationKey)
        return messages[index] if index in range(len(messages)) else JSONResponse({"detail": "none"}, 404)

    app.add_api_route("/chat-history/{conversationKey}/{index}", one, methods=["GET"])


def get_one_message_off_by_one(app: FastAPI, store: Any) -> None:
    @app.get("/chat-history/{conversationKey}/{index}")
    def one(conversationKey: str, index: int) -> Any:
        messages = store.get_messages(conversationKey)
        return messages[index - 1] if 0 < index <= len(messages) else JSONResponse({}, 404)


def get_one_message_whole_history(app: FastAPI, store: Any) -> None:
    @app.get("/chat-history/{conversationKey}/{index}")
    def one(conversationKey: str, index: int) -> Any:
        return store.get_messages(conversationKey)


def get_one_message_without_404(app: FastAPI, store: Any) -> None:
    @app.get("/chat-history/{conversationKey}/{index}")
    def one(conversationKey: str, index: int) -> Any:
        messages = store.get_messages(conversationKey)
        return messages[index] if index < len(messages) else None


async def test_01_get_one_message() -> None:
    from solutions.ex01_get_one_message import add_get_one_message

    store_class = notebook_namespace("01_chat_history_service.ipynb", "InMemoryChatHistoryStore")[
        "InMemoryChatHistoryStore"
    ]
    await exercises.check_get_one_message(add_get_one_message, store_class)
    await exercises.check_get_one_message(get_one_message_by_api_route, store_class)
    check = exercises.check_get_one_message
    await refused_async(check(get_one_message_off_by_one, store_class), "should return the second message")
    await refused_async(check(get_one_message_whole_history, store_class), "should return the second message")
    await refused_async(check(get_one_message_without_404, store_class), "the answer should be 404")


# --- notebook 2 ---------------------------------------------------------------------------------------------------


async def test_02_skip_tool_results() -> None:
    from remote_provider import RemoteChatHistoryProvider
    from solutions.ex02_skip_tool_results import SkipToolResultsProvider

    class KeepTexts(RemoteChatHistoryProvider):  # type: ignore[misc]  # a second correct answer: keep what has text
        async def get_messages(self, session_id: Any, *, state: Any = None, **kwargs: Any) -> list[Message]:
            return [m for m in await super().get_messages(session_id, state=state, **kwargs) if m.text]

    class KeepsTheToolCall(RemoteChatHistoryProvider):  # type: ignore[misc]
        async def get_messages(self, session_id: Any, *, state: Any = None, **kwargs: Any) -> list[Message]:
            return [m for m in await super().get_messages(session_id, state=state, **kwargs) if m.role != "tool"]

    class SkipsWhenStoring(RemoteChatHistoryProvider):  # type: ignore[misc]
        async def save_messages(self, session_id: Any, messages: Any, **kwargs: Any) -> None:
            await super().save_messages(session_id, [m for m in messages if m.text], **kwargs)

    await exercises.check_skip_tool_results(SkipToolResultsProvider)
    await exercises.check_skip_tool_results(KeepTexts)
    words = "The load hook returned the roles ['user', 'assistant', 'assistant', 'user', 'assistant', 'assistant']"
    await refused_async(exercises.check_skip_tool_results(KeepsTheToolCall), words)
    await refused_async(exercises.check_skip_tool_results(SkipsWhenStoring), "The service holds 4 messages")


# --- notebook 3 ---------------------------------------------------------------------------------------------------


def elapsed_by_min_and_max(messages: list[Message]) -> int | None:
    """A second correct answer: fromisoformat, and the span of the results."""
    results = [c.result for m in messages for c in m.contents if c.type == "function_result"]
    if len(results) < 2:
        return None
    return int((datetime.fromisoformat(results[-1]) - datetime.fromisoformat(results[0])).total_seconds())


def elapsed_from_the_texts(messages: list[Message]) -> int | None:
    times = re.findall(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}", " ".join(m.text for m in messages))
    return int((datetime.fromisoformat(times[-1]) - datetime.fromisoformat(times[0])).total_seconds())


def elapsed_of_the_last_two(messages: list[Message]) -> int | None:
    times = [datetime.fromisoformat(c.result) for m in messages for c in m.contents if c.type == "function_result"]
    return int((times[-1] - times[-2]).total_seconds()) if len(times) > 1 else None


def test_03_elapsed_seconds() -> None:
    from solutions.ex03_elapsed_seconds import elapsed_seconds

    exercises.check_elapsed_seconds(elapsed_seconds)
    exercises.check_elapsed_seconds(elapsed_by_min_and_max)
    refused(lambda: exercises.check_elapsed_seconds(lambda messages: 0), "elapsed_seconds gave 0 s")
    refused(lambda: exercises.check_elapsed_seconds(elapsed_from_the_texts), "raised IndexError")
    refused(lambda: exercises.check_elapsed_seconds(elapsed_of_the_last_two), "gave 65 s")
    without_none = refused(
        lambda: exercises.check_elapsed_seconds(lambda m: elapsed_by_min_and_max(m) or 0), "so return None"
    )
    assert "one tool result" in without_none


# --- notebook 4 ---------------------------------------------------------------------------------------------------

RESUME_WITH_CHATLABS_PROVIDER = """
import asyncio, sys
import chatlab
from agent_framework import AgentSession

async def main(url, key):
    llm = await chatlab.connect_llm(announce=False)
    async with chatlab.RemoteChatHistoryProvider(url) as provider:
        agent = chatlab.create_agent(llm.client, provider)
        session = AgentSession()
        provider.attach_to_session(session, key)
        print((await agent.run(sys.argv[3], session=session)).text)
    await llm.aclose()

asyncio.run(main(*sys.argv[1:3]))
"""


def resume_with(code: str, question: str = exercises.ELAPSED_QUESTION) -> Callable[[str, str], str]:
    def resume_in_new_process(service_url: str, key: str) -> str:
        command = [sys.executable, "-c", code, service_url, key, question]
        result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
        return result.stdout + result.stderr

    return resume_in_new_process


async def test_04_resume_in_new_process() -> None:
    from solutions.ex04_resume_in_new_process import resume_in_new_process

    await exercises.check_resume_in_new_process(resume_in_new_process)
    await exercises.check_resume_in_new_process(resume_with(RESUME_WITH_CHATLABS_PROVIDER))
    new_session = RESUME_WITH_CHATLABS_PROVIDER.replace("provider.attach_to_session(session, key)", "")
    await refused_async(exercises.check_resume_in_new_process(resume_with(new_session)), "started a new conversation")
    silent = RESUME_WITH_CHATLABS_PROVIDER.replace("print((await", "((await")
    await refused_async(exercises.check_resume_in_new_process(resume_with(silent)), "did not print the answer")
    await refused_async(
        exercises.check_resume_in_new_process(lambda url, key: "hello"), "did not resume the conversation"
    )


# --- notebook 5 ---------------------------------------------------------------------------------------------------


async def count_by_read(store_url: str, key: str) -> int:
    """A second correct answer: a consistent snapshot, closed in finally."""
    store = open_store(store_url)
    try:
        return len((await store.read(key)).messages)
    finally:
        await store.close()


async def count_in_a_new_memory_store(store_url: str, key: str) -> int:
    store = open_store("memory://")
    try:
        return len(await store.get(key))
    finally:
        await store.close()


async def count_every_conversation(store_url: str, key: str) -> int:
    store = open_store(store_url)
    try:
        return sum(summary.message_count for summary in await store.summaries())
    finally:
        await store.close()


async def test_05_count_in_store() -> None:
    from solutions.ex05_count_in_store import count_in_store

    await exercises.check_count_in_store(count_in_store)
    await exercises.check_count_in_store(count_by_read)
    await refused_async(exercises.check_count_in_store(count_in_a_new_memory_store), "found 0 messages")
    await refused_async(exercises.check_count_in_store(count_every_conversation), "found 10 messages")


# --- notebook 6 ---------------------------------------------------------------------------------------------------


async def append_with_post_if_match(http: httpx.AsyncClient, key: str, message: dict[str, Any]) -> bool:
    """A second correct answer: append only the new message (POST), under the read's ETag."""
    read = await http.get(f"/chat-history/{key}")
    answer = await http.post(
        f"/chat-history/{key}", json={"messages": [message]}, headers={"If-Match": read.headers["etag"]}
    )
    return answer.status_code != 412


async def append_without_if_match(http: httpx.AsyncClient, key: str, message: dict[str, Any]) -> bool:
    read = await http.get(f"/chat-history/{key}")
    return (await http.put(f"/chat-history/{key}", json={"messages": [*read.json(), message]})).is_success


async def append_ignoring_412(http: httpx.AsyncClient, key: str, message: dict[str, Any]) -> bool:
    read = await http.get(f"/chat-history/{key}")
    await http.put(
        f"/chat-history/{key}", json={"messages": [*read.json(), message]}, headers={"If-Match": read.headers["etag"]}
    )
    return True


async def append_under_a_fresh_etag(http: httpx.AsyncClient, key: str, message: dict[str, Any]) -> bool:
    read = await http.get(f"/chat-history/{key}")
    fresh = await http.head(f"/chat-history/{key}")
    answer = await http.put(
        f"/chat-history/{key}", json={"messages": [*read.json(), message]}, headers={"If-Match": fresh.headers["etag"]}
    )
    return answer.status_code != 412


async def test_06_append_if_unchanged() -> None:
    from solutions.ex06_append_if_unchanged import append_if_unchanged

    await exercises.check_append_if_unchanged(append_if_unchanged)
    await exercises.check_append_if_unchanged(append_with_post_if_match)
    check = exercises.check_append_if_unchanged
    await refused_async(check(append_without_if_match), "removed the message another writer appended")
    await refused_async(check(append_ignoring_412), "returned True: return False")
    await refused_async(check(append_under_a_fresh_etag), "removed the message another writer appended")


# --- notebook 8 ---------------------------------------------------------------------------------------------------


def summary_view_forward(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A second correct answer: scan forward, remember the last valid checkpoint."""
    latest = None
    for position, message in enumerate(messages):
        through = (message.get("additionalProperties") or {}).get(SUMMARY_THROUGH)
        if type(through) is int and 0 <= through <= position:
            latest = (position, through)
    if latest is None:
        return messages
    position, through = latest
    return [messages[position], *messages[through:position], *messages[position + 1 :]]


def summary_view_without_the_checkpoint(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    marks = [i for i, m in enumerate(messages) if SUMMARY_THROUGH in m.get("additionalProperties", {})]
    return messages[marks[-1] + 1 :] if marks else messages


async def test_08_summary_view() -> None:
    from solutions.ex08_summary_view import summary_view

    await exercises.check_summary_view(summary_view)
    await exercises.check_summary_view(summary_view_forward)
    await refused_async(exercises.check_summary_view(summary_view_without_the_checkpoint), "summary_view gave")
    await refused_async(exercises.check_summary_view(lambda messages: messages), "summary_view gave")


# --- notebook 9 ---------------------------------------------------------------------------------------------------


def own_turns_by_owner(messages: list[Message], agent: str) -> list[Message]:
    """A second correct answer: first find who made each call, then keep by role."""
    callers = {c.call_id: m.author_name for m in messages for c in m.contents if c.type == "function_call"}

    def owner(message: Message) -> str | None:
        if message.role == "user":
            return None
        if message.role == "tool" and message.author_name is None:
            return callers.get(message.contents[0].call_id)
        return message.author_name

    return [m for m in messages if owner(m) in (None, agent)]


def own_turns_by_author(messages: list[Message], agent: str) -> list[Message]:
    return [m for m in messages if m.author_name in (None, agent)]


def own_turns_without_unsigned_results(messages: list[Message], agent: str) -> list[Message]:
    return [m for m in messages if m.role == "user" or m.author_name == agent]


def own_turns_without_the_user(messages: list[Message], agent: str) -> list[Message]:
    return [m for m in messages if m.author_name == agent or m.role == "tool"]


def test_09_own_turns() -> None:
    from solutions.ex09_own_turns import my_own_turns

    exercises.check_own_turns(my_own_turns)
    exercises.check_own_turns(own_turns_by_owner)
    refused(
        lambda: exercises.check_own_turns(lambda messages, agent: list(messages)),
        "my_own_turns gave 3 messages for Planner on 'planner-and-worker', but its own turns are 2: it keeps "
        "message 3, Worker's answer, which is not Planner's",
    )
    refused(
        lambda: exercises.check_own_turns(own_turns_by_author),
        "for Planner on 'with-tool-steps', but its own turns are 4: it keeps message 6, the tool result of Worker's "
        "call, which is not Planner's",
    )
    refused(
        lambda: exercises.check_own_turns(own_turns_without_unsigned_results),
        "it leaves out message 3, the tool result of Planner's call (a tool result belongs to the agent whose call",
    )
    refused(
        lambda: exercises.check_own_turns(own_turns_without_the_user),
        "it leaves out message 1, a user message (every agent sees the user's messages)",
    )
    refused(lambda: exercises.check_own_turns(lambda messages, agent: None), "my_own_turns raised TypeError")


# --- in a real kernel: after Run All, after a wrong attempt --------------------------------------------------------

# notebook -> (a wrong answer in the exercise cell's place, words the failing check must say)
WRONG_ANSWERS = {
    "01_chat_history_service.ipynb": (
        """
        def add_get_one_message(app, store):  # wrong: the whole history, not one message
            @app.get("/chat-history/{conversationKey}/{index}")
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
        "The load hook returned the roles ['user', 'assistant', 'assistant', 'user', 'assistant', 'assistant']",
    ),
    "03_running_the_agent.ipynb": (
        """
        def elapsed_seconds(messages):  # wrong: not computed
            return 0
        """,
        "elapsed_seconds gave 0 s",
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

        async def count_in_store(store_url, key):  # wrong: a new, empty in-memory store, not the file
            store = open_store("memory://")
            try:
                return len(await store.get(key))
            finally:
                await store.close()
        """,
        "count_in_store found 0 messages",
    ),
    "06_protections.ipynb": (
        """
        async def append_if_unchanged(http, key, message):  # wrong: no If-Match
            read = await http.get(f"/chat-history/{key}")
            return (await http.put(f"/chat-history/{key}", json={"messages": [*read.json(), message]})).is_success
        """,
        "removed the message another writer appended",
    ),
    "08_long_conversations.ipynb": (
        """
        def summary_view(messages):  # wrong: what follows the latest checkpoint, without the checkpoint itself
            marks = [i for i, m in enumerate(messages) if "chatlab.summaryThrough" in m.get("additionalProperties", {})]
            return messages[marks[-1] + 1 :] if marks else messages
        """,
        "summary_view gave",
    ),
    "09_several_agents.ipynb": (
        """
        def my_own_turns(messages, agent):  # wrong: every message, the other agents' too
            return list(messages)
        """,
        "my_own_turns gave 3 messages for Planner on 'planner-and-worker', but its own turns are 2",
    ),
}


def exercise_cells(notebook: Path) -> tuple[str, str]:
    """The exercise cell (it loads the reference solution) and its check, the cell tagged exercise-check."""
    import nbformat

    cells = nbformat.read(notebook, as_version=4).cells
    checks = [i for i, cell in enumerate(cells) if CHECK_TAG in cell.metadata.get("tags", [])]
    assert len(checks) == 1, f"{notebook.name}: one cell tagged {CHECK_TAG!r} expected"
    exercise = cells[checks[0] - 1]
    assert exercise.cell_type == "code" and "solutions." in exercise.source, f"{notebook.name}: no solution there"
    return exercise.source, cells[checks[0]].source


@pytest.mark.parametrize("name", sorted(WRONG_ANSWERS))
def test_the_check_judges_after_run_all_and_after_a_wrong_attempt(name: str) -> None:
    notebook = NOTEBOOKS / name
    exercise, check = exercise_cells(notebook)
    wrong, words = WRONG_ANSWERS[name]
    with started_kernel(notebook) as kernel:
        kernel.run_cells(code_cells(notebook), notebook, "Run All")  # its last cell stops what the notebook started

        kernel.run(textwrap.dedent(wrong).strip())
        _printed, reply = kernel.run(check)
        assert reply["status"] == "error", f"{name}: the check passed with a wrong answer after Run All"
        assert reply["ename"] == "ExerciseNotDone", f"{name}: {reply['ename']}: {reply['evalue']}"
        assert words in reply["evalue"], f"{name}: the check's message does not say {words!r}: {reply['evalue']}"

        kernel.run_cells([exercise, check], notebook, "the reference again, after the wrong attempt")
