"""The checks of the notebooks' "On your own" exercises: each judges the behaviour the task asks for.

Each check starts what it needs (its own app, service or store) and stops it again, so it gives the same verdict after
Run All (whose last cell closes the notebook's clients and servers) and after any earlier attempt. It feeds the answer
conversations of its own, chosen so that a typical wrong answer shows, and raises :class:`ExerciseNotDone` with what to
change; any answer that behaves as asked passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
from agent_framework import AgentSession, Message
from fastapi import FastAPI

from ..client.codec import message_to_meai, messages_from_meai
from ..client.http import AsyncChatHistoryClient
from ..client.provider import KEY_FIELD
from ..client.views import own_turns, owners
from ..runner import BackgroundServer
from ..service import create_app
from ..vocabulary import SUMMARY_THROUGH
from .agent import AGENT_NAME
from .guards import NotebookStepError
from .team import PLANNER_NAME, WORKER_NAME

ELAPSED_QUESTION = "最初の時刻からどれくらい経過していますか?"


class ExerciseNotDone(NotebookStepError, AssertionError):
    """The answer does not do what the exercise asks; the message says what to change."""


def require(condition: bool, message: str) -> None:
    """Raise :class:`ExerciseNotDone` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise ExerciseNotDone(message)


@contextlib.asynccontextmanager
async def serving(app: Any, name: str) -> AsyncIterator[str]:
    """``app`` on a free port of its own for the check's requests; its URL (started and stopped off the event loop)."""
    server = BackgroundServer(app, name=name)
    await asyncio.to_thread(server.start)
    try:
        yield server.url
    finally:
        await asyncio.to_thread(server.stop)


@contextlib.asynccontextmanager
async def fresh_service(store: str = "memory://") -> AsyncIterator[str]:
    """A chat history service of the check's own (never the notebook's, which Run All may have stopped)."""
    async with serving(create_app(store), "exercise-check-service") as url:
        yield url


def tool_turn(question: str, call_id: str, time: str, answer: str, author: str = AGENT_NAME) -> list[dict[str, Any]]:
    """One run with a ``GetDateTime`` call, as the article stores it: question, tool call, tool result (unsigned, as
    a result the framework hands back), answer; the agent's messages signed by ``author``."""
    return [
        {"role": "user", "contents": [{"$type": "text", "text": question}]},
        {
            "authorName": author,
            "role": "assistant",
            "contents": [{"$type": "functionCall", "callId": call_id, "name": "GetDateTime", "arguments": {}}],
        },
        {"role": "tool", "contents": [{"$type": "functionResult", "callId": call_id, "result": time}]},
        {"authorName": author, "role": "assistant", "contents": [{"$type": "text", "text": answer}]},
    ]


def text_turn(question: str, answer: str, author: str = AGENT_NAME) -> list[dict[str, Any]]:
    """One run the model answered without a tool: question, answer (signed by ``author``)."""
    return [
        {"role": "user", "contents": [{"$type": "text", "text": question}]},
        {"authorName": author, "role": "assistant", "contents": [{"$type": "text", "text": answer}]},
    ]


# The article's session 1 after its second run; the answers' texts give the times as a model may word them, so an
# answer that reads the texts instead of the tool results goes wrong.
FIRST_RUN = tool_turn(
    "現在時刻を教えてください", "call_1", "2026-04-16 01:30:52", "現在の日時は 2026年4月16日 01:30 頃です。"
)
SECOND_RUN = tool_turn(
    "もう一度現在時刻を取得してください", "call_2", "2026-04-16 01:31:05", "01:31 を回ったところです。"
)


def _text(message: dict[str, Any]) -> str:
    return "".join(content.get("text", "") for content in message["contents"])


def _quoted_tail(output: str) -> str:
    return f"What it printed ends with:\n{output[-600:]}" if output.strip() else "It printed nothing."


# --- notebook 1 ---------------------------------------------------------------------------------------------------


async def check_get_one_message(add_get_one_message: Callable[[FastAPI, Any], None], store_class: type) -> None:
    """Notebook 1: ``add_get_one_message(app, store)`` adds ``GET /chat-history/{key}/{index}`` to a new app."""
    store = store_class()
    app = FastAPI()
    add_get_one_message(app, store)
    store.append_messages("exercise-01", FIRST_RUN)
    async with serving(app, "exercise-check-01") as url, httpx.AsyncClient(base_url=url) as http:
        second = await http.get("/chat-history/exercise-01/1")
        last = await http.get("/chat-history/exercise-01/3")
        past = await http.get("/chat-history/exercise-01/4")
        unknown = await http.get("/chat-history/never-written/0")
    require(
        second.status_code == 200,
        f"GET /chat-history/<key>/1 answered {second.status_code}: add the route to the `app` you are given with "
        "@app.get(...), and read the messages from the `store` you are given",
    )
    require(
        second.json() == FIRST_RUN[1],
        f"GET /chat-history/<key>/1 should return the second message (the tool call), not {str(second.json())[:80]}: "
        "count from 0",
    )
    require(
        last.status_code == 200 and last.json() == FIRST_RUN[3],
        f"GET /chat-history/<key>/3 answered {last.status_code} {last.text[:80]}, but the conversation's last "
        "message (the answer) is message 3: count from 0",
    )
    require(
        past.status_code == 404,
        f"GET /chat-history/<key>/4 answered {past.status_code}: the conversation has 4 messages (0 to 3), so there "
        "is no message 4 and the answer should be 404",
    )
    require(
        unknown.status_code == 404,
        f"GET /chat-history/<a key never written>/0 answered {unknown.status_code}: an unknown conversation has no "
        "message 0, so the answer should be 404",
    )


# --- notebook 2 ---------------------------------------------------------------------------------------------------


async def check_skip_tool_results(provider_class: Callable[[str], Any]) -> None:
    """Notebook 2: the provider's load hook leaves out tool calls and results; it still stores every message."""
    session = AgentSession()
    async with fresh_service() as url, httpx.AsyncClient(base_url=url) as http:
        provider = provider_class(url)
        try:
            state = session.state.setdefault(provider.source_id, {})
            with contextlib.redirect_stdout(io.StringIO()):  # the provider's log lines: not part of the verdict
                for run in (FIRST_RUN, SECOND_RUN):
                    request, response = messages_from_meai(run[:1]), messages_from_meai(run[1:])
                    context = SimpleNamespace(input_messages=request, response=SimpleNamespace(messages=response))
                    await provider.after_run(agent=None, session=session, context=context, state=state)
                loaded = await provider.get_messages(session.session_id, state=state)  # the load hook
        finally:
            await provider.aclose()
        key = state.get(KEY_FIELD)
        stored = len((await http.get(f"/chat-history/{key}")).json()) if key else 0
    require(
        stored == 8,
        f"The service holds {stored} messages of two tool runs, not 8: leave the tool steps out when loading, "
        "not when storing",
    )
    roles = [str(message.role) for message in loaded]
    require(
        roles == ["user", "assistant"] * 2,
        f"The load hook returned the roles {roles} for two tool runs. Expected only each question and its answer "
        "(user, assistant, user, assistant): leave out the tool call (an assistant message with a function_call) and "
        "the tool result (role tool)",
    )
    answered = [_text(message) for message in (FIRST_RUN[0], FIRST_RUN[3], SECOND_RUN[0], SECOND_RUN[3])]
    require(
        [message.text for message in loaded] == answered,
        "The load hook should return each question and its answer with their texts as stored",
    )


# --- notebook 3 ---------------------------------------------------------------------------------------------------


def check_elapsed_seconds(elapsed_seconds: Callable[[Sequence[Message]], int | None]) -> None:
    """Notebook 3: ``elapsed_seconds(messages)`` takes the first and the last tool result; ``None`` below two."""
    third_run = tool_turn("もう一度現在時刻を取得してください", "call_3", "2026-04-16 01:32:10", "01:32 です。")
    cases = [
        ("session 1 of the article, two tool results 13 s apart", [*FIRST_RUN, *SECOND_RUN], 13),
        ("three tool results, the first 78 s before the last", [*FIRST_RUN, *SECOND_RUN, *third_run], 78),
        ("one tool result", FIRST_RUN, None),
        (
            "no tool result (the model answered without calling GetDateTime)",
            text_turn("こんにちは", "こんにちは。"),
            None,
        ),
    ]
    for what, history, expected in cases:
        try:
            seconds = elapsed_seconds(messages_from_meai(history))
        except Exception as error:  # the learner's code: say which conversation broke it
            raise ExerciseNotDone(
                f"elapsed_seconds raised {type(error).__name__}: {error} on a conversation with {what}. "
                + ("Return None when there are fewer than two tool results." if expected is None else "")
            ) from error
        if expected is None:
            require(
                seconds is None,
                f"elapsed_seconds gave {seconds!r} for a conversation with {what}: with fewer than two tool results "
                "there is nothing to measure, so return None",
            )
            continue
        require(
            isinstance(seconds, int) and not isinstance(seconds, bool),
            f"elapsed_seconds should return a whole number of seconds (an int), not {seconds!r}",
        )
        require(
            seconds == expected,
            f"elapsed_seconds gave {seconds} s, but the conversation with {what} needs {expected} s: take the times "
            "from the tool results (contents with type == 'function_result', their .result), the first and the "
            "last one, not from the answers' texts",
        )


# --- notebook 4 ---------------------------------------------------------------------------------------------------


async def check_resume_in_new_process(resume_in_new_process: Callable[[str, str], str]) -> None:
    """Notebook 4: a new process resumes the conversation by its key, asks the elapsed time and prints the answer."""
    async with fresh_service() as url, AsyncChatHistoryClient(url) as client:
        key = "exercise04first0run0000000000000"
        await client.append(key, [*FIRST_RUN, *SECOND_RUN])
        output = await asyncio.to_thread(resume_in_new_process, url, key)
        messages = (await client.read(key)).messages
        keys = [summary.conversation_key for summary in await client.summaries()]
    require(isinstance(output, str), f"resume_in_new_process should return what the process printed, not {output!r}")
    new = messages[8:]
    if not new:
        others = [other for other in keys if other != key]
        require(
            not others,
            f"The new process started a new conversation ({others[0] if others else ''}) instead of resuming {key}: "
            "give the key to attach_to_session (or create_or_resume_session) before the run. " + _quoted_tail(output),
        )
        raise ExerciseNotDone(
            f"The new process did not resume the conversation {key}: nothing was added to it. Resume it by its key "
            "and run the agent once. " + _quoted_tail(output)
        )
    require(
        _text(new[0]) == ELAPSED_QUESTION,
        f"The new process asked {_text(new[0])!r}; the task asks {ELAPSED_QUESTION!r}. " + _quoted_tail(output),
    )
    answer = _text(new[-1])
    require(
        new[-1].get("role") == "assistant" and answer != "" and answer in output,
        "The new process resumed the conversation, but did not print the answer it stored: print the agent's "
        "response (print_agent_response, or print(response.text)) and return the process's output. "
        + _quoted_tail(output),
    )


# --- notebook 5 ---------------------------------------------------------------------------------------------------


async def check_count_in_store(count_in_store: Callable[[str, str], Awaitable[int] | int]) -> None:
    """Notebook 5: count one conversation's messages in the store itself, while no service runs on it."""
    with tempfile.TemporaryDirectory(prefix="chatlab-exercise-05-") as folder:
        store_url = f"sqlite:///{Path(folder) / 'check.db'}"
        async with fresh_service(store_url) as url, AsyncChatHistoryClient(url) as client:
            await client.append("exercise-05-a", [*FIRST_RUN, *SECOND_RUN][:7])
            await client.append("exercise-05-b", FIRST_RUN[:3])
        for key, expected in (("exercise-05-a", 7), ("exercise-05-b", 3), ("never-written", 0)):
            counted = count_in_store(store_url, key)
            if inspect.isawaitable(counted):
                counted = await counted
            require(
                isinstance(counted, int) and not isinstance(counted, bool),
                f"count_in_store should return a number of messages (an int), not {counted!r}",
            )
            require(
                counted == expected,
                f"count_in_store found {counted} messages for {key!r}, but the SQLite file holds {expected}. "
                "Open the store from the URL you are given (not a new memory:// store) and count what it holds "
                "for that one key",
            )


# --- notebook 6 ---------------------------------------------------------------------------------------------------


async def check_append_if_unchanged(
    append_if_unchanged: Callable[[httpx.AsyncClient, str, dict[str, Any]], Any],
) -> None:
    """Notebook 6: write only if nobody wrote since the read (``If-Match``); ``True`` when written, else ``False``."""
    mine = text_turn("私の質問", "私の答え")[0]
    theirs = text_turn("他の人の質問", "他の人の答え")[0]
    async with fresh_service() as url, httpx.AsyncClient(base_url=url) as other_writer:
        await other_writer.post("/chat-history/quiet", json={"messages": FIRST_RUN[:1]})
        await other_writer.post("/chat-history/busy", json={"messages": FIRST_RUN[:1]})
        interrupted = False

        async def write_in_between(response: httpx.Response) -> None:
            """Another writer appends right after the learner's first read of ``busy``."""
            nonlocal interrupted
            if not interrupted and response.request.method == "GET" and response.url.path.endswith("/busy"):
                interrupted = True
                await other_writer.post("/chat-history/busy", json={"messages": [theirs]})

        async with httpx.AsyncClient(base_url=url) as http:
            quiet = await append_if_unchanged(http, "quiet", mine)
        async with httpx.AsyncClient(base_url=url, event_hooks={"response": [write_in_between]}) as http:
            busy = await append_if_unchanged(http, "busy", mine)
        quiet_stored = (await other_writer.get("/chat-history/quiet")).json()
        busy_stored = (await other_writer.get("/chat-history/busy")).json()
    require(
        quiet_stored == [FIRST_RUN[0], mine],
        f"With nobody else writing, the conversation should end with your message, but it holds {len(quiet_stored)} "
        "message(s): read it, add the message at the end and write it back",
    )
    require(quiet is True, f"append_if_unchanged wrote the message but returned {quiet!r}: return True when written")
    require(interrupted, "append_if_unchanged never read the conversation (GET) before writing: read it first")
    require(
        theirs in busy_stored,
        "Your write removed the message another writer appended between your read and your write: send "
        "If-Match with the ETag you read, and the service refuses the write (412) instead",
    )
    require(
        mine not in busy_stored,
        "Your message was written although the conversation changed after your read: send If-Match with the ETag "
        "of your read, not a fresh one",
    )
    require(
        busy is False, f"The service refused the write (412), but append_if_unchanged returned {busy!r}: return False"
    )


# --- notebook 8 ---------------------------------------------------------------------------------------------------


def checkpoint(through: int, text: str) -> dict[str, Any]:
    """A summary checkpoint: an assistant message summarizing messages 1..``through``."""
    return {
        "role": "assistant",
        "contents": [{"$type": "text", "text": text}],
        "additionalProperties": {SUMMARY_THROUGH: through},
    }


async def check_summary_view(summary_view: Callable[[list[dict[str, Any]]], Any]) -> None:
    """Notebook 8: ``summary_view(messages)`` answers what the service's ``?view=summary`` answers."""
    runs = [*FIRST_RUN, *SECOND_RUN]
    conversations = {
        "no-checkpoint": runs,
        "one-checkpoint": [*runs, checkpoint(6, "summary of 1-6"), *text_turn(ELAPSED_QUESTION, "13 秒です。")],
        "two-checkpoints": [
            *runs,
            checkpoint(4, "summary of 1-4"),
            *FIRST_RUN,
            checkpoint(11, "summary of 1-11"),
            *text_turn(ELAPSED_QUESTION, "13 秒です。"),
        ],
    }
    async with fresh_service() as url, AsyncChatHistoryClient(url) as client:
        for name, messages in conversations.items():
            await client.append(name, messages)
            expected = (await client.read_summary(name)).messages
            yours = summary_view((await client.read(name)).messages)
            require(
                isinstance(yours, list), f"summary_view should return a list of messages, not {type(yours).__name__}"
            )
            require(
                yours == expected,
                f"summary_view gave {len(yours)} messages for {name!r}, but the service's summary view holds "
                f"{len(expected)}. It starts with the latest checkpoint, then the messages after its N; "
                "a conversation with no checkpoint is its own view.",
            )


# --- notebook 9 ---------------------------------------------------------------------------------------------------


def team_turn(question: str, plan: str, answer: str) -> list[dict[str, Any]]:
    """One turn of notebook 9's team: the user's question, the planner's plan, the worker's answer."""
    return [*text_turn(question, plan, PLANNER_NAME), *text_turn(question, answer, WORKER_NAME)[1:]]


def team_turn_with_tools(question: str, plan: str, answer: str) -> list[dict[str, Any]]:
    """The same turn with both agents calling ``GetDateTime`` first; the tool results carry no author, so only the
    call each answers (its id) says whose they are."""
    planner = tool_turn(question, "call_planner", "2026-04-16 01:30:52", plan, PLANNER_NAME)
    worker = tool_turn(question, "call_worker", "2026-04-16 01:31:05", answer, WORKER_NAME)
    return [*planner, *worker[1:]]


TOKYO = "What time is it in Tokyo?"
PARIS = "And in Paris?"
TEAM_CONVERSATIONS = {  # notebook 9's two conversations, then one with tool steps
    "planner-and-worker": team_turn(TOKYO, "Plan 1: look it up, answer in one line", "It is 10:30 in Tokyo."),
    "sequential-workflow": [
        *team_turn(TOKYO, "Plan 1: look it up, answer in one line", "It is 10:30 in Tokyo."),
        *team_turn(PARIS, "Plan 2: look it up, answer in one line", "It is 02:30 in Paris."),
    ],
    "with-tool-steps": team_turn_with_tools(TOKYO, "Plan 1: answer with the time", "It is 10:31 in Tokyo."),
}


def _described(message: Message, owner: str | None) -> str:
    """A message as the check names it: its role and whose it is."""
    if message.role == "tool":
        return f"the tool result of {owner}'s call"
    if message.role == "assistant":
        steps = "tool call" if any(content.type == "function_call" for content in message.contents) else "answer"
        return f"{owner}'s {steps}"
    return f"a {message.role} message"


def _own_turns_mistake(messages: list[Message], yours: list[dict[str, Any]], agent: str) -> str:
    """What is wrong with ``yours`` as ``agent``'s own turns: the first message kept or left out wrongly."""
    mine = {id(message) for message in own_turns(messages, agent)}
    for position, (message, owner) in enumerate(zip(messages, owners(messages), strict=True), start=1):
        kept = message_to_meai(message) in yours
        if kept and id(message) not in mine:
            return f"it keeps message {position}, {_described(message, owner)}, which is not {agent}'s"
        if not kept and id(message) in mine:
            return f"it leaves out message {position}, {_described(message, owner)}{_why_kept(message, owner)}"
    return "return them once each, in the conversation's order"


def _why_kept(message: Message, owner: str | None) -> str:
    """Why a view keeps a message the answer left out, for the messages whose owner is not written on them."""
    if owner is None:
        return " (every agent sees the user's messages)"
    if message.role == "tool" and message.author_name is None:
        return " (a tool result belongs to the agent whose call it answers, by its call id)"
    return ""


def check_own_turns(my_own_turns: Callable[[list[Message], str], Sequence[Message]]) -> None:
    """Notebook 9: ``my_own_turns(messages, agent)`` gives what chatlab's ``own_turns`` view gives, for both agents."""
    for key, conversation in TEAM_CONVERSATIONS.items():
        messages = messages_from_meai(conversation)
        for agent in (PLANNER_NAME, WORKER_NAME):
            expected = [message_to_meai(message) for message in own_turns(messages, agent)]
            try:
                yours = [message_to_meai(message) for message in my_own_turns(list(messages), agent)]
            except Exception as error:  # the learner's code: say which conversation broke it
                raise ExerciseNotDone(
                    f"my_own_turns raised {type(error).__name__}: {error} for {agent} on {key!r}: it should return "
                    "a list of the Message objects it was given"
                ) from error
            if yours == expected:
                continue
            counted = (
                f"{len(yours)} messages for {agent} on {key!r}, but its own turns are {len(expected)}"
                if len(yours) != len(expected)
                else f"the wrong {len(yours)} messages for {agent} on {key!r}"
            )
            raise ExerciseNotDone(f"my_own_turns gave {counted}: {_own_turns_mistake(messages, yours, agent)}.")
